package winfake

import (
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/nodeboot/internal/platform"
	"github.com/kubewin/kubewin/nodeboot/internal/platform/windows"
)

// system answers from the machine's description and state; its queries are not recorded.
type system struct{ m *Machine }

var _ windows.System = system{}

func (s system) ComputerName() (string, error) {
	if s.m.cfg.ComputerName == "" {
		return "", fmt.Errorf("the simulated machine at %s has no computer name", s.m.cfg.Root)
	}
	if !s.setUp() {
		d := digest(s.m.cfg.ComputerName)
		return "WIN-" + strings.ToUpper(hex.EncodeToString(d[:])[:11]), nil
	}
	return s.m.cfg.ComputerName, nil
}

// ImageState is IMAGE_STATE_UNDEPLOYABLE while setup runs, then IMAGE_STATE_COMPLETE
// (https://learn.microsoft.com/en-us/windows-hardware/manufacture/desktop/windows-setup-states).
func (s system) ImageState() (string, error) {
	if !s.setUp() {
		return "IMAGE_STATE_UNDEPLOYABLE", nil
	}
	return platform.ImageStateComplete, nil
}

func (s system) setUp() bool {
	return s.m.cfg.SetupCompleteAt.IsZero() || !s.m.now().Before(s.m.cfg.SetupCompleteAt)
}

func (s system) OSBuild() (uint32, error) { return s.m.cfg.Build, nil }

// Memory is Config.Memory, 8 GiB (a Standard_D2s_v3) when zero.
func (s system) Memory() (uint64, error) {
	if s.m.cfg.Memory == 0 {
		return 8 << 30, nil
	}
	return s.m.cfg.Memory, nil
}

func (s system) Interfaces() ([]windows.Interface, error) {
	var out []windows.Interface
	err := s.m.do(Op{}, false, func(st *State) (bool, error) {
		for _, a := range st.Adapters {
			out = append(out, windows.Interface{Name: a.Name, Index: a.Index, Addrs: clone(a.Addrs)})
		}
		return false, nil
	})
	return out, err
}

// IPv4Routes are the machine's active-store routes: the forwarding table holds those only, a
// persistent-store route enters it at restart (MicrosoftDocs windows-powershell-docs New-NetRoute,
// -PolicyStore).
func (s system) IPv4Routes() ([]windows.ActiveRoute, error) {
	var out []windows.ActiveRoute
	err := s.m.do(Op{}, false, func(st *State) (bool, error) {
		for _, r := range st.Routes {
			if r.Store == windows.ActiveStore {
				out = append(out, windows.ActiveRoute{Destination: r.Destination, NextHop: r.NextHop, InterfaceIndex: r.InterfaceIndex})
			}
		}
		return false, nil
	})
	return out, err
}

// PipeExists: the image's runtime answers on its pipe.
func (s system) PipeExists(name string) bool {
	switch s.m.cfg.Runtime {
	case v1alpha1.RuntimeContainerd:
		return name == "containerd-containerd"
	case v1alpha1.RuntimeDocker:
		return name == "docker_engine"
	}
	return false
}

// PortFree: simulated machines share their host and serve no kubelet port, unless the machine
// was given a program that listens on it (Config.PortsInUse). Windows then refuses the listen with
// WSAEADDRINUSE, whose message Go's net.Listen returns (Windows Sockets error codes, 10048).
func (s system) PortFree(port int) error {
	if slices.Contains(s.m.cfg.PortsInUse, port) {
		return fmt.Errorf("listen tcp :%d: bind: Only one usage of each socket address (protocol/network address/port) is normally permitted",
			port)
	}
	return nil
}
