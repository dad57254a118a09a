package local

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/packer-plugin-sdk/multistep"

	"github.com/kubewin/kubewin/internal/api"
	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/nodecmd"
	"github.com/kubewin/kubewin/internal/sim/simmachine"
)

// bakedMachine lays out what a bake leaves on a simulated machine: the payload at its paths and
// the installed image manifest.
func bakedMachine(t *testing.T, root string) []byte {
	t.Helper()
	sum := strings.Repeat("a", 64)
	m := v1alpha1.ImageManifest{
		APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindImageManifest, WindowsBuild: v1alpha1.WindowsServer2022,
		KubernetesVersion: "v1.37.1", Runtime: v1alpha1.RuntimeInfo{Name: v1alpha1.RuntimeContainerd, Version: "2.1.4"},
		PauseImage:      v1alpha1.PauseImage{Reference: "registry.k8s.io/pause:3.10.2", Digest: "sha256:" + sum},
		NodebootVersion: "0.1.0",
		Files:           []v1alpha1.File{{Path: "k/kubelet.exe", SHA256: sum, Size: 7}},
	}
	raw, err := api.EncodeJSON(m)
	if err != nil {
		t.Fatal(err)
	}
	for path, data := range map[string][]byte{
		filepath.Join(root, "C", "k", "kubelet.exe"):                []byte("kubelet"),
		simmachine.Path(root, nodecmd.DefaultPaths().ImageManifest): raw,
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return raw
}

func TestStepExport(t *testing.T) {
	out := t.TempDir()
	root := filepath.Join(out, machineDir)
	raw := bakedMachine(t, root)
	state, ui := newState()
	step := &stepExport{root: root, out: out}
	if action := step.Run(context.Background(), state); action != multistep.ActionContinue {
		t.Fatalf("action %v: %v", action, state.Get(StateError))
	}
	step.Cleanup(state)
	if b, err := os.ReadFile(filepath.Join(out, simmachine.ImagePayloadDir, "k", "kubelet.exe")); err != nil || string(b) != "kubelet" {
		t.Errorf("payload: %q %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(out, simmachine.ImageManifestFile)); err != nil || string(b) != string(raw) {
		t.Errorf("manifest: %q %v", b, err)
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Errorf("the machine stays: %v", err)
	}
	if m, ok := state.Get(StateManifest).(*v1alpha1.ImageManifest); !ok || m.KubernetesVersion != "v1.37.1" {
		t.Errorf("state manifest %+v", state.Get(StateManifest))
	}
	want := "kubewin-local: image " + out + ": 1 files, 7 bytes, Kubernetes v1.37.1 on Windows Server 2022"
	if len(ui.SayMessages) != 1 || ui.SayMessages[0].Message != want {
		t.Errorf("ui %+v, want %q", ui.SayMessages, want)
	}
}

func TestStepExportWithoutBake(t *testing.T) {
	out := t.TempDir()
	state, ui := newState()
	step := &stepExport{root: filepath.Join(out, machineDir), out: out}
	if action := step.Run(context.Background(), state); action != multistep.ActionHalt {
		t.Fatalf("action %v", action)
	}
	if !strings.Contains(ui.ErrorMessage, "did a kubewin-node provisioner run?") {
		t.Errorf("error %q", ui.ErrorMessage)
	}
	if _, ok := state.GetOk(StateManifest); ok {
		t.Error("a failed export leaves a manifest in the state")
	}
}
