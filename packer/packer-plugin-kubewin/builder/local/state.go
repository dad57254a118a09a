package local

import (
	"github.com/hashicorp/packer-plugin-sdk/multistep"
	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"
)

// State bag keys of the build. StateHook, StateUI, StateCommunicator and StateGeneratedData are
// the keys commonsteps.StepProvision reads (packer-plugin-sdk multistep/commonsteps/step_provision.go).
const (
	// StateHook is the build's packersdk.Hook.
	StateHook = "hook"
	// StateUI is the build's packersdk.Ui.
	StateUI = "ui"
	// StateCommunicator is the *Communicator the provisioners run on.
	StateCommunicator = "communicator"
	// StateGeneratedData is the map of generated data the provisioners read.
	StateGeneratedData = "generated_data"
	// StateError is the error that halted the build.
	StateError = "error"
	// StateManifest is the exported image's *v1alpha1.ImageManifest.
	StateManifest = "manifest"
)

// halt records err in the state, shows it, and stops the build.
func halt(state multistep.StateBag, err error) multistep.StepAction {
	state.Put(StateError, err)
	uiOf(state).Error(err.Error())
	return multistep.ActionHalt
}

// uiOf is the build's packersdk.Ui, which Builder.Run puts in the state before any step runs.
func uiOf(state multistep.StateBag) packersdk.Ui {
	ui, ok := state.Get(StateUI).(packersdk.Ui)
	if !ok {
		panic("kubewin-local: the build's state has no packersdk.Ui under " + StateUI)
	}
	return ui
}
