// Package node is the kubewin-node provisioner: it gets every artifact of a kubewin image onto
// the guest, verified, and runs `nodeboot bake` there, which installs the payload, configures
// the runtime, imports the pause image and registers nodeboot to join the node at first boot.
package node

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
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
	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/filesum"
	"github.com/kubewin/kubewin/internal/nodecmd"
	"github.com/kubewin/kubewin/internal/ociimage"
)

// Node paths of the bake.
const (
	planPath     = `C:\ProgramData\kubewin\bake\plan.json`
	pauseArchive = "ProgramData/kubewin/images/pause.tar"
	nodebootFile = "k/nodeboot.exe"
)

// Provisioner is kubewin-node.
type Provisioner struct {
	config Config
	ctx    interpolate.Context

	comm packersdk.Communicator
	// restartPoll is how often the guest is asked whether it is back; tests shorten it.
	restartPoll time.Duration
	// registry configures pause image pulls on the host; tests count bytes with it.
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
	plan := *p.config.plan
	ui.Say(fmt.Sprintf("kubewin: baking Windows Server %s, Kubernetes %s, %s %s (%d artifacts, %s)",
		plan.WindowsBuild.Release(), plan.KubernetesVersion, plan.Runtime.Name, plan.Runtime.Version, len(plan.Files), p.config.Transfer))

	if *p.config.InstallContainersFeature {
		if err := p.enableContainers(ctx, ui, g); err != nil {
			return err
		}
	}
	args := bakeArgs{manifest: planPath, parallel: p.config.Parallel}
	switch p.config.Transfer {
	case GuestFetch:
		args.mirror = p.config.Mirror
		if plan.PauseImage.Archive == "" {
			args.pullPause = pauseArchive
		}
		if err := p.fetchNodeboot(ctx, ui, g, &plan); err != nil {
			return err
		}
	case HostCache:
		if err := p.upload(ctx, ui, g, &plan); err != nil {
			return err
		}
	}
	doc, err := api.EncodeJSON(plan)
	if err != nil {
		return err
	}
	if err := p.run(ctx, ui, "prepare the bake directory", g.mkdir(winDir(planPath)), false); err != nil {
		return err
	}
	if err := comm.Upload(g.path(planPath), bytes.NewReader(doc), nil); err != nil {
		return fmt.Errorf("upload the bake plan: %w", err)
	}
	ui.Say("kubewin: running nodeboot bake on the guest")
	if err := p.run(ctx, ui, "nodeboot bake", g.bake(nodecmd.DefaultPaths().Payload(nodebootFile), args), true); err != nil {
		return err
	}
	return p.saveManifest(ui, g)
}

// guestOf picks the guest's language from the configuration or what the builder says of it.
func (p *Provisioner) guestOf(data map[string]any) guest {
	if p.config.SimRoot != "" {
		return sim{root: p.config.SimRoot, nodeboot: p.config.SimNodeboot}
	}
	if data[DataGuest] == "sim" {
		root, _ := data[DataRoot].(string)
		exe, _ := data[DataNodeboot].(string)
		return sim{root: root, nodeboot: exe}
	}
	return windows{ssh: data["ConnType"] == "ssh"}
}

// run runs a command on the guest, its output shown in the UI, and fails on a non-zero exit.
func (p *Provisioner) run(ctx context.Context, ui packersdk.Ui, what, command string, elevated bool) error {
	_, err := p.runStatus(ctx, ui, what, command, elevated)
	return err
}

// runStatus is run accepting exit codes in ok besides 0, and returns the exit code.
func (p *Provisioner) runStatus(ctx context.Context, ui packersdk.Ui, what, command string, elevated bool, ok ...int) (int, error) {
	if elevated && p.config.ElevatedUser != "" {
		var err error
		if command, err = guestexec.GenerateElevatedRunner(command, p); err != nil {
			return 0, fmt.Errorf("%s: prepare the elevated runner: %w", what, err)
		}
	}
	cmd := &packersdk.RemoteCmd{Command: command}
	if err := cmd.RunWithUi(ctx, p.comm, ui); err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	// RunWithUi returns nil whatever the exit status.
	status := cmd.ExitStatus()
	if status == 0 {
		return 0, nil
	}
	for _, c := range ok {
		if status == c {
			return status, nil
		}
	}
	return status, fmt.Errorf("%s failed on the guest with exit status %d (its output is above)", what, status)
}

// enableContainers installs the Containers feature and restarts the guest when Windows asks.
func (p *Provisioner) enableContainers(ctx context.Context, ui packersdk.Ui, g guest) error {
	cmd := g.enableContainers()
	if cmd == "" {
		return nil
	}
	ui.Say("kubewin: enabling the Windows Containers feature")
	status, err := p.runStatus(ctx, ui, "enable the Containers feature", cmd, true, 3010)
	if err != nil || status != 3010 {
		return err
	}
	before, err := p.output(ctx, g.bootTime())
	if err != nil {
		return fmt.Errorf("read the guest's boot time: %w", err)
	}
	ui.Say("kubewin: restarting the guest to finish the Containers feature")
	if _, err := p.runStatus(ctx, ui, "restart", g.restart(), false, 1115, 1190); err != nil {
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
		if now, err := p.output(ctx, g.bootTime()); err == nil && now != before && strings.HasPrefix(now, "boot ") {
			ui.Say("kubewin: the guest is back")
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the guest did not come back within restart_timeout (%s) after enabling the Containers feature: raise restart_timeout or check the guest's console", p.config.RestartTimeout)
		}
	}
}

