// Package sim is the simulated Windows machine of the local backend: nodeboot's Windows
// platform (package platform/windows), with its decisions and requests unchanged, on a Windows
// machine simulated by package winfake, whose state is kept under the machine's root (sim/)
// between nodeboot processes. Files land under the root (C:\a\b is <root>/C/a/b); the machine's
// computer name, OS build, adapter address and runtime are what the backend says they are.
// Starting the kubelet service runs the simulated kubelet (package simkubelet) in nodeboot's
// process, from the command line the service was registered with and the files nodeboot wrote
// for kubelet.exe. nodeboot's phases (discovery, TLS bootstrap, registration, reports) run for
// real against the API server. Only nodeboot for the local backend's host contains this
// package; nodeboot.exe does not.
package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubewin/kubewin/internal/api"
	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/nodecmd"
	"github.com/kubewin/kubewin/internal/sim/simkubelet"
	"github.com/kubewin/kubewin/internal/sim/simmachine"
	"github.com/kubewin/kubewin/nodeboot/internal/platform"
	"github.com/kubewin/kubewin/nodeboot/internal/platform/windows"
	"github.com/kubewin/kubewin/nodeboot/internal/platform/windows/winfake"
)

// Machine describes the simulated machine.
type Machine = simmachine.Machine

// StateFile is where a simulated machine keeps its Windows state, under its root.
const StateFile = "sim/windows.json"

// Platform is a simulated machine.
type Platform struct {
	*windows.Platform
	m    Machine
	fake *winfake.Machine
	// Out receives the simulated kubelet's lines. Default: standard output.
	Out io.Writer

	mu sync.Mutex
	// programs are the service programs running in this process, by service name.
	programs map[string]*program
	// dns answers LookupHost (SetDNS).
	dns Resolver
}

// Resolver answers a DNS query for host sent to server.
type Resolver func(ctx context.Context, server netip.AddrPort, host string) ([]netip.Addr, error)

// SetDNS makes r the DNS the simulated machine reaches, which a test can break; nil: none.
func (p *Platform) SetDNS(r Resolver) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dns = r
}

// LookupHost asks the DNS SetDNS gave. Without one it returns platform.ErrPodNetworkSimulated:
// the pods' network is simulated, and no one runs the cluster DNS service on it.
func (p *Platform) LookupHost(ctx context.Context, server netip.AddrPort, host string) ([]netip.Addr, error) {
	p.mu.Lock()
	r := p.dns
	p.mu.Unlock()
	if r == nil {
		return nil, fmt.Errorf("lookup %s on %s: %w", host, server, platform.ErrPodNetworkSimulated)
	}
	return r(ctx, server, host)
}

// program is a service's program running in nodeboot's process.
type program struct {
	stop context.CancelFunc
	done chan struct{}
}

// New returns the platform of m.
func New(m Machine) (*Platform, error) {
	fake, err := winfake.New(winfake.Config{
		Root: m.Root, StateFile: filepath.Join(m.Root, filepath.FromSlash(StateFile)),
		ComputerName: m.ComputerName, SetupCompleteAt: m.SetupCompleteAt, Build: m.Build, Adapter: m.Adapter, Address: m.Address,
		Subnet: m.Subnet, Runtime: m.Runtime, WithoutDefender: m.WithoutDefender, PortsInUse: m.PortsInUse, Alive: alive,
	})
	if err != nil {
		return nil, err
	}
	p := &Platform{Platform: windows.New(fake.Backends()), m: m, fake: fake}
	// The simulated HNS removes the metadata routes when it creates a network, not later.
	p.MetadataRecheck = 0
	p.Metadata = m.MetadataEndpoint
	p.Dial = m.Dialer()
	fake.OnStart = p.started
	fake.OnStop = p.stopProgram
	return p, nil
}

// Load returns the platform of the machine described under root.
func Load(root string) (*Platform, error) {
	m, err := simmachine.Load(root)
	if err != nil {
		return nil, err
	}
	return New(m)
}

// Windows is the simulated Windows machine under the platform, with the requests it received.
func (p *Platform) Windows() *winfake.Machine { return p.fake }

