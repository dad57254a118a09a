package winfake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/ociimage"
	"github.com/kubewin/kubewin/internal/sim/simmachine"
	"github.com/kubewin/kubewin/nodeboot/internal/platform"
	"github.com/kubewin/kubewin/nodeboot/internal/platform/windows"
)

// shell simulates the scripts nodeboot runs from the values they were written from, and
// records their text.
type shell struct{ m *Machine }

var _ windows.Shell = shell{}

var onLink = netip.MustParseAddr("0.0.0.0")

func (s shell) Run(_ context.Context, sc windows.Script) ([]byte, error) {
	var out []byte
	err := s.m.do(Op{Backend: "shell", Call: sc.Name, Body: sc.Text}, true, func(st *State) (bool, error) {
		switch p := sc.Params.(type) {
		case windows.ListRoutesParams:
			t := windows.RouteTable{Routes: []windows.StoredRoute{}}
			best := -1
			for _, r := range st.Routes {
				if r.Store == windows.ActiveStore && r.Destination.Bits() == 0 && (best < 0 || r.Metric < best) {
					t.InterfaceIndex, best = r.InterfaceIndex, r.Metric
				}
				if r.Metric == windows.RouteMetric {
					t.Routes = append(t.Routes, windows.StoredRoute{DestinationPrefix: r.Destination.String(), NextHop: r.NextHop.String(),
						InterfaceIndex: r.InterfaceIndex, Store: r.Store})
				}
			}
			out, _ = json.Marshal(t)
			return false, nil
		case windows.AllRoutesParams:
			all := []platform.RouteEntry{}
			for _, r := range st.Routes {
				all = append(all, platform.RouteEntry{Destination: r.Destination.String(), NextHop: r.NextHop.String(), InterfaceIndex: r.InterfaceIndex,
					Metric: r.Metric, Store: r.Store})
			}
			out, _ = json.Marshal(all)
			return false, nil
		case windows.EventsParams:
			out, _ = json.Marshal(readEvents(st, p))
			return false, nil
		case windows.ApplyRoutesParams:
			return s.m.applyRoutes(st, p)
		case windows.MetadataRoutesParams:
			changed := false
			for _, name := range p.Adapters {
				a := adapterByName(st, name)
				if a == nil || len(a.Addrs) == 0 { // missing, or bound to a vSwitch: New-NetRoute fails, ignored
					continue
				}
				for _, d := range p.Destinations {
					if !slices.ContainsFunc(st.Routes, func(r Route) bool {
						return r.Destination == d && r.InterfaceIndex == a.Index && r.Store == windows.ActiveStore
					}) {
						st.Routes = append(st.Routes, Route{Destination: d, NextHop: onLink, InterfaceIndex: a.Index, Metric: 256, Store: windows.ActiveStore})
						changed = true
					}
				}
			}
			return changed, nil
		case windows.ForwardingParams:
			changed := false
			for _, alias := range p.Interfaces {
				a := adapterByName(st, alias)
				if a == nil {
					//nolint:staticcheck,revive // ST1005: Windows' own message, verbatim
					return changed, fmt.Errorf("Set-NetIPInterface : No MSFT_NetIPInterface objects found with property 'InterfaceAlias' equal to '%s'", alias)
				}
				changed = changed || !a.Forwarding
				a.Forwarding = true
			}
			return changed, nil
		case windows.FirewallParams:
			r := FirewallRule{Name: p.Rule.Name, Protocol: p.Rule.Protocol, Port: p.Rule.Port, LastPort: p.Rule.LastPort}
			i := slices.IndexFunc(st.Firewall, func(x FirewallRule) bool { return x.Name == r.Name })
			if i >= 0 && st.Firewall[i] == r {
				return false, nil
			}
			if i >= 0 {
				st.Firewall = slices.Delete(st.Firewall, i, i+1)
			}
			st.Firewall = append(st.Firewall, r)
			return true, nil
		case windows.DefenderQueryParams:
			out = []byte("True\r\n")
			if s.m.cfg.WithoutDefender {
				out = []byte("False\r\n")
			}
			return false, nil
		case windows.UpdatesParams:
			svc := st.Services[WindowsUpdateService]
			changed := svc.Config.StartType != windows.StartDisabled || svc.State != windows.Stopped
			svc.Config.StartType, svc.State = windows.StartDisabled, windows.Stopped
			return changed, nil
		case windows.ExclusionParams:
			if s.m.cfg.WithoutDefender {
				//nolint:staticcheck,revive // ST1005: Windows' own message, verbatim
				return false, errors.New("Add-MpPreference : The term 'Add-MpPreference' is not recognized as the name of a cmdlet, function, " +
					"script file, or operable program.")
			}
			changed := false
			for _, path := range p.Paths {
				if !slices.Contains(st.Exclusions, path) {
					st.Exclusions = append(st.Exclusions, path)
					changed = true
				}
			}
			return changed, nil
		case windows.ProgramParams:
			return s.m.runProgram(st, p)
		case windows.PodsParams:
			// The client talks to the runtime's service: it fails when the runtime is not there or
			// not running.
			if svc := st.Services[string(p.Runtime)]; p.Runtime != s.m.cfg.Runtime || svc == nil || svc.State != windows.Running {
				return false, fmt.Errorf("%s: cannot connect to %s: it is not running", p.Client, p.Runtime)
			}
			out = []byte(fmt.Sprintf("%d\n", len(st.Containers)))
			removed := len(st.Containers) > 0
			st.Containers = nil
			return removed, nil
		}
		return false, fmt.Errorf("the simulated machine cannot run script %s (%T)", sc.Name, sc.Params)
	})
	return out, err
}

