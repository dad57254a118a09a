// Package local is the kubewin-local builder: it bakes an image for the Terraform provider's
// local backend. The guest is a simulated Windows machine, a directory on the Packer host in
// which nodeboot's sim platform runs the same bake as on Windows; the result is an image
// directory with the payload and the manifest.
package local

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"

	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/hashicorp/packer-plugin-sdk/multistep"
	"github.com/hashicorp/packer-plugin-sdk/multistep/commonsteps"
	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"
	"github.com/hashicorp/packer-plugin-sdk/template/config"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/sim/simmachine"
	"github.com/kubewin/kubewin/packer/packer-plugin-kubewin/provisioner/node"
)

// BuilderID identifies kubewin-local artifacts.
const BuilderID = "kubewin.local"

// Builder is kubewin-local.
type Builder struct {
	config Config
}

func (b *Builder) ConfigSpec() hcldec.ObjectSpec { return b.config.FlatMapstructure().HCL2Spec() }

func (b *Builder) Prepare(raws ...any) ([]string, []string, error) {
	if err := config.Decode(&b.config, &config.DecodeOpts{PluginType: BuilderID, Interpolate: true}, raws...); err != nil {
		return nil, nil, err
	}
	if err := b.config.prepare(); err != nil {
		return nil, nil, err
	}
	return []string{node.DataGuest, node.DataRoot, node.DataNodeboot}, nil, nil
}

// machineDir is where the simulated machine lives during the build, inside the output.
const machineDir = ".machine"

func (b *Builder) Run(ctx context.Context, ui packersdk.Ui, hook packersdk.Hook) (packersdk.Artifact, error) {
	out, err := filepath.Abs(b.config.OutputDirectory)
	if err != nil {
		return nil, err
	}
	root := filepath.Join(out, machineDir)
	state := new(multistep.BasicStateBag)
	state.Put(StateHook, hook)
	state.Put(StateUI, ui)
	state.Put(StateCommunicator, &Communicator{Dir: root})
	state.Put(StateGeneratedData, map[string]any{node.DataGuest: "sim", node.DataRoot: root, node.DataNodeboot: b.config.NodebootPath})
	steps := []multistep.Step{
		&stepOutputDir{dir: out, force: b.config.PackerForce},
		&stepMachine{machine: simmachine.Machine{
			Root: root, Build: uint32(b.config.build), Adapter: "Ethernet", Runtime: v1alpha1.RuntimeContainerd,
			// The machine is never started: the address only completes its description.
			Address: netip.MustParseAddr("127.0.0.2"), Subnet: netip.MustParsePrefix("127.0.0.0/8"),
		}},
		new(commonsteps.StepProvision),
		&stepExport{root: root, out: out},
	}
	runner := commonsteps.NewRunner(steps, b.config.PackerConfig, ui)
	runner.Run(ctx, state)
	if v, ok := state.GetOk(StateError); ok {
		if err, ok := v.(error); ok {
			return nil, err
		}
		return nil, fmt.Errorf("the build halted with %v", v)
	}
	if _, ok := state.GetOk(multistep.StateCancelled); ok {
		return nil, errors.New("build cancelled")
	}
	if _, ok := state.GetOk(multistep.StateHalted); ok {
		return nil, errors.New("build halted")
	}
	m, ok := state.GetOk(StateManifest)
	if !ok {
		return nil, errors.New("the build produced no image manifest: is a kubewin-node provisioner in the build?")
	}
	manifest, ok := m.(*v1alpha1.ImageManifest)
	if !ok {
		return nil, fmt.Errorf("the build's image manifest is a %T, not a *v1alpha1.ImageManifest", m)
	}
	return &Artifact{dir: out, manifest: manifest}, nil
}

var _ packersdk.Builder = new(Builder)
