package bake

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/kubewin/kubewin/internal/api"
	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/filesum"
	"github.com/kubewin/kubewin/internal/nodecmd"
	"github.com/kubewin/kubewin/internal/ociimage"
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
	// PullPause, when set, is the payload path at which the bake writes the manifest's pause
	// image (reference and digest), pulled from its registry, as an OCI archive; the archive
	// joins the payload and the manifest installed in the image lists it.
	PullPause string
	// Registry configures that pull.
	Registry ociimage.Options
	Out      io.Writer
}

// Bake prepares the machine from an image manifest and returns the fetch figures.
func Bake(ctx context.Context, o Options) (Stats, error) {
	m, err := api.LoadImageManifest(o.Manifest)
	if err != nil {
		return Stats{}, err
	}
	for i, w := range m.WorkloadImages {
		if w.Archive == "" {
			return Stats{}, fmt.Errorf("workloadImages[%d].archive: Required value: the bake imports workload image %s from its archive; "+
				"an installed image's manifest, which has none, cannot be baked again: bake from the plan", i, w.Reference)
		}
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
	_, _ = fmt.Fprintf(o.Out, "[bake] payload: %d files verified, %d bytes downloaded, %d bytes already present, in %s\n", st.Files, st.Downloaded,
		st.Reused,
		st.Elapsed.Round(1e6))
	if o.PullPause != "" {
		if o.Manifest, err = pullPause(ctx, o, m); err != nil {
			return st, err
		}
	}
	for _, f := range m.Files {
		if f.Unpack == "" {
			continue
		}
		n, err := unpack(o.Machine.Path(o.Paths.Payload(f.Path)), o.Machine.Path(o.Paths.Payload(f.Unpack)))
		if err != nil {
			return st, fmt.Errorf("unpack payload file %s: %w", f.Path, err)
		}
		_, _ = fmt.Fprintf(o.Out, "[bake] %s: %d files unpacked into %s\n", f.Path, n, o.Paths.Payload(f.Unpack))
	}
	for _, dir := range []string{o.Paths.LogDir, o.Paths.KubeletCertDir, o.Paths.CNIConfDir, o.Paths.CNIBinDir, o.Paths.NodebootDir,
		`C:\etc\kubernetes\pki`} {
		if err := os.MkdirAll(o.Machine.Path(dir), 0o755); err != nil {
			return st, fmt.Errorf("create %s: %w", dir, err)
		}
	}
	if err := o.Machine.WriteFile(o.Paths.ImageManifest, o.Manifest); err != nil {
		return st, fmt.Errorf("install the image manifest: %w", err)
	}
	for _, p := range nodecmd.InboundPorts {
		if err := o.Machine.AllowInbound(ctx, platform.FirewallRule{Name: p.Name, Protocol: p.Protocol, Port: p.Port, LastPort: p.LastPort}); err != nil {
			return st, err
		}
	}
	if err := o.Machine.DisableAutomaticUpdates(ctx); err != nil {
		return st, err
	}
	if defender, err := o.Machine.ExcludeFromScanning(ctx, o.Paths.ScanExclusions()); err != nil {
		return st, err
	} else if !defender {
		_, _ = fmt.Fprintln(o.Out, "[bake] Microsoft Defender is not installed: no scan exclusions to add")
	}
	if err := configureRuntime(ctx, o, m); err != nil {
		return st, err
	}
	if len(m.WorkloadImages) > 0 {
		if err := dropWorkloadArchives(o, m); err != nil {
			return st, err
		}
	}
	// nodeboot starts at every boot, after the runtime; it joins on the first one and starts the
	// node services on every one.
	svc := platform.ServiceSpec{
		Name: "nodeboot", DisplayName: "kubewin nodeboot", Description: "Joins this machine to its Kubernetes cluster and runs its node services (kubewin)",
		Executable: o.Paths.BinDir + `\nodeboot.exe`, Args: []string{"run"}, Dependencies: []string{string(m.Runtime.Name)}, Start: platform.StartAtBoot,
	}
	if err := o.Machine.Services().Ensure(ctx, svc); err != nil {
		return st, fmt.Errorf("register the nodeboot service: %w", err)
	}
	_, _ = fmt.Fprintf(o.Out, "[bake] image ready: Windows Server %s, Kubernetes %s, %s %s; nodeboot starts at boot\n",
		m.WindowsBuild.Release(), m.KubernetesVersion, m.Runtime.Name, m.Runtime.Version)
	return st, nil
}

// dropWorkloadArchives deletes the workload images' archives once they are in the runtime's
// image store, and installs the manifest without them: a multi-GB image is not stored twice in
// the image, and first boot, which verifies every file the manifest lists, does not read them.
// The runtime verified every blob against its digest at import (containerd's content store,
// Docker's load); the manifest keeps each image's digest. The pause image's archive stays, a
// small file beside workload images.
func dropWorkloadArchives(o Options, m *v1alpha1.ImageManifest) error {
	for i, w := range m.WorkloadImages {
		if err := os.Remove(o.Machine.Path(o.Paths.Payload(w.Archive))); err != nil {
			return fmt.Errorf("workload image %s: remove its archive after the import: %w", w.Reference, err)
		}
		m.Files = slices.DeleteFunc(m.Files, func(f v1alpha1.File) bool { return f.Path == w.Archive })
		m.WorkloadImages[i].Archive = ""
	}
	raw, err := api.EncodeJSON(m)
	if err != nil {
		return err
	}
	if err := o.Machine.WriteFile(o.Paths.ImageManifest, raw); err != nil {
		return fmt.Errorf("install the image manifest: %w", err)
	}
	_, _ = fmt.Fprintf(o.Out, "[bake] workload image archives removed from the payload: the images are in %s's store only\n", m.Runtime.Name)
	return nil
}

// pullPause writes the pause image as an OCI archive into the payload, adds it to the manifest
// and returns the manifest to install.
func pullPause(ctx context.Context, o Options, m *v1alpha1.ImageManifest) ([]byte, error) {
	if err := v1alpha1.ValidatePayloadPath(o.PullPause); err != nil {
		return nil, fmt.Errorf("pause archive path %q: %w", o.PullPause, err)
	}
	path := o.Machine.Path(o.Paths.Payload(o.PullPause))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	err = ociimage.WriteArchive(ctx, f, m.PauseImage.Reference, m.PauseImage.Digest, o.Registry)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("pull the pause image: %w", err)
	}
	sum, size, err := filesum.File(path)
	if err != nil {
		return nil, err
	}
	m.Files = slices.DeleteFunc(m.Files, func(f v1alpha1.File) bool { return f.Path == o.PullPause })
	m.Files = append(m.Files, v1alpha1.File{Path: o.PullPause, SHA256: sum, Size: size})
	m.PauseImage.Archive = o.PullPause
	_, _ = fmt.Fprintf(o.Out, "[bake] pause image %s@%s pulled into %s (%d bytes)\n", m.PauseImage.Reference, m.PauseImage.Digest, o.PullPause, size)
	return api.EncodeJSON(m)
}

