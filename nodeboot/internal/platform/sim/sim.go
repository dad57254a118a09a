// Package sim is the simulated Windows machine of the local backend. Files land under a root
// directory (C:\a\b is <root>/C/a/b); the HNS network, services and routes are recorded as JSON
// under <root>/sim instead of applied; the machine's computer name, OS build, adapter address
// and runtime are what the backend says they are. Starting the kubelet service runs the
// simulated kubelet (package simkubelet) in nodeboot's process, from the command line and files
// nodeboot wrote for kubelet.exe. nodeboot's phases (discovery, TLS bootstrap, registration,
// reports) run for real against the API server. Only nodeboot for the local backend's host
// contains this package; nodeboot.exe does not.
package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubewin/kubewin/internal/api"
	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/nodecmd"
	"github.com/kubewin/kubewin/internal/ociimage"
	"github.com/kubewin/kubewin/internal/simmachine"
	"github.com/kubewin/kubewin/nodeboot/internal/platform"
	"github.com/kubewin/kubewin/nodeboot/internal/simkubelet"
)

// Machine describes the simulated machine.
type Machine = simmachine.Machine

// Platform is a simulated machine.
type Platform struct {
	m Machine
	// Out receives the simulated kubelet's lines. Default: standard output.
	Out io.Writer

	mu sync.Mutex
	// programs are the service programs running in this process, by service name.
	programs map[string]*program
}

// program is a service's program running in nodeboot's process.
type program struct {
	stop context.CancelFunc
	done chan struct{}
}

var _ platform.Platform = (*Platform)(nil)

// New returns the platform of m.
func New(m Machine) *Platform { return &Platform{m: m} }

func (p *Platform) ComputerName() (string, error) {
	if p.m.ComputerName == "" {
		return "", fmt.Errorf("the simulated machine at %s has no computer name", p.m.Root)
	}
	return p.m.ComputerName, nil
}

func (p *Platform) Path(win string) string { return simmachine.Path(p.m.Root, win) }

func (p *Platform) write(win string, data []byte, perm os.FileMode) error {
	path := p.Path(win)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, perm); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func (p *Platform) WriteFile(win string, data []byte) error { return p.write(win, data, 0o644) }

func (p *Platform) WriteSecret(win string, data []byte) error { return p.write(win, data, 0o600) }

func (p *Platform) OSBuild() (uint32, error) { return p.m.Build, nil }

func (p *Platform) CheckRuntime(_ context.Context, name v1alpha1.RuntimeName, _ string) error {
	if name != p.m.Runtime {
		return fmt.Errorf("the machine has %s, not %s", p.m.Runtime, name)
	}
	return nil
}

// CheckPorts checks nothing: simulated nodes share the host and serve no kubelet port.
func (p *Platform) CheckPorts() error { return nil }

func (p *Platform) Address(adapter string) (netip.Addr, netip.Prefix, error) {
	if adapter != p.m.Adapter {
		return netip.Addr{}, netip.Prefix{}, fmt.Errorf("no adapter named %q (the machine has %q)", adapter, p.m.Adapter)
	}
	return p.m.Address, p.m.Subnet, nil
}

func (p *Platform) Network() platform.Network   { return network{p} }
func (p *Platform) Services() platform.Services { return services{p} }
func (p *Platform) Routes() platform.Routes     { return routes{p} }

func (p *Platform) record(parts ...string) string {
	return filepath.Join(append([]string{p.m.Root, "sim"}, parts...)...)
}

func writeJSON(path string, v any) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o600)
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

type network struct{ p *Platform }

func (n network) Ensure(_ context.Context, spec platform.NetworkSpec) error {
	return writeJSON(n.p.record("hns", spec.Name+".json"), spec)
}

func (n network) Delete(_ context.Context, name string) error {
	return ignoreMissing(os.Remove(n.p.record("hns", name+".json")))
}

// NetworkSpec returns the recorded network, for tests and `nodeboot status`.
func (p *Platform) NetworkSpec(name string) (platform.NetworkSpec, error) {
	var s platform.NetworkSpec
	return s, readJSON(p.record("hns", name+".json"), &s)
}

// ServiceRecord is a recorded service.
type ServiceRecord struct {
	Spec    platform.ServiceSpec `json:"spec"`
	Running bool                 `json:"running"`
}

type services struct{ p *Platform }

func (s services) path(name string) string { return s.p.record("services", name+".json") }

func (s services) Ensure(_ context.Context, spec platform.ServiceSpec) error {
	var r ServiceRecord
	_ = readJSON(s.path(spec.Name), &r)
	r.Spec = spec
	return writeJSON(s.path(spec.Name), r)
}

func (s services) set(name string, running bool) error {
	var r ServiceRecord
	if err := readJSON(s.path(name), &r); err != nil {
		return fmt.Errorf("service %s is not installed: %w", name, err)
	}
	for _, dep := range r.Spec.Dependencies {
		if d, err := s.p.Service(dep); running && (err != nil || !d.Running) && !slices.Contains(runtimeServices, dep) {
			return fmt.Errorf("service %s depends on %s, which is not running", name, dep)
		}
	}
	r.Running = running
	return writeJSON(s.path(name), r)
}

// runtimeServices stand for the container runtime the machine has: always running.
var runtimeServices = []string{"containerd", "docker"}

