//go:build cgo

package guest

import (
	"reflect"
	"strings"
	"testing"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/powershell"
	"github.com/kubewin/kubewin/internal/testkit/pwshparse"
)

// Every command the Windows guest runs — for the Packer provisioner and for existing servers —
// is PowerShell that parses without an error node, with values a user controls (paths, URLs,
// digests, arguments) full of quotes, dollars, backticks and newlines.
func TestWindowsScriptsParse(t *testing.T) {
	hostile := "C:\\it's $env:TEMP `n ‘x’\n\"y\"; Stop-Computer"
	url := "https://mirror.example.test/it's/$(Stop-Computer)/\"k\"`/kubelet.exe"
	commands := func(g Windows) map[string]string {
		return map[string]string{
			"Mkdir":          g.Mkdir(hostile),
			"EnableFeatures": g.EnableFeatures(FeatureContainers, FeatureHyperV, hostile),
			"BootTime":       g.BootTime(),
			"Restart":        g.Restart(),
			"Fetch":          g.Fetch(url, hostile, hostile),
			"Bake":           g.Bake(hostile, BakeArgs{Manifest: hostile, Mirror: url, PullPause: hostile, Parallel: 3}),
			"Receive":        g.Receive(hostile, false),
			"Receive secret": g.Receive(hostile, true),
			"Send":           g.Send(hostile),
			"Facts":          g.Facts(),
			"Nodeboot":       g.Nodeboot("join", hostile),
			"StartNode":      g.StartNode(),
			"StopNode":       g.StopNode(),
			"Snapshot":       g.Snapshot(hostile),
			"Restore":        g.Restore(hostile),
			"Unbake":         g.Unbake(v1alpha1.RuntimeContainerd),
		}
	}
	// A new command must be added here: the interface's methods but Path, plus the secret Receive.
	if n := reflect.TypeFor[Lang]().NumMethod() - 1; n+1 != len(commands(Windows{})) {
		t.Fatalf("Lang has %d commands, this test checks %d", n, len(commands(Windows{}))-1)
	}
	for _, g := range []Windows{{SSH: false}, {SSH: true}} {
		for name, cmd := range commands(g) {
			script := cmd
			if enc, ok := strings.CutPrefix(cmd, "powershell -NoProfile -NonInteractive -ExecutionPolicy Bypass -EncodedCommand "); ok {
				var err error
				if script, err = powershell.Decode(enc); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
			} else if name != "Restart" {
				t.Errorf("%s is not an encoded PowerShell command: %s", name, cmd)
			}
			tree, err := pwshparse.Parse(script)
			if err != nil {
				t.Fatal(err)
			}
			if errs := tree.Errors(); len(errs) > 0 {
				t.Errorf("%s does not parse: %v\n%s", name, errs, script)
			}
			// The hostile values are never code: they only ever appear inside verbatim strings.
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

// Windows PowerShell 5.1 on Server 2019 offers SSL 3 and TLS 1.0 only, which HTTPS servers
// refuse: the download sets TLS 1.2 first, as Kubernetes' GCE node setup does
// (cluster/gce/windows/k8s-node-setup.psm1 Set-PrerequisiteOptions).
func TestWindowsFetchForcesTLS12(t *testing.T) {
	cmd := Windows{}.Fetch("https://mirror.example.test/k/kubelet.exe", "ab", `C:\k\kubelet.exe`)
	script, err := powershell.Decode(strings.TrimPrefix(cmd, "powershell -NoProfile -NonInteractive -ExecutionPolicy Bypass -EncodedCommand "))
	if err != nil {
		t.Fatal(err)
	}
	tree, err := pwshparse.Parse(script)
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	const set = "[Net.ServicePointManager]::SecurityProtocol = [Net.SecurityProtocolType]::Tls12"
	var order []string
	for _, p := range tree.Nodes("pipeline") {
		if p == set || strings.HasPrefix(p, "Invoke-WebRequest") {
			order = append(order, p)
		}
	}
	if len(order) < 2 || order[0] != set {
		t.Errorf("the download does not set TLS 1.2 before Invoke-WebRequest (statements %q):\n%s", order, script)
	}
}
