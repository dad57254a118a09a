package controlplane

import (
	"os"
	"path/filepath"
	"testing"
)

// Every kubeadm run closes the log it writes to: a control plane's start and its certificate
// steps run kubeadm many times in a long-lived process (the provider).
func TestKubeadmClosesItsLog(t *testing.T) {
	// The programs make testenv builds (testenv.BinDir, which imports this package).
	bin, err := filepath.Abs(filepath.Join("..", "..", ".testbin"))
	if err != nil {
		t.Fatal(err)
	}
	c := &ControlPlane{Config: Config{Dir: t.TempDir(), BinDir: bin}}
	if err := os.MkdirAll(filepath.Dir(c.LogFile("kubeadm")), 0o700); err != nil {
		t.Fatal(err)
	}
	open := func() int {
		fds, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(fds)
	}
	// Other files may open meanwhile (the package's control plane runs): a leak shows as one
	// more open file per run.
	const runs = 20
	before := open()
	for range runs {
		if err := c.kubeadm("version", "-o", "short"); err != nil {
			t.Fatal(err)
		}
	}
	if after := open(); after >= before+runs/2 {
		t.Fatalf("%d open files after %d kubeadm runs, %d before", after, runs, before)
	}
}
