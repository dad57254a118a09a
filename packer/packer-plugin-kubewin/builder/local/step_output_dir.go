package local

import (
	"context"
	"fmt"
	"os"

	"github.com/hashicorp/packer-plugin-sdk/multistep"
)

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
