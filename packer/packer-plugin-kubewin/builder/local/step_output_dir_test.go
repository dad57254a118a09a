package local

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/packer-plugin-sdk/multistep"
)

func TestStepOutputDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	state, _ := newState()
	step := &stepOutputDir{dir: dir}
	if action := step.Run(context.Background(), state); action != multistep.ActionContinue {
		t.Fatalf("action %v: %v", action, state.Get(StateError))
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("output directory: %v", err)
	}
	step.Cleanup(state)
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("a successful build keeps the output: %v", err)
	}
}

func TestStepOutputDirExists(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "old")
	if err := os.WriteFile(old, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	state, ui := newState()
	step := &stepOutputDir{dir: dir}
	if action := step.Run(context.Background(), state); action != multistep.ActionHalt {
		t.Fatalf("action %v", action)
	}
	if !strings.Contains(ui.ErrorMessage, "exists: remove it, choose another, or build with -force") {
		t.Errorf("error %q", ui.ErrorMessage)
	}
	if _, err := os.Stat(old); err != nil {
		t.Errorf("without force the previous output stays: %v", err)
	}

	state, _ = newState()
	step.force = true
	if action := step.Run(context.Background(), state); action != multistep.ActionContinue {
		t.Fatalf("action %v: %v", action, state.Get(StateError))
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("force removes the previous output: %v", err)
	}
}

func TestStepOutputDirCleanupOnFailure(t *testing.T) {
	for _, key := range []string{multistep.StateCancelled, multistep.StateHalted} {
		dir := filepath.Join(t.TempDir(), "out")
		state, _ := newState()
		step := &stepOutputDir{dir: dir}
		if action := step.Run(context.Background(), state); action != multistep.ActionContinue {
			t.Fatalf("action %v", action)
		}
		state.Put(key, true)
		step.Cleanup(state)
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s: the output stays: %v", key, err)
		}
	}
}
