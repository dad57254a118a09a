package join

import (
	"context"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/filesum"
	"github.com/kubewin/kubewin/internal/nodecmd"
	"github.com/kubewin/kubewin/internal/nodestatus"
	"github.com/kubewin/kubewin/nodeboot/internal/platform"
)

// preflightData is what the preflight phase reads.
type preflightData interface {
	config() *v1alpha1.NodeConfig
	manifest() *v1alpha1.ImageManifest
	machine() platform.Platform
	paths() nodecmd.Paths
}

// runPreflight checks the machine against the image and the NodeConfig.
func runPreflight(ctx context.Context, d preflightData) error {
	cfg, m, p := d.config(), d.manifest(), d.machine()
	if errs := v1alpha1.CheckCompatible(cfg, m); len(errs) > 0 {
		return nodestatus.Errorf(nodestatus.CodeManifestInvalid, "%v", errs.ToAggregate())
	}
	build, err := p.OSBuild()
	if err != nil {
		return nodestatus.Errorf(nodestatus.CodeInternal, "read the OS build: %w", err)
	}
	if v1alpha1.WindowsBuild(build) != m.WindowsBuild {
		return nodestatus.Errorf(nodestatus.CodeOSBuildMismatch, "the machine runs Windows build %d but the image was baked for %d (Windows Server %s)",
			build, m.WindowsBuild, m.WindowsBuild.Release())
	}
	if err := verifyPayload(d); err != nil {
		return err
	}
	if err := p.CheckRuntime(ctx, cfg.Runtime.Name, cfg.Runtime.Endpoint); err != nil {
		return nodestatus.Errorf(nodestatus.CodeRuntimeMissing, "container runtime %s: %w", cfg.Runtime.Name, err)
	}
	if err := p.CheckPorts(); err != nil {
		return nodestatus.Errorf(nodestatus.CodePortInUse, "%w", err)
	}
	return nil
}

// verifyPayload checks every file of the image against its sha256: first boot downloads
// nothing and trusts nothing it did not bake.
func verifyPayload(d preflightData) error {
	for _, f := range d.manifest().Files {
		win := d.paths().Payload(f.Path)
		got, size, err := filesum.File(d.machine().Path(win))
		if err != nil {
			return nodestatus.Errorf(nodestatus.CodePayloadCorrupt, "payload file %s: %w", win, err)
		}
		if got != f.SHA256 || size != f.Size {
			return nodestatus.Errorf(nodestatus.CodePayloadCorrupt, "payload file %s has sha256 %s and %d bytes, the image manifest says %s and %d bytes",
				win, got, size, f.SHA256, f.Size)
		}
	}
	return nil
}