// output runs a command and returns its trimmed standard output.
func (p *Provisioner) output(ctx context.Context, command string) (string, error) {
	var out bytes.Buffer
	cmd := &packersdk.RemoteCmd{Command: command, Stdout: &out, Stderr: &out}
	if err := p.comm.Start(ctx, cmd); err != nil {
		return "", err
	}
	if status := cmd.Wait(); status != 0 {
		return "", fmt.Errorf("exit status %d: %s", status, strings.TrimSpace(out.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

// fetchNodeboot has the guest download nodeboot itself (verified), which then fetches the rest.
func (p *Provisioner) fetchNodeboot(ctx context.Context, ui packersdk.Ui, g guest, plan *v1alpha1.ImageManifest) error {
	for _, f := range plan.Files {
		if f.Path != nodebootFile {
			continue
		}
		url := f.Source
		if p.config.Mirror != "" {
			url = strings.TrimSuffix(p.config.Mirror, "/") + "/" + f.Path
		}
		cmd := g.fetch(url, f.SHA256, nodecmd.DefaultPaths().Payload(f.Path))
		if cmd == "" {
			return nil
		}
		ui.Say("kubewin: fetching nodeboot on the guest from " + url)
		return p.run(ctx, ui, "fetch nodeboot", cmd, false)
	}
	return fmt.Errorf("the release lists no %s: use the manifest of a kubewin-release data source", nodebootFile)
}

// upload fills the host cache and uploads every artifact and the pause image archive.
func (p *Provisioner) upload(ctx context.Context, ui packersdk.Ui, g guest, plan *v1alpha1.ImageManifest) error {
	c := &cache{dir: p.config.CacheDir, client: &http.Client{Timeout: 30 * time.Minute}, registry: p.registry}
	start := time.Now()
	type item struct{ node, local string }
	var items []item
	for _, f := range plan.Files {
		local, err := c.file(ctx, f)
		if err != nil {
			return err
		}
		items = append(items, item{nodecmd.DefaultPaths().Payload(f.Path), local})
	}
	if plan.PauseImage.Archive == "" {
		local, err := c.pauseArchive(ctx, plan.PauseImage)
		if err != nil {
			return err
		}
		sum, size, err := filesum.File(local)
		if err != nil {
			return err
		}
		plan.Files = append(plan.Files, v1alpha1.File{Path: pauseArchive, SHA256: sum, Size: size})
		plan.PauseImage.Archive = pauseArchive
		items = append(items, item{nodecmd.DefaultPaths().Payload(pauseArchive), local})
	}
	ui.Say(fmt.Sprintf("kubewin: host cache %s: %d files, %d bytes downloaded, %d bytes from the cache, in %s",
		c.dir, len(items), c.Downloaded, c.Reused, time.Since(start).Round(time.Millisecond)))
	dirs := map[string]bool{}
	start = time.Now()
	var sent int64
	for _, it := range items {
		if dir := winDir(it.node); !dirs[dir] {
			dirs[dir] = true
			if err := p.run(ctx, ui, "create "+dir, g.mkdir(dir), false); err != nil {
				return err
			}
		}
		n, err := uploadFile(p.comm, g.path(it.node), it.local)
		if err != nil {
			return fmt.Errorf("upload %s: %w", it.node, err)
		}
		sent += n
	}
	secs := time.Since(start).Seconds()
	ui.Say(fmt.Sprintf("kubewin: uploaded %d files, %d bytes in %.1fs (%.1f MB/s)", len(items), sent, secs, float64(sent)/1e6/max(secs, 1e-3)))
	return nil
}

// winDir is the directory of a node path.
func winDir(node string) string { return node[:max(strings.LastIndex(node, `\`), 0)] }

// uploadFile uploads a local file and returns its size.
func uploadFile(comm packersdk.Communicator, dst, src string) (int64, error) {
	f, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), comm.Upload(dst, f, &fi)
}

// saveManifest downloads the manifest the bake installed and writes it on the Packer host.
func (p *Provisioner) saveManifest(ui packersdk.Ui, g guest) error {
	var buf bytes.Buffer
	if err := p.comm.Download(g.path(nodecmd.DefaultPaths().ImageManifest), &buf); err != nil {
		return fmt.Errorf("download the image manifest from the guest: %w", err)
	}
	m, err := api.LoadImageManifest(buf.Bytes())
	if err != nil {
		return fmt.Errorf("the image manifest the bake installed: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(p.config.ManifestOutput), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(p.config.ManifestOutput, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write manifest_output: %w", err)
	}
	ui.Say(fmt.Sprintf("kubewin: image manifest (%d files, pause %s) written to %s", len(m.Files), m.PauseImage.Reference, p.config.ManifestOutput))
	return nil
}