func (s services) Start(_ context.Context, name string) error {
	if err := s.set(name, true); err != nil {
		return err
	}
	r, err := s.p.Service(name)
	if err != nil {
		return err
	}
	if !strings.EqualFold(path.Base(strings.ReplaceAll(r.Spec.Executable, `\`, "/")), "kubelet.exe") {
		return nil // other services' programs are recorded, not run
	}
	return s.p.runKubelet(name, r.Spec.Args)
}

func (s services) Stop(_ context.Context, name string) error {
	s.p.stopProgram(name)
	err := s.set(name, false)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

func (s services) Delete(_ context.Context, name string) error {
	s.p.stopProgram(name)
	return ignoreMissing(os.Remove(s.path(name)))
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
		Labels:   p.kubeletLabels(),
		Info:     p.nodeInfo(),
		Out:      out,
	})
	if err != nil {
		return fmt.Errorf("start the simulated kubelet: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if p.programs == nil {
		p.programs = map[string]*program{}
	}
	prog := &program{stop: cancel, done: make(chan struct{})}
	p.programs[service] = prog
	go func() {
		defer close(prog.done)
		if err := k.Run(ctx); err != nil {
			fmt.Fprintf(out, "[simulated-kubelet] stopped: %v\n", err)
			p.mu.Lock()
			delete(p.programs, service)
			p.mu.Unlock()
			_ = services{p}.set(service, false)
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

// Shutdown stops the programs of the machine's services and waits for them, as shutting the
// machine down would: on a simulated machine they run in nodeboot's process and end with it.
func (p *Platform) Shutdown() {
	p.mu.Lock()
	names := make([]string, 0, len(p.programs))
	for name := range p.programs {
		names = append(names, name)
	}
	p.mu.Unlock()
	for _, name := range names {
		p.stopProgram(name)
	}
}

// kubeletLabels are the labels a Windows kubelet sets on its own Node.
func (p *Platform) kubeletLabels() map[string]string {
	return map[string]string{
		corev1.LabelOSStable:     "windows",
		corev1.LabelArchStable:   "amd64",
		corev1.LabelWindowsBuild: v1alpha1.WindowsBuild(p.m.Build).OSVersion(),
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
	if raw, err := os.ReadFile(p.Path(nodecmd.DefaultPaths().ImageManifest)); err == nil {
		if m, err := api.LoadImageManifest(raw); err == nil {
			info.KubeletVersion = m.KubernetesVersion
			info.KubeProxyVersion = m.KubernetesVersion
			info.ContainerRuntimeVersion = string(m.Runtime.Name) + "://" + m.Runtime.Version
		}
	}
	return info
}

// Service returns a recorded service.
func (p *Platform) Service(name string) (ServiceRecord, error) {
	var r ServiceRecord
	return r, readJSON(services{p}.path(name), &r)
}

type routes struct{ p *Platform }

func (r routes) Replace(_ context.Context, rs []platform.Route) error {
	return writeJSON(r.p.record("routes.json"), rs)
}

// RoutesRecorded returns the recorded routes.
func (p *Platform) RoutesRecorded() ([]platform.Route, error) {
	var rs []platform.Route
	err := readJSON(p.record("routes.json"), &rs)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return rs, err
}

func ignoreMissing(err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// Load returns the platform of the machine described under root.
func Load(root string) (*Platform, error) {
	m, err := simmachine.Load(root)
	if err != nil {
		return nil, err
	}
	return New(m), nil
}

var _ platform.Host = (*Platform)(nil)

// AllowInbound records the rule.
func (p *Platform) AllowInbound(_ context.Context, r platform.FirewallRule) error {
	var rules []platform.FirewallRule
	_ = readJSON(p.record("firewall.json"), &rules)
	if !slices.Contains(rules, r) {
		rules = append(rules, r)
	}
	return writeJSON(p.record("firewall.json"), rules)
}

// ExcludeFromScanning records the paths.
func (p *Platform) ExcludeFromScanning(_ context.Context, paths []string) error {
	return writeJSON(p.record("defender-exclusions.json"), paths)
}

// FirewallRules returns the recorded rules.
func (p *Platform) FirewallRules() ([]platform.FirewallRule, error) {
	var rules []platform.FirewallRule
	return rules, readJSON(p.record("firewall.json"), &rules)
}

// ImportImage records the import.
func (p *Platform) ImportImage(_ context.Context, runtime v1alpha1.RuntimeName, archive string) error {
	// Like a real runtime on process isolation, the image must be complete and built for the
	// machine's Windows build.
	f, err := os.Open(p.Path(archive))
	if err != nil {
		return fmt.Errorf("image archive %s: %w", archive, err)
	}
	a, err := ociimage.Inspect(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("import image archive %s: %w", archive, err)
	}
	if want := v1alpha1.WindowsBuild(p.m.Build).OSVersion(); a.OS != "windows" || (a.OSVersion != want && !strings.HasPrefix(a.OSVersion, want+".")) {
		return fmt.Errorf("import image archive %s: image %s is for %s %s, this machine runs Windows %s: the container operating system does not match the host operating system",
			archive, a.Name, a.OS, a.OSVersion, want)
	}
	var imported []string
	_ = readJSON(p.record("images.json"), &imported)
	return writeJSON(p.record("images.json"), append(imported, string(runtime)+":"+archive))
}

// ImportedImages returns the recorded imports.
func (p *Platform) ImportedImages() ([]string, error) {
	var imported []string
	return imported, readJSON(p.record("images.json"), &imported)
}

// RestartRuntime checks that the machine has the runtime; a simulated runtime reads nothing.
func (p *Platform) RestartRuntime(ctx context.Context, runtime v1alpha1.RuntimeName) error {
	return p.CheckRuntime(ctx, runtime, "")
}