func (m *Machine) applyRoutes(st *State, p windows.ApplyRoutesParams) (bool, error) {
	changed := false
	for _, r := range p.Remove {
		before := len(st.Routes)
		st.Routes = slices.DeleteFunc(st.Routes, func(x Route) bool {
			return x.Destination.String() == r.DestinationPrefix && x.NextHop.String() == r.NextHop && x.InterfaceIndex == r.InterfaceIndex &&
				x.Store == r.Store
		})
		changed = changed || len(st.Routes) != before
	}
	if len(p.Add) > 0 && adapterByIndex(st, p.InterfaceIndex) == nil {
		//nolint:staticcheck,revive // ST1005: Windows' own message, verbatim
		return changed, fmt.Errorf("New-NetRoute : Element not found (interface %d)", p.InterfaceIndex)
	}
	for _, r := range p.Add {
		if slices.ContainsFunc(st.Routes, func(x Route) bool {
			return x.Destination == r.Destination && x.NextHop == r.NextHop && x.InterfaceIndex == p.InterfaceIndex && x.Store == windows.ActiveStore
		}) {
			//nolint:staticcheck,revive // ST1005: Windows' own message, verbatim
			return changed, fmt.Errorf("New-NetRoute : Instance MSFT_NetRoute already exists (%s via %s)", r.Destination, r.NextHop)
		}
		st.Routes = append(st.Routes, Route{Destination: r.Destination, NextHop: r.NextHop, InterfaceIndex: p.InterfaceIndex,
			Metric: windows.RouteMetric, Store: windows.ActiveStore})
		changed = true
	}
	return changed, nil
}