// started runs a service's program when it is kubelet.exe (directly or under kube-log-runner);
// other services' programs are not run.
func (p *Platform) started(service string, argv []string) error {
	for i, a := range argv {
		if strings.EqualFold(path.Base(strings.ReplaceAll(a, `\`, "/")), "kubelet.exe") {
			return p.runKubelet(service, argv[i+1:])
		}
	}
	return nil
}

// runKubelet runs the simulated kubelet as the kubelet service's program, in this process,
// unless it already runs.
func (p *Platform) runKubelet(service string, args []string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.programs[service]; ok {
		return nil
	}
	out := p.Out
	if out == nil {
		out = os.Stdout
	}
	k, err := simkubelet.FromCommandLine(args, simkubelet.Machine{
		ReadFile: func(win string) ([]byte, error) { return os.ReadFile(p.Path(win)) },
		Labels:   nodecmd.KubeletLabels(v1alpha1.WindowsBuild(p.m.Build)),
		Info:     p.nodeInfo(),
		Out:      out,
		// The ARM test server's machines read their instance metadata there, as the cloud
		// provider's node manager does.
		MetadataEndpoint: p.m.MetadataEndpoint,
		Sandbox:          p.sandboxRuntime(),
		// The kubelet's connections cross the machine's network, as nodeboot's do.
		Dial: p.Dial,
	})
	if err != nil {
		_, _ = fmt.Fprintf(out, "[simulated-kubelet] cannot start: %v\n", err)
		return fmt.Errorf("start the simulated kubelet: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if p.programs == nil {
		p.programs = map[string]*program{}
	}
	prog := &program{stop: cancel, done: make(chan struct{})}
	p.programs[service] = prog
	// The service's program lives as long as this process: a nodeboot that is killed takes it
	// along, and the machine notices.
	if err := p.fake.Hosted(service, os.Getpid()); err != nil {
		return err
	}
	go func() {
		defer close(prog.done)
		if err := k.Run(ctx); err != nil {
			_, _ = fmt.Fprintf(out, "[simulated-kubelet] stopped: %v\n", err)
			p.mu.Lock()
			delete(p.programs, service)
			p.mu.Unlock()
			p.fake.Exited(service, err)
		}
	}()
	return nil
}

// stopProgram stops a service's program and waits until it has ended.
func (p *Platform) stopProgram(service string) {
	p.mu.Lock()
	prog, ok := p.programs[service]
	delete(p.programs, service)
	p.mu.Unlock()
	if ok {
		prog.stop()
		<-prog.done
	}
}

// Shutdown stops the programs of the machine's services and waits for them: on a simulated
// machine they run in nodeboot's process and end with it, so their services are stopped, and
// the next nodeboot starts them again.
func (p *Platform) Shutdown() {
	p.mu.Lock()
	names := make([]string, 0, len(p.programs))
	for name := range p.programs {
		names = append(names, name)
	}
	p.mu.Unlock()
	for _, name := range names {
		p.stopProgram(name)
		p.fake.Exited(name, errors.New("nodeboot stopped, and the programs of the simulated machine's services with it"))
	}
}

// nodeInfo is what the simulated node reports about itself: the machine's Windows release,
// marked simulated where `kubectl get nodes -o wide` shows it, and the versions of the image it
// was created from.
func (p *Platform) nodeInfo() corev1.NodeSystemInfo {
	build := v1alpha1.WindowsBuild(p.m.Build)
	info := corev1.NodeSystemInfo{
		OperatingSystem: "windows", Architecture: "amd64",
		OSImage:       "Windows Server " + build.Release() + " Datacenter (simulated)",
		KernelVersion: build.OSVersion(),
	}
	if m := p.imageManifest(); m != nil {
		// No KubeProxyVersion: kubelets stopped reporting it in 1.31 (KEP-4004,
		// https://github.com/kubernetes/enhancements/issues/4004); the field is deprecated.
		info.KubeletVersion = m.KubernetesVersion
		info.ContainerRuntimeVersion = string(m.Runtime.Name) + "://" + m.Runtime.Version
	}
	return info
}

// sandboxRuntime is the machine's container runtime as its image was baked: Docker Engine, or
// containerd, with the Hyper-V feature when the image has Hyper-V isolation (the bake installs
// the feature for it only).
func (p *Platform) sandboxRuntime() simkubelet.SandboxRuntime {
	m := p.imageManifest()
	switch {
	case m == nil:
		return simkubelet.WindowsContainerd(false)
	case m.Runtime.Name == v1alpha1.RuntimeDocker:
		return simkubelet.WindowsDocker()
	default:
		return simkubelet.WindowsContainerd(m.HyperV())
	}
}

// imageManifest is the image manifest the machine's bake installed, or nil.
func (p *Platform) imageManifest() *v1alpha1.ImageManifest {
	raw, err := os.ReadFile(p.Path(nodecmd.DefaultPaths().ImageManifest))
	if err != nil {
		return nil
	}
	m, err := api.LoadImageManifest(raw)
	if err != nil {
		return nil
	}
	return m
}

// alive reports whether a process runs (signal 0 probes without signalling).
func alive(pid int) bool {
	proc, err := os.FindProcess(pid)
	return err == nil && proc.Signal(syscall.Signal(0)) == nil
}

// Diagnostics is the Windows platform's, but for nodeboot's own log: a simulated machine's
// nodeboot writes to no event log, and its serial console is a file it can read back.
func (p *Platform) Diagnostics() platform.Diagnostics {
	return diagnostics{Diagnostics: p.Platform.Diagnostics(), serial: filepath.Join(p.m.Root, filepath.FromSlash(SerialLog))}
}

// SerialLog is the simulated machine's serial console, under its root: every line nodeboot
// writes to the console goes there too.
const SerialLog = "sim/serial.log"

type diagnostics struct {
	platform.Diagnostics
	serial string
}

func (d diagnostics) NodebootLog(_ context.Context, maxBytes int) ([]byte, error) {
	data, err := os.ReadFile(d.serial)
	if err != nil {
		return nil, fmt.Errorf("the serial console: %w", err)
	}
	return data[max(0, len(data)-maxBytes):], nil
}
