package local

import (
	"errors"
	"testing"

	"github.com/hashicorp/packer-plugin-sdk/multistep"
	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"
)

// newState is a state bag with a recording UI, as the builder's runner hands it to a step.
func newState() (*multistep.BasicStateBag, *packersdk.MockUi) {
	ui := new(packersdk.MockUi)
	state := new(multistep.BasicStateBag)
	state.Put(StateUI, ui)
	return state, ui
}

func TestHalt(t *testing.T) {
	state, ui := newState()
	err := errors.New("boom")
	if action := halt(state, err); action != multistep.ActionHalt {
		t.Errorf("action %v", action)
	}
	if got, _ := state.GetOk(StateError); got != err || ui.ErrorMessage != "boom" {
		t.Errorf("state error %v, ui error %q", got, ui.ErrorMessage)
	}
}
