// Package node is the kubewin-node provisioner: it gets every artifact of a kubewin image onto
// the guest, verified, and runs `nodeboot bake` there, which installs the payload, configures
// the runtime, imports the pause image and registers nodeboot to join the node at first boot.
package node

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/hashicorp/packer-plugin-sdk/guestexec"
	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"
	"github.com/hashicorp/packer-plugin-sdk/template/config"
	"github.com/hashicorp/packer-plugin-sdk/template/interpolate"

	"github.com/kubewin/kubewin/internal/api"
	"github.com/kubewin/kubewin/internal/guest"
	"github.com/kubewin/kubewin/internal/ociimage"
)

// Generated data a builder sets when its guest is a simulated Windows machine (the
// kubewin-local builder does): the provisioner then runs nodeboot's sim platform there.
const (
	// DataGuest is "sim" for a simulated machine.
	DataGuest = "KubewinGuest"
	// DataRoot is the simulated machine's directory on the guest.
	DataRoot = "KubewinRoot"
	// DataNodeboot is the nodeboot binary on the guest that runs the sim platform.
	DataNodeboot = "KubewinNodeboot"
)

// Provisioner is kubewin-node.
type Provisioner struct {
	config Config
	ctx    interpolate.Context

	comm packersdk.Communicator
	// restartPoll is how often the guest is asked whether it is back; tests shorten it.
	restartPoll time.Duration
	// registry configures image pulls on the host; tests count bytes with it.
	registry ociimage.Options
}

func (p *Provisioner) ConfigSpec() hcldec.ObjectSpec { return p.config.FlatMapstructure().HCL2Spec() }

func (p *Provisioner) Prepare(raws ...any) error {
	err := config.Decode(&p.config, &config.DecodeOpts{
		PluginType: "kubewin-node", Interpolate: true, InterpolateContext: &p.ctx,
	}, raws...)
	if err != nil {
		return err
	}
	if p.config.ElevatedPassword != "" {
		packersdk.LogSecretFilter.Set(p.config.ElevatedPassword)
	}
	for _, rc := range p.config.RegistryCredentials {
		if rc.Password != "" {
			packersdk.LogSecretFilter.Set(rc.Password)
		}
	}
	return p.config.prepare()
}

// Communicator, ElevatedUser and ElevatedPassword let guestexec build elevated runners.
func (p *Provisioner) Communicator() packersdk.Communicator { return p.comm }
func (p *Provisioner) ElevatedUser() string                 { return p.config.ElevatedUser }
func (p *Provisioner) ElevatedPassword() string             { return p.config.ElevatedPassword }

func (p *Provisioner) Provision(ctx context.Context, ui packersdk.Ui, comm packersdk.Communicator, data map[string]any) error {
	p.comm = comm
	if p.config.plan == nil {
		return fmt.Errorf("release has no value: set it to data.kubewin-release.<name>.manifest")
	}
	g := p.guestOf(data)
	t := communicator{p: p, lang: g}
	plan := *p.config.plan
	ui.Say(fmt.Sprintf("kubewin: baking Windows Server %s, Kubernetes %s, %s %s (%d artifacts, %s)",
		plan.WindowsBuild.Release(), plan.KubernetesVersion, plan.Runtime.Name, plan.Runtime.Version, len(plan.Files), p.config.Transfer))

	out := guest.LineWriter(ui.Say)
	defer func() { _ = out.Close() }()
	if err := p.enableFeatures(ctx, ui, t, g, out); err != nil {
		return err
	}
	registry := p.registry
	registry.Keychain = p.config.logins
	manifest, err := guest.Install{
		Plan: plan, Transfer: p.config.Transfer, Mirror: p.config.Mirror, Parallel: p.config.Parallel,
		CacheDir: p.config.CacheDir, Registry: registry, Images: p.config.Images,
		Say: func(s string) { ui.Say("kubewin: " + s) }, Out: out,
	}.Run(ctx, t, g)
	if err != nil {
		return err
	}
	return p.saveManifest(ui, manifest)
}

// guestOf picks the guest's language from the configuration or what the builder says of it.
func (p *Provisioner) guestOf(data map[string]any) guest.Lang {
	if p.config.SimRoot != "" {
		return guest.Sim{Root: p.config.SimRoot, Binary: p.config.SimNodeboot}
	}
	if data[DataGuest] == "sim" {
		root, _ := data[DataRoot].(string)
		exe, _ := data[DataNodeboot].(string)
		return guest.Sim{Root: root, Binary: exe}
	}
	return guest.Windows{SSH: data["ConnType"] == "ssh"}
}

