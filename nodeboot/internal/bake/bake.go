package bake

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/kubewin/kubewin/internal/api"
	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/nodecmd"
	"github.com/kubewin/kubewin/nodeboot/internal/platform"
)

// Machine is the platform of the machine being baked.
type Machine interface {
	platform.Platform
	platform.Host
}

// Options of a bake.
type Options struct {
	Machine  Machine
	Paths    nodecmd.Paths
	Manifest []byte
	Fetch    FetchOptions
	Out      io.Writer
}

// Bake prepares the machine from an image manifest and returns the fetch figures.
func Bake(ctx context.Context, o Options) (Stats, error) {
	m, err := api.LoadImageManifest(o.Manifest)
	if err != nil {
		return Stats{}, err
	}
	o.Fetch.Local = func(path string) string {
		return o.Machine.Path(o.Paths.Payload(path))
	}
	if o.Fetch.Progress == nil {
		o.Fetch.Progress = o.Out
	}
	st, err := Fetch(ctx, m, o.Fetch)
	if err != nil {
		return st, err
	}
	fmt.Fprintf(o.Out, "[bake] payload: %d files verified, %d bytes downloaded, %d bytes already present, in %s\n", st.Files, st.Downloaded, st.Reused, st.Elapsed.Round(1e6))
	for _, dir := range []string{o.Paths.LogDir, o.Paths.KubeletCertDir, o.Paths.CNIConfDir, o.Paths.CNIBinDir, o.Paths.NodebootDir, `C:\etc\kubernetes\pki`} {
		if err := os.MkdirAll(o.Machine.Path(dir), 0o755); err != nil {
			return st, fmt.Errorf("create %s: %w", dir, err)
		}
	}
	if err := o.Machine.WriteFile(o.Paths.ImageManifest, o.Manifest); err != nil {
		return st, fmt.Errorf("install the image manifest: %w", err)
	}
	for _, r := range []platform.FirewallRule{{Name: "kubelet", Protocol: "TCP", Port: 10250}, {Name: "kubewin-vxlan", Protocol: "UDP", Port: int(v1alpha1.VXLANPort)}} {
		if err := o.Machine.AllowInbound(ctx, r); err != nil {
			return st, err
		}
	}
	if err := o.Machine.ExcludeFromScanning(ctx, []string{o.Paths.BinDir, o.Paths.CNIBinDir, `C:\ProgramData\containerd`, `C:\Program Files\containerd`}); err != nil {
		return st, err
	}
	if err := configureRuntime(ctx, o, m); err != nil {
		return st, err
	}
	// nodeboot starts at every boot; it joins on the first one.
	svc := platform.ServiceSpec{
		Name: "nodeboot", DisplayName: "kubewin nodeboot", Description: "Joins this machine to its Kubernetes cluster and runs its node services (kubewin)",
		Executable: o.Paths.BinDir + `\nodeboot.exe`, Args: []string{"run"}, Dependencies: []string{string(m.Runtime.Name)},
	}
	if err := o.Machine.Services().Ensure(ctx, svc); err != nil {
		return st, fmt.Errorf("register the nodeboot service: %w", err)
	}
	fmt.Fprintf(o.Out, "[bake] image ready: Windows Server %s, Kubernetes %s, %s %s; nodeboot starts at boot\n",
		m.WindowsBuild.Release(), m.KubernetesVersion, m.Runtime.Name, m.Runtime.Version)
	return st, nil
}

// configureRuntime pins the image's pause image and CNI directories in the runtime's
// configuration (containerd) and imports the pause image archive, so that no pod sandbox
// ever needs a pull.
func configureRuntime(ctx context.Context, o Options, m *v1alpha1.ImageManifest) error {
	conf, err := nodecmd.ContainerdConfig(m, o.Paths)
	if err != nil {
		return err
	}
	if conf != nil {
		for path, data := range conf.Files {
			if err := o.Machine.WriteFile(path, data); err != nil {
				return fmt.Errorf("write %s: %w", path, err)
			}
		}
	}
	if err := o.Machine.RestartRuntime(ctx, m.Runtime.Name); err != nil {
		return fmt.Errorf("restart %s: %w", m.Runtime.Name, err)
	}
	if a := m.PauseImage.Archive; a != "" {
		if err := o.Machine.ImportImage(ctx, m.Runtime.Name, o.Paths.Payload(a)); err != nil {
			return err
		}
		fmt.Fprintf(o.Out, "[bake] pause image %s imported into %s\n", m.PauseImage.Reference, m.Runtime.Name)
	}
	return nil
}
