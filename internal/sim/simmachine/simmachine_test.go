package simmachine

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
)

func TestProvision(t *testing.T) {
	image := t.TempDir()
	m := v1alpha1.ImageManifest{
		APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindImageManifest, WindowsBuild: v1alpha1.WindowsServer2022,
		KubernetesVersion: "v1.36.2", Runtime: v1alpha1.RuntimeInfo{Name: v1alpha1.RuntimeContainerd, Version: "2.1.4"},
		PauseImage:      v1alpha1.PauseImage{Reference: "registry.k8s.io/pause:3.10", Digest: "sha256:" + strings.Repeat("1", 64)},
		NodebootVersion: "test",
	}
	if err := WriteImage(image, m, map[string][]byte{"k/kubelet.exe": []byte("kubelet"), "opt/cni/bin/win-bridge.exe": []byte("cni")}); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	machine := Machine{Root: root, Build: 20348, Adapter: "Ethernet", Address: netip.MustParseAddr("127.1.0.5"),
		Subnet: netip.MustParsePrefix("127.1.0.0/16"), Runtime: v1alpha1.RuntimeContainerd}
	if err := Provision(machine, image, []byte(`{"kind":"NodeConfig"}`)); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "C", "k", "kubelet.exe")); err != nil || string(b) != "kubelet" {
		t.Errorf("payload: %q %v", b, err)
	}
	if fi, err := os.Stat(Path(root, `C:\AzureData\CustomData.bin`)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("custom data: %v %v", fi, err)
	}
	loaded, err := Load(root)
	if err != nil || loaded.Address != machine.Address || loaded.Root != root {
		t.Errorf("Load = %+v, %v", loaded, err)
	}
	if got := Path("/r", `C:\var\lib\kubelet\config.yaml`); got != "/r/C/var/lib/kubelet/config.yaml" {
		t.Errorf("Path = %s", got)
	}
	// An image whose manifest is not valid is refused.
	if err := os.WriteFile(filepath.Join(image, ImageManifestFile), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Provision(machine, image, nil); err == nil {
		t.Error("an image with an invalid manifest was provisioned")
	}
}