// communicator is the guest.Transport of Packer's communicator: node paths are mapped by the
// guest's language, and commands that change the machine run as elevated_user when it is set.
type communicator struct {
	p    *Provisioner
	lang guest.Lang
}

func (c communicator) Run(ctx context.Context, cmd guest.Command, stdout, stderr io.Writer) (int, error) {
	line := cmd.Line
	if cmd.Elevated && c.p.config.ElevatedUser != "" {
		var err error
		if line, err = guestexec.GenerateElevatedRunner(line, c.p); err != nil {
			return 0, fmt.Errorf("prepare the elevated runner: %w", err)
		}
	}
	rc := &packersdk.RemoteCmd{Command: line, Stdin: cmd.Stdin, Stdout: stdout, Stderr: stderr}
	if err := c.p.comm.Start(ctx, rc); err != nil {
		return 0, err
	}
	return rc.Wait(), nil
}

func (c communicator) Upload(_ context.Context, dst string, src io.Reader, _ int64) error {
	return c.p.comm.Upload(c.lang.Path(dst), src, nil)
}

func (c communicator) Download(_ context.Context, src string, dst io.Writer) error {
	return c.p.comm.Download(c.lang.Path(src), dst)
}

// features are the Windows features the bake installs: Containers unless
// install_containers_feature is false, and Hyper-V when the plan has Hyper-V isolation (from the
// release's or this provisioner's hyperv_isolation).
func (p *Provisioner) features() []string {
	var fs []string
	if *p.config.InstallContainersFeature {
		fs = append(fs, guest.FeatureContainers)
	}
	if p.config.plan.HyperV() {
		fs = append(fs, guest.FeatureHyperV)
	}
	return fs
}

// enableFeatures installs the Windows features and restarts the guest when Windows asks.
func (p *Provisioner) enableFeatures(ctx context.Context, ui packersdk.Ui, t guest.Transport, g guest.Lang, out io.Writer) error {
	fs := p.features()
	if len(fs) == 0 {
		return nil
	}
	cmd := g.EnableFeatures(fs...)
	if cmd == "" {
		return nil
	}
	names := strings.Join(fs, " and ") + " feature"
	if len(fs) > 1 {
		names += "s"
	}
	ui.Say("kubewin: enabling the Windows " + names)
	status, err := guest.Run(ctx, t, guest.Command{What: "enable the " + names, Line: cmd, Elevated: true}, out, 3010)
	if err != nil && p.config.plan.HyperV() {
		return fmt.Errorf("%w: the Hyper-V feature installs only where the processor exposes virtualization to Windows; on a virtual machine "+
			"use one with nested virtualization (on Azure, a size that supports it, such as Dv3, Dsv3, Dv5 or Dsv5), or leave hyperv_isolation "+
			"out of the kubewin-release data source and of this provisioner", err)
	}
	if err != nil || status != 3010 {
		return err
	}
	bootTime := guest.Command{What: "read the guest's boot time", Line: g.BootTime()}
	before, err := guest.Output(ctx, t, bootTime)
	if err != nil {
		return err
	}
	ui.Say("kubewin: restarting the guest to finish the " + names)
	if _, err := guest.Run(ctx, t, guest.Command{What: "restart", Line: g.Restart()}, out, 1115, 1190); err != nil {
		return err
	}
	poll := p.restartPoll
	if poll == 0 {
		poll = 10 * time.Second
	}
	deadline := time.Now().Add(p.config.RestartTimeout)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
		// Until the guest is back the command fails or still reports the old boot.
		if now, err := guest.Output(ctx, t, bootTime); err == nil && now != before && strings.HasPrefix(now, "boot ") {
			ui.Say("kubewin: the guest is back")
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the guest did not come back within restart_timeout (%s) after enabling the %s: raise restart_timeout or "+
				"check the guest's console", p.config.RestartTimeout, names)
		}
	}
}

// saveManifest writes the manifest the bake installed on the Packer host.
func (p *Provisioner) saveManifest(ui packersdk.Ui, raw []byte) error {
	m, err := api.LoadImageManifest(raw)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p.config.ManifestOutput), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(p.config.ManifestOutput, raw, 0o644); err != nil {
		return fmt.Errorf("write manifest_output: %w", err)
	}
	ui.Say(fmt.Sprintf("kubewin: image manifest (%d files, pause %s, %d workload images) written to %s", len(m.Files), m.PauseImage.Reference,
		len(m.WorkloadImages), p.config.ManifestOutput))
	return nil
}
