package guest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/sim/simmachine"
	"github.com/kubewin/kubewin/internal/testkit/guesttest"
)

// local runs commands in a POSIX shell on this machine: a guest of the Sim language.
type local struct{ lines []string }

func (l *local) Run(ctx context.Context, c Command, stdout, stderr io.Writer) (int, error) {
	l.lines = append(l.lines, c.Line)
	cmd := exec.CommandContext(ctx, "sh", "-c", c.Line)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.Stdin, stdout, stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), nil
	}
	return 0, err
}

func TestSimQuoting(t *testing.T) {
	g := Sim{Root: "/tmp/it's a machine", Binary: "/opt/kube win/nodeboot"}
	got := g.Bake(`C:\k\nodeboot.exe`, BakeArgs{Manifest: PlanPath, Parallel: 2, PullPause: PauseArchive})
	want := `'/opt/kube win/nodeboot' --platform sim --root '/tmp/it'\''s a machine' ` +
		`bake --manifest '/tmp/it'\''s a machine/C/ProgramData/kubewin/bake/plan.json' --parallel 2 --pull-pause 'ProgramData/kubewin/images/pause.tar'`
	if got != want {
		t.Errorf("sim bake:\n got %s\nwant %s", got, want)
	}
}

// A simulated machine, with spaces and quotes in its paths: files go on and come back
// verified, secrets are owner-only, and its facts are what its description says.
func TestSimShell(t *testing.T) {
	root := filepath.Join(t.TempDir(), "it's a machine")
	desc, _ := json.MarshalIndent(simmachine.Machine{ComputerName: "WEB-01", Build: 17763}, "", "  ")
	writeFile(t, filepath.Join(root, "sim", "machine.json"), string(desc))
	writeFile(t, filepath.Join(root, "sim", "services", "kubelet.json"), `{"spec": {}, "running": true}`)
	writeFile(t, filepath.Join(root, "sim", "services", "containerd.json"), `{"spec": {}, "running": false}`)
	writeFile(t, simmachine.Path(root, `C:\k\kubelet.exe`), "kubelet")
	r := &local{}
	s := Shell{Runner: r, Lang: Sim{Root: root, Binary: "/bin/false"}}
	ctx := context.Background()

	data := bytes.Repeat([]byte("0123456789abcdef\x00\xff"), 10000) // several lines of base64
	if err := s.Write(ctx, `C:\Program Files\kube win\blob.bin`, bytes.NewReader(data), false); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, `C:\AzureData\CustomData.bin`, strings.NewReader(`{"token": "abcdef.0123456789abcdef"}`), true); err != nil {
		t.Fatal(err)
	}
	var back bytes.Buffer
	if err := s.Download(ctx, `C:\Program Files\kube win\blob.bin`, &back); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back.Bytes(), data) {
		t.Errorf("downloaded %d bytes, uploaded %d", back.Len(), len(data))
	}
	if fi, err := os.Stat(simmachine.Path(root, `C:\AzureData\CustomData.bin`)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("secret file: %v, %v", fi.Mode(), err)
	}
	for _, line := range r.lines {
		if strings.Contains(line, "abcdef.0123456789abcdef") {
			t.Errorf("a command line carries the secret: %s", line)
		}
	}

	out, err := Output(ctx, s, Command{What: "facts", Line: s.Lang.Facts()})
	if err != nil {
		t.Fatal(err)
	}
	var f Facts
	if err := json.Unmarshal([]byte(out), &f); err != nil {
		t.Fatalf("facts %s: %v", out, err)
	}
	want := Facts{ComputerName: "WEB-01", Build: 17763, ContainersFeature: true, PortsInUse: []int{},
		Services: []Service{{Name: "kubelet", Running: true}, {Name: "containerd"}},
		Files:    []string{`C:\k\kubelet.exe`, `C:\AzureData\CustomData.bin`}}
	if got, _ := json.Marshal(f); string(got) != string(mustJSON(want)) {
		t.Errorf("facts:\n got %s\nwant %s", got, mustJSON(want))
	}

	// A write whose content does not arrive intact fails.
	bad := Shell{Runner: r, Lang: corrupting{Sim: Sim{Root: root}}}
	if err := bad.Write(ctx, `C:\k\x`, strings.NewReader("data"), false); err == nil || !strings.Contains(err.Error(), "sha256") {
		t.Errorf("corrupted write: %v", err)
	}
}

// corrupting writes one byte more than it receives.
type corrupting struct{ Sim }

func (c corrupting) Receive(node string, secret bool) string {
	return "{ base64 -d; printf x; } | { " + strings.Replace(c.Sim.Receive(node, secret), "base64 -d >", "cat >", 1) + "; }"
}

// Restore removes what appeared under the machine since Snapshot, however deep and whatever
// its name, and keeps what was there.
func TestSimSnapshotRestore(t *testing.T) {
	root := filepath.Join(t.TempDir(), "machine")
	writeFile(t, filepath.Join(root, "sim", "machine.json"), "{}")
	writeFile(t, simmachine.Path(root, `C:\Program Files\tool\keep me.txt`), "kept")
	before := tree(t, root)
	r := &local{}
	g := Sim{Root: root}
	list := `C:\ProgramData\kubewin\prejoin.txt`
	ctx := context.Background()
	if _, err := Run(ctx, Shell{Runner: r, Lang: g}, Command{What: "snapshot", Line: g.Snapshot(list)}, nil); err != nil {
		t.Fatal(err)
	}
	writeFile(t, simmachine.Path(root, `C:\k\kubelet.exe`), "new")
	writeFile(t, simmachine.Path(root, `C:\Program Files\tool\new file`), "new")
	writeFile(t, simmachine.Path(root, `C:\Program Files\containerd\bin\a b\c.exe`), "new")
	writeFile(t, filepath.Join(root, "sim", "services", "kubelet.json"), "{}")
	var out bytes.Buffer
	if _, err := Run(ctx, Shell{Runner: r, Lang: g}, Command{What: "restore", Line: g.Restore(list)}, &out); err != nil {
		t.Fatal(err)
	}
	if after := tree(t, root); !slices.Equal(after, before) {
		t.Errorf("after restore:\n%s\nbefore the snapshot:\n%s", strings.Join(after, "\n"), strings.Join(before, "\n"))
	}
	if !strings.Contains(out.String(), "entries removed") {
		t.Errorf("restore printed %q", out.String())
	}
}

func tree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		out = append(out, p)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// The Windows language removes what a bake registered: its services (nodeboot and the
// image's runtime), firewall rules and antivirus exclusions.
func TestWindowsUnbake(t *testing.T) {
	script := guesttest.Decode(Windows{}.Unbake(v1alpha1.RuntimeDocker))
	for _, want := range []string{`@('nodeboot','docker')`, `@('kubelet','kubewin-vxlan','kubewin-kube-proxy-healthz','kubewin-node-ports')`,
		`Remove-MpPreference -ExclusionPath @('C:\k','C:\opt\cni\bin'`, "Set-Service -Name wuauserv -StartupType Manual"} {
		if !strings.Contains(script, want) {
			t.Errorf("unbake script lacks %s:\n%s", want, script)
		}
	}
}
