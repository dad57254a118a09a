package local

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/packer-plugin-sdk/multistep"
	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"

	"github.com/kubewin/kubewin/internal/api"
	"github.com/kubewin/kubewin/internal/nodecmd"
	"github.com/kubewin/kubewin/internal/sim/simmachine"
)

func halt(state multistep.StateBag, err error) multistep.StepAction {
	state.Put("error", err)
	state.Get("ui").(packersdk.Ui).Error(err.Error())
	return multistep.ActionHalt
}

// stepOutputDir creates the output directory; a failed build removes it.
type stepOutputDir struct {
	dir   string
	force bool
}

func (s *stepOutputDir) Run(_ context.Context, state multistep.StateBag) multistep.StepAction {
	if _, err := os.Stat(s.dir); err == nil {
		if !s.force {
			return halt(state, fmt.Errorf("output_directory %s exists: remove it, choose another, or build with -force", s.dir))
		}
		if err := os.RemoveAll(s.dir); err != nil {
			return halt(state, fmt.Errorf("remove the previous output %s: %w", s.dir, err))
		}
	}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return halt(state, fmt.Errorf("create output_directory: %w", err))
	}
	return multistep.ActionContinue
}

func (s *stepOutputDir) Cleanup(state multistep.StateBag) {
	_, cancelled := state.GetOk(multistep.StateCancelled)
	_, halted := state.GetOk(multistep.StateHalted)
	if cancelled || halted {
		_ = os.RemoveAll(s.dir)
	}
}

// stepMachine lays out the simulated machine the provisioners work on.
type stepMachine struct{ machine simmachine.Machine }

func (s *stepMachine) Run(_ context.Context, state multistep.StateBag) multistep.StepAction {
	desc, err := json.MarshalIndent(s.machine, "", "  ")
	if err == nil {
		err = os.MkdirAll(filepath.Join(s.machine.Root, "sim"), 0o755)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(s.machine.Root, filepath.FromSlash(simmachine.File)), desc, 0o644)
	}
	if err != nil {
		return halt(state, fmt.Errorf("create the simulated machine: %w", err))
	}
	state.Get("ui").(packersdk.Ui).Say(fmt.Sprintf("kubewin-local: simulated Windows Server %d machine at %s", s.machine.Build, s.machine.Root))
	return multistep.ActionContinue
}

func (s *stepMachine) Cleanup(multistep.StateBag) {}

// stepExport turns the baked machine into an image directory: the files the installed
// manifest lists move to payload/, the manifest to kubewin-manifest.json, and the machine goes.
type stepExport struct{ root, out string }

func (s *stepExport) Run(_ context.Context, state multistep.StateBag) multistep.StepAction {
	ui := state.Get("ui").(packersdk.Ui)
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
	state.Put("manifest", m)
	ui.Say(fmt.Sprintf("kubewin-local: image %s: %d files, %d bytes, Kubernetes %s on Windows Server %s", s.out, len(m.Files), size, m.KubernetesVersion, m.WindowsBuild.Release()))
	return multistep.ActionContinue
}

func (s *stepExport) Cleanup(multistep.StateBag) {}
