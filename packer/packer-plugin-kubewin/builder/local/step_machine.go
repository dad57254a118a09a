package local

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/packer-plugin-sdk/multistep"

	"github.com/kubewin/kubewin/internal/sim/simmachine"
)

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
	uiOf(state).Say(fmt.Sprintf("kubewin-local: simulated Windows Server %d machine at %s", s.machine.Build, s.machine.Root))
	return multistep.ActionContinue
}

func (s *stepMachine) Cleanup(multistep.StateBag) {}