// runProgram runs the programs the image ships, as far as nodeboot uses them: the runtimes'
// service registration and image import.
func (m *Machine) runProgram(st *State, p windows.ProgramParams) (bool, error) {
	name := strings.ToLower(path.Base(strings.ReplaceAll(p.Executable, `\`, "/")))
	switch {
	case name == "containerd.exe" && slices.Contains(p.Args, "--register-service"):
		return true, registerService(st, "containerd", "Containerd", "Container runtime", p.Executable, p.Args)
	case name == "dockerd.exe" && slices.Contains(p.Args, "--register-service"):
		return true, registerService(st, "docker", "Docker Engine", "", p.Executable, p.Args)
	case name == "ctr.exe" && len(p.Args) == 5 && p.Args[2] == "images" && p.Args[3] == "import":
		return m.importImage(st, v1alpha1.RuntimeContainerd, p.Args[4], "")
	case name == "ctr.exe" && len(p.Args) == 7 && p.Args[2] == "images" && p.Args[3] == "import" && p.Args[4] == "--platform":
		return m.importImage(st, v1alpha1.RuntimeContainerd, p.Args[6], p.Args[5])
	case name == "docker.exe" && len(p.Args) == 3 && p.Args[0] == "load":
		return m.importImage(st, v1alpha1.RuntimeDocker, p.Args[2], "")
	}
	return false, fmt.Errorf("the simulated machine has no program %s %q", p.Executable, p.Args)
}

// importImage loads an OCI archive as the runtime would. The image must be complete and for a
// Windows build the runtime unpacks. containerd's ctr unpacks for the platform of --platform
// ("windows(<os.version>)/amd64") or else the machine's own, and matches Windows builds as
// containerd/platforms does (checkWindowsHostAndContainerCompat in platform_windows_compat.go,
// after Microsoft's version compatibility page): below build 20348 the builds must be equal;
// from it on, an image of 20348 up to the platform's build matches. Docker Engine loads the
// archive as it is, and refuses at run what its host cannot run: as a process-isolated runtime,
// the simulated one refuses it here.
func (m *Machine) importImage(st *State, runtime v1alpha1.RuntimeName, archive, platform string) (bool, error) {
	if runtime != m.cfg.Runtime {
		return false, fmt.Errorf("the machine has %s, not %s", m.cfg.Runtime, runtime)
	}
	f, err := os.Open(simmachine.Path(m.cfg.Root, archive))
	if err != nil {
		return false, fmt.Errorf("image archive %s: %w", archive, err)
	}
	a, err := ociimage.Inspect(f)
	_ = f.Close()
	if err != nil {
		return false, fmt.Errorf("import image archive %s: %w", archive, err)
	}
	if runtime == v1alpha1.RuntimeDocker && len(a.Docker) == 0 {
		// Docker Engine's image store loads an archive through its manifest.json only; without
		// one it tries the pre-1.10 layout and fails (moby image/tarexport/load.go, Load).
		return false, fmt.Errorf("docker load --input %s: the archive has no %s, and without one Docker Engine reads the pre-1.10 layout "+
			"(a repositories file and a directory per layer), which an OCI layout is not", archive, ociimage.DockerManifestFile)
	}
	host := v1alpha1.WindowsBuild(m.cfg.Build)
	want := host
	if platform != "" {
		v, ok := strings.CutPrefix(platform, "windows(")
		v, ok2 := strings.CutSuffix(v, ")/amd64")
		b, err := v1alpha1.ImageBuild(v)
		if !ok || !ok2 || err != nil {
			return false, fmt.Errorf("ctr: --platform %q: not a Windows platform such as windows(10.0.20348.2849)/amd64", platform)
		}
		want = b
	}
	got, err := v1alpha1.ImageBuild(a.OSVersion)
	if a.OS != "windows" || err != nil || !unpacks(runtime, want, got) {
		return false, fmt.Errorf("import image archive %s: image %s is for %s %s, this machine runs Windows %s: the container operating system does "+
			"not match the host operating system",
			archive, a.Name, a.OS, a.OSVersion, host.OSVersion())
	}
	st.Images = append(st.Images, string(runtime)+":"+archive)
	return true, nil
}

// unpacks reports whether the runtime unpacks an image of Windows build image for the platform
// of build platform (importImage).
func unpacks(runtime v1alpha1.RuntimeName, platform, image v1alpha1.WindowsBuild) bool {
	if runtime != v1alpha1.RuntimeContainerd || platform < v1alpha1.WindowsServer2022 {
		return image == platform
	}
	return image >= v1alpha1.WindowsServer2022 && image <= platform
}
