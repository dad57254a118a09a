package windows

import (
	"context"
	"fmt"
	"strings"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/nodecmd"
	"github.com/kubewin/kubewin/nodeboot/internal/platform"
)

// AllowInbound adds (or replaces) a named inbound allow rule in the Windows firewall.
func (p *Platform) AllowInbound(ctx context.Context, r platform.FirewallRule) error {
	if _, err := p.b.Shell.Run(ctx, firewallScript(r)); err != nil {
		return fmt.Errorf("firewall rule %s: %w", r.Name, err)
	}
	return nil
}

// DisableAutomaticUpdates disables and stops the Windows Update service.
func (p *Platform) DisableAutomaticUpdates(ctx context.Context) error {
	if _, err := p.b.Shell.Run(ctx, updatesScript()); err != nil {
		return fmt.Errorf("disable Windows Update: %w", err)
	}
	return nil
}

// ExcludeFromScanning adds Microsoft Defender path exclusions, on images that have Defender.
func (p *Platform) ExcludeFromScanning(ctx context.Context, paths []string) (bool, error) {
	out, err := p.b.Shell.Run(ctx, defenderQueryScript())
	if err != nil {
		return false, fmt.Errorf("is Microsoft Defender installed: %w", err)
	}
	if strings.TrimSpace(string(out)) != "True" {
		return false, nil
	}
	if _, err := p.b.Shell.Run(ctx, exclusionScript(paths)); err != nil {
		return false, fmt.Errorf("defender exclusions: %w", err)
	}
	return true, nil
}

// ImportImage loads an OCI archive with the runtime's own client into the image store CRI uses
// (containerd's k8s.io namespace). With the image's os.version, ctr imports and unpacks it for
// that platform (--platform 'windows(<os.version>)/amd64', the syntax of containerd's platforms
// Parse): without it, ctr matches the machine's own build, and an image of an older build than
// the machine's compatible range is not unpacked (containerd cmd/ctr/commands/images/import.go;
// containerd/platforms defaults_windows.go).
func (p *Platform) ImportImage(ctx context.Context, runtime v1alpha1.RuntimeName, archive, osVersion string) error {
	paths := nodecmd.DefaultPaths()
	var s Script
	switch runtime {
	case v1alpha1.RuntimeContainerd:
		args := []string{"--namespace", "k8s.io", "images", "import"}
		if osVersion != "" {
			args = append(args, "--platform", "windows("+osVersion+")/amd64")
		}
		s = programScript(paths.ContainerdBinDir+`\ctr.exe`, append(args, archive))
	case v1alpha1.RuntimeDocker:
		s = programScript(paths.DockerBinDir+`\docker.exe`, []string{"load", "--input", archive})
	default:
		return fmt.Errorf("runtime %q cannot import images", runtime)
	}
	if _, err := p.b.Shell.Run(ctx, s); err != nil {
		return fmt.Errorf("import %s into %s: %w", archive, runtime, err)
	}
	return nil
}

// RemovePods removes the pods' containers. containerd is restarted after removing any, so that
// its CRI plugin, which keeps its sandboxes and containers in memory, reads them again.
func (p *Platform) RemovePods(ctx context.Context, runtime v1alpha1.RuntimeName) error {
	paths := nodecmd.DefaultPaths()
	client := paths.ContainerdBinDir + `\ctr.exe`
	if runtime == v1alpha1.RuntimeDocker {
		client = paths.DockerBinDir + `\docker.exe`
	}
	out, err := p.b.Shell.Run(ctx, podsScript(runtime, client))
	if err != nil {
		return fmt.Errorf("remove the pods' containers: %w", err)
	}
	if runtime == v1alpha1.RuntimeContainerd && strings.TrimSpace(string(out)) != "0" {
		return p.RestartRuntime(ctx, runtime)
	}
	return nil
}

// RestartRuntime restarts the runtime's service so that it reads its configuration.
func (p *Platform) RestartRuntime(ctx context.Context, runtime v1alpha1.RuntimeName) error {
	if err := p.Services().Stop(ctx, string(runtime)); err != nil {
		return err
	}
	return p.Services().Start(ctx, string(runtime))
}
