package windows_test

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/nodeboot/internal/platform/windows"
	"github.com/kubewin/kubewin/nodeboot/internal/platform/windows/winfake"
)

// A secret's security descriptor is the file's own, as on NTFS: another process on the machine
// reads it, a rewrite without one drops it, and writing a secret writes no machine state where
// the host's file system keeps extended attributes (Linux, user.kubewin.sddl); where it keeps
// none, the descriptor is in the state.
func TestSecretDescriptorTravelsWithTheFile(t *testing.T) {
	root := t.TempDir()
	cfg := winfake.Config{
		Root: root, StateFile: filepath.Join(root, "state.json"), ComputerName: "win-a", Build: 20348, Adapter: "Ethernet",
		Address: netip.MustParseAddr("10.240.0.4"), Subnet: netip.MustParsePrefix("10.240.0.0/16"), Runtime: v1alpha1.RuntimeContainerd,
	}
	m, err := winfake.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := windows.New(m.Backends())
	const secret, other = `C:\var\lib\kubelet\pki\kubelet-client-current.pem`, `C:\var\lib\kubelet\kubeconfig`
	if err := p.WriteSecret(secret, []byte("key")); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(cfg.StateFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.WriteSecret(other, []byte("config")); err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(cfg.StateFile)
	if err != nil {
		t.Fatal(err)
	}
	st, err := m.State()
	if err != nil {
		t.Fatal(err)
	}
	_, inState := st.ACLs[other]
	xattrs := unix.Setxattr(p.Path(other), "user.kubewin.probe", []byte("1"), 0) == nil
	switch {
	case xattrs && (!os.SameFile(before, after) || !before.ModTime().Equal(after.ModTime()) || inState):
		t.Errorf("writing a secret wrote the machine's state (descriptor in the state: %v)", inState)
	case !xattrs && !inState:
		t.Errorf("the file system keeps no extended attributes, and the state has no descriptor for %s", other)
	}
	again, err := winfake.New(cfg) // another process on the machine
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{secret, other} {
		if got, err := again.ACL(f); err != nil || got != windows.OwnerOnly {
			t.Errorf("%s: descriptor %q, %v; want %s", f, got, err, windows.OwnerOnly)
		}
	}
	if err := p.WriteFile(secret, []byte("key")); err != nil {
		t.Fatal(err)
	}
	if got, err := again.ACL(secret); err != nil || got != "" {
		t.Errorf("rewritten without a descriptor, %s has %q, %v", secret, got, err)
	}
}
