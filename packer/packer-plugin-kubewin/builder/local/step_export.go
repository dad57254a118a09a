package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/packer-plugin-sdk/multistep"

	"github.com/kubewin/kubewin/internal/api"
	"github.com/kubewin/kubewin/internal/nodecmd"
	"github.com/kubewin/kubewin/internal/sim/simmachine"
)

// stepExport turns the baked machine into an image directory: the files the installed
// manifest lists move to payload/, the manifest to kubewin-manifest.json, and the machine goes.
type stepExport struct{ root, out string }

func (s *stepExport) Run(_ context.Context, state multistep.StateBag) multistep.StepAction {
	ui := uiOf(state)
	raw, err := os.ReadFile(simmachine.Path(s.root, nodecmd.DefaultPaths().ImageManifest))
	if err != nil {
		return halt(state, fmt.Errorf("the machine has no image manifest (did a kubewin-node provisioner run?): %w", err))
	}
	m, err := api.LoadImageManifest(raw)
	if err != nil {
		return halt(state, fmt.Errorf("the machine's image manifest: %w", err))
	}
	var size int64
	for _, f := range m.Files {
		dst := filepath.Join(s.out, simmachine.ImagePayloadDir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return halt(state, err)
		}
		if err := os.Rename(filepath.Join(s.root, "C", filepath.FromSlash(f.Path)), dst); err != nil {
			return halt(state, fmt.Errorf("export payload file %s: %w", f.Path, err))
		}
		size += f.Size
	}
	if err := os.WriteFile(filepath.Join(s.out, simmachine.ImageManifestFile), raw, 0o644); err != nil {
		return halt(state, err)
	}
	if err := os.RemoveAll(s.root); err != nil {
		return halt(state, err)
	}
	state.Put(StateManifest, m)
	ui.Say(fmt.Sprintf("kubewin-local: image %s: %d files, %d bytes, Kubernetes %s on Windows Server %s",
		s.out, len(m.Files), size, m.KubernetesVersion, m.WindowsBuild.Release()))
	return multistep.ActionContinue
}

func (s *stepExport) Cleanup(multistep.StateBag) {}
