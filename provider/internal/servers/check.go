// Package servers turns an existing Windows server into a Kubernetes node and back, over a
// guest.Shell (SSH or WinRM): it checks the server before changing anything, records what the
// server holds, installs the payload (or uses the image the server was baked from), joins the
// node with a short-lived token of its own, waits until it is Ready, and on removal drains it,
// resets it and leaves the server as it was before.
package servers

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/kubewin/kubewin/internal/api"
	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/guest"
	"github.com/kubewin/kubewin/internal/nodecmd"
)

// Problem is something about a server that keeps it from joining, and its fix.
type Problem struct {
	Summary, Detail string
}

// Inspect reads what the server says of itself. It changes nothing.
func Inspect(ctx context.Context, s guest.Shell) (guest.Facts, error) {
	var f guest.Facts
	out, err := guest.Output(ctx, s, guest.Command{What: "inspect the server", Line: s.Lang.Facts()})
	if err != nil {
		return f, err
	}
	if err := json.Unmarshal([]byte(lastLine(out)), &f); err != nil {
		return f, fmt.Errorf("inspect the server: it answered %q, not the facts asked for: %w", out, err)
	}
	return f, nil
}

// ReadManifest reads the image manifest of a server baked from a kubewin image.
func ReadManifest(ctx context.Context, s guest.Shell) (*v1alpha1.ImageManifest, error) {
	var b strings.Builder
	path := nodecmd.DefaultPaths().ImageManifest
	if err := s.Download(ctx, path, &b); err != nil {
		return nil, err
	}
	m, err := api.LoadImageManifest([]byte(b.String()))
	if err != nil {
		return nil, fmt.Errorf("the server's image manifest %s: %w", path, err)
	}
	return m, nil
}

// portUsers names what listens on each port a node needs.
var portUsers = map[int]string{10250: "the kubelet", 10256: "kube-proxy's health check"}

// Check lists every problem that keeps the server from joining. plan is the bake plan to
// install, or nil when the server is to join with the kubewin image it was baked from.
func Check(f guest.Facts, plan *v1alpha1.ImageManifest) []Problem {
	var ps []Problem
	add := func(summary, format string, a ...any) {
		ps = append(ps, Problem{Summary: summary, Detail: fmt.Sprintf(format, a...)})
	}
	build := v1alpha1.WindowsBuild(f.Build)
	supported := slices.Contains(v1alpha1.WindowsBuilds, build)
	switch {
	case build == 14393:
		add("Windows Server 2016 Is Not Supported",
			"%s runs Windows Server 2016 (build 14393). Kubernetes supports Windows nodes from Windows Server 2019 on, and kubewin supports %s. "+
				"Upgrade the server, or join another one.", f.ComputerName, supportedBuilds())
	case !supported:
		add("Unsupported Windows Build", "%s runs Windows build %d. kubewin supports %s. Upgrade the server, or join another one.",
			f.ComputerName, f.Build, supportedBuilds())
	case plan != nil && plan.WindowsBuild != build:
		add("Release for Another Windows Build",
			"install.release is for Windows Server %s (build %d) and %s runs Windows Server %s (build %d): containers, and the pause image, "+
				"run only on the build they were made for. Use a release for build %d (the kubewin-release data source's windows_version = %q).",
			plan.WindowsBuild.Release(), plan.WindowsBuild, f.ComputerName, build.Release(), build, build, build.Release())
	}
	if supported && !f.ContainersFeature {
		add("Containers Feature Missing", "%s does not have the Windows Containers feature, which every container runtime on Windows needs. "+
			"Install it and restart the server: `Install-WindowsFeature -Name Containers; Restart-Computer`.", f.ComputerName)
	}
	if f.RebootPending {
		add("Restart Pending", "%s waits for a restart to finish installing updates or features, or to take a new computer name. "+
			"Restart it (`Restart-Computer`) and apply again.", f.ComputerName)
	}
	for _, p := range f.PortsInUse {
		add("Port In Use", "Something on %s listens on port %d, which %s needs. Find it with "+
			"`Get-Process -Id (Get-NetTCPConnection -LocalPort %d -State Listen).OwningProcess` and stop it.", f.ComputerName, p, portUsers[p], p)
	}
	files := map[string]bool{}
	for _, file := range f.Files {
		files[strings.ToLower(file)] = true
	}
	has := func(file string) bool { return files[strings.ToLower(file)] }
	paths := nodecmd.DefaultPaths()
	baked := has(paths.ImageManifest)
	switch {
	case has(guest.JoinState):
		add("Already Joined", "%s has kubewin's join state (%s): it is a node already, joined by another resource or by its image's first boot. "+
			"Remove that node first (destroy its resource, or run `%s\\nodeboot.exe reset` on the server), or join another server.",
			f.ComputerName, guest.JoinState, paths.BinDir)
	case service(f, "kubelet") != nil:
		state := "stopped"
		if service(f, "kubelet").Running {
			state = "running"
		}
		add("Kubernetes Already Installed", "%s has a kubelet service (%s): it is already a Kubernetes node, set up by hand or by another tool. "+
			"Remove that installation (for kubeadm: `kubeadm reset`, then delete the kubelet and kube-proxy services) or join another server.", f.ComputerName,
			state)
	case has(paths.KubeletKubeconfig) || (!baked && has(paths.BinDir+`\kubelet.exe`)):
		add("Kubernetes Already Installed", "%s has files of another Kubernetes installation (%s or %s). Remove them, or join another server.",
			f.ComputerName, paths.KubeletKubeconfig, paths.BinDir+`\kubelet.exe`)
	case plan == nil && !baked:
		add("Server Not Baked", "%s has no kubewin image manifest (%s): it was not created from a kubewin image. "+
			"Add an install block to install the payload on it.", f.ComputerName, paths.ImageManifest)
	case plan != nil && baked:
		add("Server Already Baked", "%s was created from a kubewin image (%s is there). Remove the install block to join it with that image.",
			f.ComputerName, paths.ImageManifest)
	}
	if plan != nil {
		if s := service(f, string(plan.Runtime.Name)); s != nil {
			add("Runtime Already Installed", "%s already has a %s service. Installing kubewin's would replace its configuration, and removing the node "+
				"would remove it. Join the server without installing (a kubewin image), or remove that runtime first.", f.ComputerName, s.Name)
		}
	}
	return ps
}

func service(f guest.Facts, name string) *guest.Service {
	for i, s := range f.Services {
		if strings.EqualFold(s.Name, name) {
			return &f.Services[i]
		}
	}
	return nil
}

func supportedBuilds() string {
	var out []string
	for _, b := range v1alpha1.WindowsBuilds {
		out = append(out, fmt.Sprintf("Windows Server %s (build %d)", b.Release(), b))
	}
	return strings.Join(out, ", ")
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