// configureRuntime pins the image's pause image and CNI directories in the runtime's
// configuration (containerd) and imports the pause image archive and the workload images'
// archives into the image store the kubelet uses, so that no pod sandbox ever needs a pull, nor
// a pod of a workload image.
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
	if m.HyperV() {
		_, _ = fmt.Fprintf(o.Out, "[bake] containerd runtime handlers: %s (default, process isolation), %s (Hyper-V isolation)\n",
			nodecmd.ProcessHandler, nodecmd.HyperVHandler)
	}
	// The runtime registers itself as a Windows service, from the release the image unpacked,
	// as its project documents (containerd.exe --register-service, dockerd.exe
	// --register-service): it must be the process the service manager starts.
	svc := platform.ServiceSpec{Name: string(m.Runtime.Name), SelfRegistering: true, Start: platform.StartAtBoot}
	switch m.Runtime.Name {
	case v1alpha1.RuntimeContainerd:
		// containerd writes its own log (--log-file; without it a service's output is lost:
		// containerd cmd/containerd/command/service_windows.go).
		svc.Executable, svc.Args = o.Paths.ContainerdBinDir+`\containerd.exe`, []string{"--config", o.Paths.ContainerdConfigFile, "--log-file",
			o.Paths.ContainerdLog()}
	case v1alpha1.RuntimeDocker:
		// dockerd has no log file option; as a service it logs to the Windows event log
		// (moby cmd/dockerd/docker_windows.go, service_windows.go).
		svc.Executable = o.Paths.DockerBinDir + `\dockerd.exe`
	}
	if err := o.Machine.Services().Ensure(ctx, svc); err != nil {
		return fmt.Errorf("register the %s service: %w", m.Runtime.Name, err)
	}

	if err := o.Machine.RestartRuntime(ctx, m.Runtime.Name); err != nil {
		return fmt.Errorf("restart %s: %w", m.Runtime.Name, err)
	}
	if a := m.PauseImage.Archive; a != "" {
		if err := o.Machine.ImportImage(ctx, m.Runtime.Name, o.Paths.Payload(a), ""); err != nil {
			return err
		}
		_, _ = fmt.Fprintf(o.Out, "[bake] pause image %s imported into %s\n", m.PauseImage.Reference, m.Runtime.Name)
	}
	start := time.Now()
	var size int64
	for _, w := range m.WorkloadImages {
		t := time.Now()
		if err := o.Machine.ImportImage(ctx, m.Runtime.Name, o.Paths.Payload(w.Archive), w.OSVersion); err != nil {
			return fmt.Errorf("workload image %s: %w", w.Reference, err)
		}
		size += w.Size
		_, _ = fmt.Fprintf(o.Out, "[bake] workload image %s (%s, os.version %s, %d bytes) imported into %s in %s%s\n", w.Reference, w.Digest,
			w.OSVersion, w.Size, m.Runtime.Name, time.Since(t).Round(time.Millisecond), w.IsolationNote(m.WindowsBuild))
	}
	if len(m.WorkloadImages) > 0 {
		_, _ = fmt.Fprintf(o.Out, "[bake] workload images: %d imported, %d bytes, in %s\n", len(m.WorkloadImages), size,
			time.Since(start).Round(time.Millisecond))
	}
	return nil
}
