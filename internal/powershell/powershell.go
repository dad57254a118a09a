// Package powershell writes the PowerShell that kubewin runs on Windows machines: the one
// quoting helper every value goes through on its way into a script, the preamble that makes a
// script stop at its first error, and the encoded command line that runs a script without any
// quoting of cmd.exe or of the transport in between.
package powershell

import (
	"encoding/base64"
	"strings"
	"unicode/utf16"
)

// singleQuotes are the characters PowerShell takes for a single quote: the ASCII apostrophe and
// the typographic quotes U+2018 to U+201B. Inside a single-quoted (verbatim) string a quote
// character is written twice; every other character, `$`, backticks and newlines included, is
// literal (about_Quoting_Rules, MicrosoftDocs/PowerShell-Docs
// reference/5.1/Microsoft.PowerShell.Core/About/about_Quoting_Rules.md: "PowerShell treats smart
// quotation marks ... as normal quotation marks for strings").
var singleQuotes = map[rune]bool{'\'': true, '\u2018': true, '\u2019': true, '\u201A': true, '\u201B': true}

// Quote returns s as a PowerShell verbatim (single-quoted) string literal. It is the only way
// values enter kubewin's scripts: whatever s holds, the literal evaluates to exactly s.
func Quote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('\'')
	for _, r := range s {
		if singleQuotes[r] {
			b.WriteRune(r)
		}
		b.WriteRune(r)
	}
	b.WriteByte('\'')
	return b.String()
}

// QuoteList returns the values as a PowerShell array expression of verbatim strings:
// @('a','b'), or @() when there are none.
func QuoteList(values []string) string {
	quoted := make([]string, len(values))
	for i, v := range values {
		quoted[i] = Quote(v)
	}
	return "@(" + strings.Join(quoted, ",") + ")"
}

// Preamble makes a script stop at its first error and keeps progress bars out of its output.
const Preamble = "$ErrorActionPreference = 'Stop'\n$ProgressPreference = 'SilentlyContinue'\n"

// Script returns body with the preamble.
func Script(body string) string { return Preamble + body }

// Args are powershell.exe's arguments that run script (with the preamble), passed encoded as
// UTF-16LE base64 so that no other layer's quoting applies to it.
func Args(script string) []string {
	return []string{"-NoProfile", "-NonInteractive", "-ExecutionPolicy", "Bypass", "-EncodedCommand", Encode(Script(script))}
}

// CommandLine is the command line that runs script (with the preamble) through powershell.
func CommandLine(script string) string {
	return "powershell " + strings.Join(Args(script), " ")
}

// Encode encodes a script for -EncodedCommand: UTF-16LE, then base64.
func Encode(script string) string {
	u := utf16.Encode([]rune(script))
	b := make([]byte, 2*len(u))
	for i, r := range u {
		b[2*i], b[2*i+1] = byte(r), byte(r>>8)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// Decode is the inverse of Encode.
func Decode(encoded string) (string, error) {
	b, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		return "", err
	}
	u := make([]uint16, len(b)/2)
	for i := range u {
		u[i] = uint16(b[2*i]) | uint16(b[2*i+1])<<8
	}
	return string(utf16.Decode(u)), nil
}
