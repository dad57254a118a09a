package simlinux

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A command on the machine writes under /etc and /var/lib into the machine's directory, sees the
// machine's hostname, reads the host's other files, and leaves the host's /etc untouched.
func TestMachine(t *testing.T) {
	if err := Available(); err != nil {
		t.Fatal(err)
	}
	m := Machine{Root: t.TempDir(), Hostname: "master-0"}
	if err := m.Prepare(); err != nil {
		t.Fatal(err)
	}
	if err := m.WriteFile("/etc/kubernetes/kubewin/x.yaml", []byte("a: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := m.Run(context.Background(), "sh", "-c",
		"cat /etc/kubernetes/kubewin/x.yaml && mkdir -p /var/lib/kubelet && echo done >/var/lib/kubelet/state && cat /proc/sys/kernel/hostname && test -e "+
			"/etc/passwd && echo host-files")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"a: 1", "master-0", "host-files"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output %q lacks %q", out, want)
		}
	}
	if b, err := m.ReadFile("/var/lib/kubelet/state"); err != nil || string(b) != "done\n" {
		t.Errorf("/var/lib/kubelet/state on the machine = %q, %v", b, err)
	}
	if _, err := os.Stat("/etc/kubernetes/kubewin/x.yaml"); err == nil {
		t.Error("the machine's file appeared in the host's /etc")
	}
	if got := m.File("/usr/bin/env"); got != "/usr/bin/env" {
		t.Errorf("File(/usr/bin/env) = %s, want the host's", got)
	}
	if got := m.File("/etc/hosts"); got != filepath.Join(m.Root, "etc/hosts") {
		t.Errorf("File(/etc/hosts) = %s", got)
	}
	if err := m.WriteFile("/usr/local/bin/x", nil, 0o755); err == nil {
		t.Error("WriteFile outside the machine's directories succeeded")
	}
}
