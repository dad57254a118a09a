package local

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/packer-plugin-sdk/multistep"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/sim/simmachine"
)

func TestStepMachine(t *testing.T) {
	want := simmachine.Machine{
		Root: filepath.Join(t.TempDir(), machineDir), Build: 20348, Adapter: "Ethernet", Runtime: v1alpha1.RuntimeContainerd,
		Address: netip.MustParseAddr("127.0.0.2"), Subnet: netip.MustParsePrefix("127.0.0.0/8"),
	}
	state, ui := newState()
	step := &stepMachine{machine: want}
	if action := step.Run(context.Background(), state); action != multistep.ActionContinue {
		t.Fatalf("action %v: %v", action, state.Get(StateError))
	}
	step.Cleanup(state)
	got, err := simmachine.Load(want.Root)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("machine %+v %v, want %+v", got, err, want)
	}
	if len(ui.SayMessages) != 1 || !strings.Contains(ui.SayMessages[0].Message, "simulated Windows Server 20348 machine at "+want.Root) {
		t.Errorf("ui %+v", ui.SayMessages)
	}
}

func TestStepMachineFails(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	state, ui := newState()
	step := &stepMachine{machine: simmachine.Machine{Root: filepath.Join(file, machineDir)}}
	if action := step.Run(context.Background(), state); action != multistep.ActionHalt {
		t.Fatalf("action %v", action)
	}
	if !strings.HasPrefix(ui.ErrorMessage, "create the simulated machine: ") {
		t.Errorf("error %q", ui.ErrorMessage)
	}
}
