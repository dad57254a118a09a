package windows

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/nodecmd"
	"github.com/kubewin/kubewin/nodeboot/internal/platform"
)

var _ platform.Host = (*Platform)(nil)

// AllowInbound adds (or replaces) a named inbound allow rule with netsh.
func (*Platform) AllowInbound(ctx context.Context, r platform.FirewallRule) error {
	_ = exec.CommandContext(ctx, "netsh", "advfirewall", "firewall", "delete", "rule", "name="+r.Name).Run()
	out, err := exec.CommandContext(ctx, "netsh", "advfirewall", "firewall", "add", "rule", "name="+r.Name,
		"dir=in", "action=allow", "protocol="+r.Protocol, "localport="+strconv.Itoa(r.Port)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("firewall rule %s: %v: %s", r.Name, err, out)
	}
	return nil
}

// ExcludeFromScanning adds Microsoft Defender path exclusions.
func (*Platform) ExcludeFromScanning(ctx context.Context, paths []string) error {
	quoted := make([]string, len(paths))
	for i, p := range paths {
		quoted[i] = "'" + strings.ReplaceAll(p, "'", "''") + "'"
	}
	script := "Add-MpPreference -ExclusionPath " + strings.Join(quoted, ",")
	out, err := exec.CommandContext(ctx, "powershell.exe", "-NoProfile", "-NonInteractive", "-Command", script).CombinedOutput()
	if err != nil {
		return fmt.Errorf("defender exclusions: %v: %s", err, out)
	}
	return nil
}

// ImportImage loads an OCI archive with the runtime's own client.
func (*Platform) ImportImage(ctx context.Context, runtime v1alpha1.RuntimeName, archive string) error {
	var cmd *exec.Cmd
	switch runtime {
	case v1alpha1.RuntimeContainerd:
		cmd = exec.CommandContext(ctx, nodecmd.DefaultPaths().ContainerdBinDir+`\ctr.exe`, "--namespace", "k8s.io", "images", "import", archive)
	case v1alpha1.RuntimeDocker:
		cmd = exec.CommandContext(ctx, nodecmd.DefaultPaths().DockerBinDir+`\docker.exe`, "load", "--input", archive)
	default:
		return fmt.Errorf("runtime %q cannot import images", runtime)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("import %s into %s: %v: %s", archive, runtime, err, out)
	}
	return nil
}

// RestartRuntime restarts the runtime's Windows service.
func (p *Platform) RestartRuntime(ctx context.Context, runtime v1alpha1.RuntimeName) error {
	if err := p.Services().Stop(ctx, string(runtime)); err != nil {
		return err
	}
	return p.Services().Start(ctx, string(runtime))
}
