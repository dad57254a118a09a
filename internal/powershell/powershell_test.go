package powershell

import (
	"strings"
	"testing"
)

// hostile are values that would break out of a careless quoting: quotes of every kind PowerShell
// knows, variables, subexpressions, backticks, newlines and statement separators.
var hostile = []string{
	"",
	"plain",
	`C:\Program Files\containerd\bin\containerd.exe`,
	"it's",
	"''",
	"'; Remove-Item -Recurse C:\\ ; '",
	"$env:COMPUTERNAME",
	"$(Stop-Computer)",
	"`$x`n",
	"line one\nline two\r\nline three",
	"‘smart’ ‚quotes‛",
	"’; Stop-Computer; ’",
	`"double" and "$(Get-Date)"`,
	"@'\nhere-string\n'@",
	"tab\there # comment",
}

// verbatim reads a PowerShell single-quoted string literal the way PowerShell's tokenizer does
// (about_Quoting_Rules): the literal ends at the first single quote character that is not
// doubled; a doubled one stands for the second character. It reports whether the literal spans
// the whole input, that is whether nothing after it would run as code.
func verbatim(lit string) (string, bool) {
	r := []rune(lit)
	if len(r) < 2 || !singleQuotes[r[0]] {
		return "", false
	}
	var b strings.Builder
	for i := 1; i < len(r); i++ {
		if !singleQuotes[r[i]] {
			b.WriteRune(r[i])
			continue
		}
		if i+1 < len(r) && singleQuotes[r[i+1]] {
			b.WriteRune(r[i+1])
			i++
			continue
		}
		return b.String(), i == len(r)-1
	}
	return "", false // unterminated
}

func TestQuoteRoundTrips(t *testing.T) {
	for _, s := range hostile {
		q := Quote(s)
		got, whole := verbatim(q)
		if !whole || got != s {
			t.Errorf("Quote(%q) = %s, which PowerShell reads as %q (whole literal: %v)", s, q, got, whole)
		}
	}
}

func TestQuoteList(t *testing.T) {
	if got := QuoteList(nil); got != "@()" {
		t.Errorf("QuoteList(nil) = %s", got)
	}
	if got := QuoteList([]string{"a", "it's"}); got != "@('a','it''s')" {
		t.Errorf("QuoteList = %s", got)
	}
}

func TestEncodeDecode(t *testing.T) {
	for _, s := range hostile {
		got, err := Decode(Encode(s))
		if err != nil || got != s {
			t.Errorf("Decode(Encode(%q)) = %q, %v", s, got, err)
		}
	}
	// powershell.exe takes UTF-16LE: "A" is 0x41 0x00.
	if got := Encode("A"); got != "QQA=" {
		t.Errorf("Encode(A) = %s, want QQA=", got)
	}
	args := Args("Write-Output 1")
	if args[len(args)-2] != "-EncodedCommand" {
		t.Fatalf("args = %v", args)
	}
	script, _ := Decode(args[len(args)-1])
	if !strings.HasPrefix(script, Preamble) || !strings.HasSuffix(script, "Write-Output 1") {
		t.Errorf("encoded script = %q", script)
	}
}
