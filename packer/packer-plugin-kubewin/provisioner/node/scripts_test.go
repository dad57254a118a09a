//go:build cgo

package node

import (
	"reflect"
	"strings"
	"testing"

	"github.com/kubewin/kubewin/internal/powershell"
	"github.com/kubewin/kubewin/internal/powershell/pwshparse"
)

// Every command the Windows guest runs is PowerShell that parses without an error node, with
// values a user controls (paths, URLs, digests) full of quotes, dollars, backticks and newlines.
func TestWindowsGuestScriptsParse(t *testing.T) {
	hostile := "C:\\it's $env:TEMP `n ‘x’\n\"y\"; Stop-Computer"
	url := "https://mirror.example.test/it's/$(Stop-Computer)/\"k\"`/kubelet.exe"
	commands := func(g windows) map[string]string {
		return map[string]string{
			"mkdir":            g.mkdir(hostile),
			"enableContainers": g.enableContainers(),
			"bootTime":         g.bootTime(),
			"restart":          g.restart(),
			"fetch":            g.fetch(url, hostile, hostile),
			"bake":             g.bake(hostile, bakeArgs{manifest: hostile, mirror: url, pullPause: hostile, parallel: 3}),
		}
	}
	// A new guest command must be added here.
	if n := reflect.TypeFor[guest]().NumMethod() - 1; n != len(commands(windows{})) { // path() is not a command
		t.Fatalf("the guest interface has %d commands, this test checks %d", n, len(commands(windows{})))
	}
	for _, g := range []windows{{ssh: false}, {ssh: true}} {
		for name, cmd := range commands(g) {
			script := cmd
			if enc, ok := strings.CutPrefix(cmd, "powershell -NoProfile -NonInteractive -ExecutionPolicy Bypass -EncodedCommand "); ok {
				var err error
				if script, err = powershell.Decode(enc); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
			} else if name != "restart" {
				t.Errorf("%s is not an encoded PowerShell command: %s", name, cmd)
			}
			tree, err := pwshparse.Parse(script)
			if err != nil {
				t.Fatal(err)
			}
			if errs := tree.Errors(); len(errs) > 0 {
				t.Errorf("%s does not parse: %v\n%s", name, errs, script)
			}
			// The hostile value is never code: it only ever appears inside a verbatim string.
			for _, v := range []string{hostile, url} {
				if strings.Contains(script, v) {
					t.Errorf("%s holds a value unquoted:\n%s", name, script)
				}
			}
			for _, lit := range tree.Nodes("verbatim_string_characters") {
				if strings.Contains(lit, "Stop-Computer") && lit != powershell.Quote(hostile) && lit != powershell.Quote(url) &&
					lit != powershell.Quote(strings.ReplaceAll(hostile, `\`, "/")) {
					t.Errorf("%s: literal %s is not a quoted value", name, lit)
				}
			}
			tree.Close()
		}
	}
}
