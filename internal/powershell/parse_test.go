//go:build cgo

package powershell

import (
	"testing"

	"github.com/kubewin/kubewin/internal/testkit/pwshparse"
)

// Every hostile value, quoted, parses as one verbatim string argument and nothing else: the
// parser sees no error and no second string, variable or command where the value was.
func TestQuoteParses(t *testing.T) {
	for _, s := range hostile {
		script := Script("Write-Output " + Quote(s) + "\n")
		tree, err := pwshparse.Parse(script)
		if err != nil {
			t.Fatal(err)
		}
		if errs := tree.Errors(); len(errs) > 0 {
			t.Errorf("Quote(%q): %v", s, errs)
		}
		// The preamble has two literals ('Stop', 'SilentlyContinue'); the value is the third
		// and last.
		lits := tree.Nodes("verbatim_string_characters")
		if len(lits) != 3 || lits[2] != Quote(s) {
			t.Errorf("Quote(%q) parses into the literals %q", s, lits)
		}
		if cmds := tree.Nodes("command_name"); len(cmds) != 1 {
			t.Errorf("Quote(%q) parses into the commands %q", s, cmds)
		}
		tree.Close()
	}
}

// The parser is not a rubber stamp: a value pasted in without the helper breaks the script.
func TestParserCatchesUnquotedValues(t *testing.T) {
	for _, bad := range []string{"Write-Output 'it's'", "Write-Output \"unterminated", "foreach ($a in) {"} {
		if err := pwshparse.Check(bad); err == nil {
			t.Errorf("%q parsed without error", bad)
		}
	}
}
