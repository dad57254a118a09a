// Package winfake is a Windows machine simulated in memory, behind the backends of nodeboot's
// Windows platform: the Host Network Service, the Service Control Manager, the IPv4 routing
// table and network adapters, the firewall, Defender exclusions, programs run through
// PowerShell, and files under a root directory. Every request is recorded in order, with the
// hcn JSON, service configuration or script it carried and whether it changed the machine, so
// that tests compare what nodeboot asks of Windows with what upstream projects do, and check
// the order of a join, a reboot and a reset. The local backend's simulated machines (package
// platform/sim) run on it, with their state kept in a file between nodeboot processes.
//
// What it simulates of Windows, and from where:
//   - creating the first network on an adapter builds a vSwitch: the adapter's address moves to
//     the management vNIC "vEthernet (<adapter>)" and the routes to the metadata endpoints are
//     lost (hcsshim issue 299); deleting the adapter's last network removes the vSwitch;
//   - HNS reports an overlay network's management address as a ProviderAddress policy and its
//     distributed router MAC as a DrMacAddress policy (flannel pkg/backend/vxlan); an L2Bridge
//     network's management address is the v1 network's ManagementIP only (flannel
//     pkg/backend/hostgw/hostgw_windows.go);
//   - a subnet needs a default route (hcn's "no default gateway"); a network with endpoints
//     cannot be deleted; names are unique;
//   - at reboot, non-persistent networks and every endpoint are gone (GCE
//     k8s-node-setup.psm1: "the HNS network does seem to persist across reboots, the HNS
//     endpoints do not"), so are active-store routes, and automatic services start;
//   - services start their dependencies first and cannot stop while dependents run; a service
//     that fails runs its recovery actions on a crash, and on a stop with an error only with
//     the failure actions flag ([MS-SCMR] 2.2.40, 2.2.41);
//   - a service is created with any command line, but starts only when its program is a file on
//     the machine (StartService: "The service binary file could not be found"); Windows' own
//     programs and the runtime the machine ships count as present;
//   - containerd.exe and dockerd.exe --register-service register themselves as their code does;
//   - until Windows setup is complete, ImageState is IMAGE_STATE_UNDEPLOYABLE ("Setup is currently
//     running and has not fully completed the phase", Windows Setup States in the Windows
//     deployment docs) and the computer has a temporary name, WIN- and random characters, which
//     the specialize pass replaces with the unattend ComputerName.
package winfake

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/nodeboot/internal/platform"
	"github.com/kubewin/kubewin/nodeboot/internal/platform/windows"
	"github.com/kubewin/kubewin/nodeboot/internal/platform/windows/hcnjson"
)

// Config describes the machine.
type Config struct {
	// Root holds the machine's files: C:\a\b is Root/C/a/b.
	Root string
	// StateFile, when set, keeps the machine's state between processes.
	StateFile string
	// ComputerName is the computer name Windows setup gives the machine; until SetupCompleteAt it
	// has the temporary name setup runs under.
	ComputerName string
	// SetupCompleteAt is when Windows setup finishes (ImageState IMAGE_STATE_COMPLETE); zero: the
	// machine is set up.
	SetupCompleteAt time.Time
	Build           uint32
	// Memory is the machine's physical memory in bytes (8 GiB when zero).
	Memory uint64
	// Adapter is the host adapter, with Address on Subnet; the subnet's first address is the
	// default gateway.
	Adapter string
	Address netip.Addr
	Subnet  netip.Prefix
	// Runtime is the container runtime the image ships; it answers on its pipe.
	Runtime v1alpha1.RuntimeName
	// WithoutDefender is an image without the Windows-Defender feature: Get-WindowsFeature says
	// it is not installed, and the Defender module's cmdlets (Add-MpPreference) do not exist.
	WithoutDefender bool
	// PortsInUse are ports another program of the machine listens on: a faulty machine.
	PortsInUse []int
	// Alive reports whether a process runs; with it, a service whose program's process (see
	// Hosted) has ended is stopped, as the SCM notices a service process that exits.
	Alive func(pid int) bool
	// HostVNICDelay is how long after HostAttach an endpoint's host vNIC appears (100 ms when
	// zero): HNS creates it asynchronously, so flannel finds it by its address, once the attach
	// has succeeded (pkg/backend/hostgw/hostgw_windows.go, ip.GetInterfaceByIP).
	HostVNICDelay time.Duration
	// Now is the machine's clock (time.Now when nil): a restart the SCM's recovery queued runs
	// once its delay has passed on it.
	Now func() time.Time
}

// Op is one recorded request.
type Op struct {
	// Backend is hns, scm, shell, files or boot.
	Backend string `json:"backend"`
	// Call is the backend method or the script's name.
	Call string `json:"call"`
	// Target is the network, endpoint, service or file the call is about.
	Target string `json:"target,omitempty"`
	// Body is the request: hcn JSON, a service configuration as JSON, a script or a file's
	// security descriptor.
	Body string `json:"body,omitempty"`
	// Changed says whether the call changed the machine.
	Changed bool `json:"changed"`
	// Err is the error the call returned.
	Err string `json:"err,omitempty"`
}

func (o Op) String() string {
	s := o.Backend + " " + o.Call
	if o.Target != "" {
		s += " " + o.Target
	}
	if o.Changed {
		s += " (changed)"
	}
	if o.Err != "" {
		s += " error: " + o.Err
	}
	return s
}

// Endpoint is an HNS endpoint and whether it is attached to the host; an attached endpoint's
// host vNIC appears at VNICAt.
type Endpoint struct {
	hcnjson.HostComputeEndpoint
	Attached bool      `json:"attached"`
	VNICAt   time.Time `json:"vnicAt,omitzero"`
}

// WindowsUpdateService is the Windows Update service, which every machine has.
const WindowsUpdateService = "wuauserv"

// Service is a registered service.
type Service struct {
	Config   windows.ServiceConfig `json:"config"`
	Recovery *windows.Recovery     `json:"recovery,omitempty"`
	// NonCrashFailuresActive is the failure actions flag the SCM acts on: the one Recovery held
	// when the system last started. A change of the flag "takes effect the next time the system
	// is started" (SERVICE_FAILURE_ACTIONS_FLAG, Remarks:
	// https://learn.microsoft.com/en-us/windows/win32/api/winsvc/ns-winsvc-service_failure_actions_flag).
	NonCrashFailuresActive bool                 `json:"nonCrashFailuresActive,omitempty"`
	State                  windows.ServiceState `json:"state"`
	// PID is the process the service's program runs in, when one was recorded (Hosted).
	PID int `json:"pid,omitempty"`
	// Failures counts the service's failures since the last reset of the count, the last of
	// them at LastFailure; RestartAt is when a restart its recovery queued is due.
	Failures    int       `json:"failures,omitempty"`
	LastFailure time.Time `json:"lastFailure,omitzero"`
	RestartAt   time.Time `json:"restartAt,omitzero"`
}

// Route is a route of the IPv4 routing table.
type Route struct {
	Destination    netip.Prefix `json:"destination"`
	NextHop        netip.Addr   `json:"nextHop"` // 0.0.0.0: on-link
	InterfaceIndex int          `json:"interfaceIndex"`
	Metric         int          `json:"metric"`
	Store          string       `json:"store"`
	// DHCP routes come from the adapter's lease: they follow its address.
	DHCP bool `json:"dhcp,omitempty"`
}

// Adapter is a network adapter.
type Adapter struct {
	Name       string         `json:"name"`
	Index      int            `json:"index"`
	Addrs      []netip.Prefix `json:"addrs,omitempty"`
	Forwarding bool           `json:"forwarding,omitempty"`
}

// State is everything the machine holds besides its files.
type State struct {
	Networks  []hcnjson.HostComputeNetwork `json:"networks,omitempty"`
	Endpoints []Endpoint                   `json:"endpoints,omitempty"`
	// LoadBalancers are HNS's load balancers (kube-proxy's services); HNS keeps them across
	// restarts (aks-engine parts/k8s/windowsnodereset.ps1 removes the "persisted HNS policy
	// lists" at every boot).
	LoadBalancers []hcnjson.HostComputeLoadBalancer `json:"loadBalancers,omitempty"`
	// Containers are the runtime's containers of Kubernetes pods (containerd's k8s.io namespace,
	// Docker's containers labelled by cri-dockerd), by ID. Their records outlive a restart;
	// their processes do not.
	Containers []string            `json:"containers,omitempty"`
	Services   map[string]*Service `json:"services,omitempty"`
	Routes     []Route             `json:"routes,omitempty"`
	Adapters   []Adapter           `json:"adapters"`
	Firewall   []FirewallRule      `json:"firewall,omitempty"`
	Exclusions []string            `json:"exclusions,omitempty"`
	Images     []string            `json:"images,omitempty"`
	// ACLs are the security descriptors files were created with, by Windows path, where the
	// host's file system cannot keep them with the file (Machine.ACL reads either).
	ACLs map[string]string `json:"acls,omitempty"`
	// Events are the machine's event log entries, oldest first: the Service Control Manager's
	// about service state changes, and those a test logs (LogEvent).
	Events []platform.Event `json:"events,omitempty"`
	NextID int              `json:"nextID"`
}

// FirewallRule is an inbound allow rule.
type FirewallRule struct {
	Name     string `json:"name"`
	Protocol string `json:"protocol"`
	Port     int    `json:"port"`
	LastPort int    `json:"lastPort,omitempty"`
}

// Machine is a simulated Windows machine.
type Machine struct {
	cfg Config
	// OnStart runs when a service starts, with its command line split into arguments; an
	// error fails the start. OnStop runs when it stops. The sim platform runs its simulated
	// kubelet there.
	OnStart func(service string, argv []string) error
	OnStop  func(service string)

	mu    sync.Mutex
	st    *State
	log   []Op
	hooks []func() // run after the lock is released
	// onDisk is the state file as this process last read or wrote it. Every writer replaces
	// the file by a rename, so while the file is the same one (known) its content is what
	// this process knows, and is neither read nor written again.
	onDisk struct {
		info  os.FileInfo
		bytes []byte
		st    *State
	}
}

// New returns the machine, from its state file when it has one and otherwise as its image
// leaves it: the adapter with its address and DHCP routes, and the runtime's service
// registered and running.
func New(cfg Config) (*Machine, error) {
	m := &Machine{cfg: cfg}
	if cfg.StateFile != "" {
		if _, err := os.Stat(cfg.StateFile); err == nil {
			return m, nil
		}
	}
	m.st = m.initial()
	if cfg.StateFile != "" {
		if err := m.save(); err != nil {
			return nil, err
		}
		m.st = nil
	}
	return m, nil
}

// Management and loopback interface indexes of a fresh machine.
const (
	loopbackIndex = 1
	adapterIndex  = 4
)

func (m *Machine) gateway() netip.Addr { return m.cfg.Subnet.Masked().Addr().Next() }

func (m *Machine) initial() *State {
	st := &State{
		Services: map[string]*Service{}, ACLs: map[string]string{}, NextID: 10,
		Adapters: []Adapter{
			{Name: "Loopback Pseudo-Interface 1", Index: loopbackIndex, Addrs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/8")}},
			{Name: m.cfg.Adapter, Index: adapterIndex, Addrs: []netip.Prefix{netip.PrefixFrom(m.cfg.Address, m.cfg.Subnet.Bits())}},
		},
	}
	st.Routes = m.dhcpRoutes(adapterIndex)
	// Windows Update (wuauserv) is a manual, trigger-started service on Windows Server
	// (https://learn.microsoft.com/en-us/windows-server/security/windows-services/security-guidelines-for-disabling-system-services-in-windows-server,
	// "Windows Update ... Manual"): it starts when an update scan is due, and is stopped here,
	// as after a restart.
	st.Services[WindowsUpdateService] = &Service{State: windows.Stopped, Config: windows.ServiceConfig{
		BinaryPathName: `C:\Windows\system32\svchost.exe -k netsvcs -p`, StartType: windows.StartManual, DisplayName: "Windows Update"}}
	switch m.cfg.Runtime {
	case v1alpha1.RuntimeContainerd:
		st.Services["containerd"] = &Service{State: windows.Running, Config: windows.ServiceConfig{
			BinaryPathName: `"C:\Program Files\containerd\bin\containerd.exe" --run-service`, StartType: windows.StartAutomatic, DisplayName: "Containerd",
			Description: "Container runtime"}}
	case v1alpha1.RuntimeDocker:
		st.Services["docker"] = &Service{State: windows.Running, Config: windows.ServiceConfig{
			BinaryPathName: `"C:\Program Files\docker\dockerd.exe" --run-service`, StartType: windows.StartAutomatic, DisplayName: "Docker Engine"}}
	}
	return st
}

// dhcpRoutes are the routes the adapter's DHCP lease gives: the default route and, as on
// Azure, the routes to the metadata endpoints, through the subnet's gateway.
func (m *Machine) dhcpRoutes(ifIndex int) []Route {
	gw := m.gateway()
	var rs []Route
	for _, d := range []string{"0.0.0.0/0", "169.254.169.254/32", "168.63.129.16/32"} {
		rs = append(rs, Route{Destination: netip.MustParsePrefix(d), NextHop: gw, InterfaceIndex: ifIndex, Metric: 0, Store: windows.ActiveStore,
			DHCP: true})
	}
	return rs
}

// Backends are the machine's backends for windows.New.
func (m *Machine) Backends() windows.Backends {
	return windows.Backends{HNS: hns{m}, SCM: scm{m}, Shell: shell{m}, Files: files{m}, System: system{m}}
}

// Log returns the requests recorded so far.
func (m *Machine) Log() []Op {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.log)
}

// Mark returns the position of the next request in the log.
func (m *Machine) Mark() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.log)
}

// State returns a copy of the machine's state.
func (m *Machine) State() (State, error) {
	var st State
	err := m.do(Op{Backend: "state", Call: "read"}, false, func(s *State) (bool, error) {
		b, err := json.Marshal(s)
		if err != nil {
			return false, err
		}
		return false, json.Unmarshal(b, &st)
	})
	return st, err
}

func (m *Machine) load() error {
	if m.cfg.StateFile == "" {
		return nil
	}
	// The state is read again only when another process wrote it since: one stat per call.
	if info, err := os.Stat(m.cfg.StateFile); err == nil && m.known(info) {
		m.st = m.onDisk.st
		return nil
	}
	f, err := os.Open(m.cfg.StateFile)
	if err != nil {
		return fmt.Errorf("the simulated machine's state: %w", err)
	}
	defer func() { _ = f.Close() }()
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("the simulated machine's state: %w", err)
	}
	if m.known(info) {
		m.st = m.onDisk.st
		return nil
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Errorf("the simulated machine's state: %w", err)
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("the simulated machine's state %s: %w", m.cfg.StateFile, err)
	}
	if st.Services == nil {
		st.Services = map[string]*Service{}
	}
	if st.ACLs == nil {
		st.ACLs = map[string]string{}
	}
	m.st = &st
	m.onDisk.info, m.onDisk.bytes, m.onDisk.st = info, b, m.st
	return nil
}

// known reports whether the state file is the one this process last read or wrote: the same
// file (an inode may be reused once a rename frees it, hence its time and size too).
func (m *Machine) known(info os.FileInfo) bool {
	return m.onDisk.st != nil && os.SameFile(info, m.onDisk.info) && info.ModTime().Equal(m.onDisk.info.ModTime()) && info.Size() == m.onDisk.info.Size()
}

func (m *Machine) save() error {
	b, err := json.MarshalIndent(m.st, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if m.onDisk.st != nil && bytes.Equal(b, m.onDisk.bytes) {
		if info, err := os.Stat(m.cfg.StateFile); err == nil && m.known(info) {
			m.onDisk.st = m.st
			return nil
		}
	}
	tmp := m.cfg.StateFile + ".tmp"
	err = os.WriteFile(tmp, b, 0o600)
	if os.IsNotExist(err) {
		if err := os.MkdirAll(filepath.Dir(m.cfg.StateFile), 0o700); err != nil {
			return err
		}
		err = os.WriteFile(tmp, b, 0o600)
	}
	if err != nil {
		return err
	}
	info, err := os.Stat(tmp) // the file keeps its identity through the rename
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, m.cfg.StateFile); err != nil {
		return err
	}
	m.onDisk.info, m.onDisk.bytes, m.onDisk.st = info, b, m.st
	return nil
}

// reap stops the services whose program's process has ended, and records it.
func (m *Machine) reap() bool {
	if m.cfg.Alive == nil {
		return false
	}
	reaped := false
	for _, name := range sortedKeys(m.st.Services) {
		svc := m.st.Services[name]
		if svc.State == windows.Running && svc.PID != 0 && !m.cfg.Alive(svc.PID) {
			m.log = append(m.log, Op{Backend: "scm", Call: "exited", Target: name, Body: fmt.Sprintf("process %d ended", svc.PID), Changed: true})
			svc.State, svc.PID = windows.Stopped, 0
			reaped = true
		}
	}
	return reaped
}

// Hosted records the process a running service's program runs in.
func (m *Machine) Hosted(name string, pid int) error {
	return m.do(Op{}, false, func(st *State) (bool, error) {
		if svc, ok := st.Services[name]; ok && svc.State == windows.Running {
			svc.PID = pid
			return true, nil
		}
		return false, nil
	})
}

// do runs one request on the state under the lock, records it (when record is set) and runs
// the hooks it queued once the lock is released. f reports whether it changed the machine, which
// for do's requests is a change of the state.
func (m *Machine) do(op Op, record bool, f func(*State) (bool, error)) error {
	return m.change(op, record, func(st *State) (bool, bool, error) {
		changed, err := f(st)
		return changed, changed, err
	})
}

// change is do for a request that may change the machine without changing the state (a file's
// content): f reports both, and the state file is written only when the state changed.
func (m *Machine) change(op Op, record bool, f func(*State) (machine, state bool, err error)) error {
	m.mu.Lock()
	if m.cfg.StateFile != "" {
		if err := m.load(); err != nil {
			m.mu.Unlock()
			return err
		}
	}
	reaped := m.reap()
	recovered := m.recover(m.st)
	attached := m.hostVNICs(m.st)
	changed, stateChanged, err := f(m.st)
	if err == nil && (stateChanged || reaped || recovered || attached) && m.cfg.StateFile != "" {
		err = m.save()
	}
	if m.cfg.StateFile != "" {
		if err != nil {
			m.onDisk.st = nil // what the failed call changed is read again from the file
		}
		m.st = nil
	}
	op.Changed = changed
	if err != nil {
		op.Err = err.Error()
	}
	if record {
		m.log = append(m.log, op)
	}
	hooks := m.hooks
	m.hooks = nil
	m.mu.Unlock()
	for _, h := range hooks {
		h()
	}
	return err
}

func (m *Machine) nextID(st *State) string {
	st.NextID++
	return fmt.Sprintf("%08x-0000-4000-8000-%012x", st.NextID, st.NextID)
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// --- adapters and routes ---

func adapterByName(st *State, name string) *Adapter {
	for i := range st.Adapters {
		if st.Adapters[i].Name == name {
			return &st.Adapters[i]
		}
	}
	return nil
}

func adapterByIndex(st *State, index int) *Adapter {
	for i := range st.Adapters {
		if st.Adapters[i].Index == index {
			return &st.Adapters[i]
		}
	}
	return nil
}

func addAdapter(st *State, name string, addrs []netip.Prefix) *Adapter {
	index := adapterIndex
	for _, a := range st.Adapters {
		index = max(index, a.Index)
	}
	st.Adapters = append(st.Adapters, Adapter{Name: name, Index: index + 1, Addrs: addrs})
	return &st.Adapters[len(st.Adapters)-1]
}

func removeAdapter(st *State, name string) {
	a := adapterByName(st, name)
	if a == nil {
		return
	}
	index := a.Index
	st.Adapters = slices.DeleteFunc(st.Adapters, func(x Adapter) bool { return x.Name == name })
	st.Routes = slices.DeleteFunc(st.Routes, func(r Route) bool { return r.InterfaceIndex == index })
}

// vSwitchUp binds a vSwitch to the adapter: its address and default route move to the
// management vNIC; the metadata routes are lost (hcsshim issue 299).
func (m *Machine) vSwitchUp(st *State, adapter string) error {
	mgmt := "vEthernet (" + adapter + ")"
	if adapterByName(st, mgmt) != nil {
		return nil
	}
	phys := adapterByName(st, adapter)
	if phys == nil {
		//nolint:staticcheck,revive // ST1005: Windows' own message, verbatim
		return fmt.Errorf("An adapter was not found: %q", adapter)
	}
	addrs := phys.Addrs
	physIndex := phys.Index
	phys.Addrs = nil
	v := addAdapter(st, mgmt, addrs)
	st.Routes = slices.DeleteFunc(st.Routes, func(r Route) bool { return r.DHCP && r.InterfaceIndex == physIndex })
	st.Routes = append(st.Routes, Route{Destination: netip.MustParsePrefix("0.0.0.0/0"), NextHop: m.gateway(), InterfaceIndex: v.Index,
		Store: windows.ActiveStore, DHCP: true})
	return nil
}

// vSwitchDown removes the adapter's vSwitch: the management vNIC goes, the adapter gets its
// address and its lease's routes back.
func (m *Machine) vSwitchDown(st *State, adapter string) {
	mgmt := "vEthernet (" + adapter + ")"
	v := adapterByName(st, mgmt)
	phys := adapterByName(st, adapter)
	if v == nil || phys == nil {
		return
	}
	phys.Addrs = v.Addrs
	removeAdapter(st, mgmt)
	phys = adapterByName(st, adapter)
	st.Routes = append(st.Routes, m.dhcpRoutes(phys.Index)...)
}

func networkAdapter(n *hcnjson.HostComputeNetwork, fallback string) string {
	for _, p := range n.Policies {
		var s hcnjson.NetAdapterNameNetworkPolicySetting
		if p.Type == hcnjson.NetAdapterName && json.Unmarshal(p.Settings, &s) == nil && s.NetworkAdapterName != "" {
			return s.NetworkAdapterName
		}
	}
	return fallback
}

// --- boot ---

// Reboot restarts the machine: what does not survive a reboot is gone and the automatic
// services start, dependencies first.
func (m *Machine) Reboot() error {
	var started []string
	err := m.do(Op{Backend: "boot", Call: "reboot"}, true, func(st *State) (bool, error) {
		for name, svc := range st.Services {
			svc.NonCrashFailuresActive = svc.Recovery != nil && svc.Recovery.OnNonCrashFailures
			if svc.State != windows.Stopped {
				svc.State = windows.Stopped
				if m.OnStop != nil {
					m.hooks = append(m.hooks, func() { m.OnStop(name) })
				}
			}
		}
		// Non-persistent networks do not survive, nor do their endpoints. The endpoints of a
		// persistent network do, detached from the host, with those of pods that are gone: HNS
		// state survives reboots, sometimes stale (microsoft/SDN issue 177; flannel
		// pkg/backend/hostgw/hostgw_windows.go finds its bridge endpoint by name after a restart
		// and reuses it; aks-engine parts/k8s/windowsnodereset.ps1 cleans up at every boot).
		for _, ep := range st.Endpoints {
			removeAdapter(st, "vEthernet ("+ep.Name+")")
		}
		st.Networks = slices.DeleteFunc(st.Networks, func(n hcnjson.HostComputeNetwork) bool {
			return n.Flags&hcnjson.EnableNonPersistent != 0
		})
		st.Endpoints = slices.DeleteFunc(st.Endpoints, func(ep Endpoint) bool {
			return findNetwork(st, func(n *hcnjson.HostComputeNetwork) bool { return n.Id == ep.HostComputeNetwork }) == nil
		})
		for i := range st.Endpoints {
			st.Endpoints[i].Attached, st.Endpoints[i].VNICAt = false, time.Time{}
		}
		for _, a := range slices.Clone(st.Adapters) {
			if strings.HasPrefix(a.Name, "vEthernet (") && !m.adapterInUse(st, strings.TrimSuffix(strings.TrimPrefix(a.Name, "vEthernet ("), ")")) {
				m.vSwitchDown(st, strings.TrimSuffix(strings.TrimPrefix(a.Name, "vEthernet ("), ")"))
			}
		}
		// The active store is rebuilt from the persistent one and the leases.
		var routes []Route
		for _, r := range st.Routes {
			switch {
			case r.Store == windows.PersistentStore:
				routes = append(routes, r)
				if adapterByIndex(st, r.InterfaceIndex) != nil {
					active := r
					active.Store = windows.ActiveStore
					routes = append(routes, active)
				}
			case r.DHCP:
				routes = append(routes, r)
			}
		}
		st.Routes = routes
		for _, name := range sortedKeys(st.Services) {
			if st.Services[name].Config.StartType == windows.StartAutomatic {
				if err := m.startLocked(st, name, &started); err != nil {
					return true, fmt.Errorf("start %s at boot: %w", name, err)
				}
			}
		}
		return true, nil
	})
	return err
}

func (m *Machine) adapterInUse(st *State, adapter string) bool {
	for i := range st.Networks {
		if networkAdapter(&st.Networks[i], m.cfg.Adapter) == adapter {
			return true
		}
	}
	return false
}

func sortedKeys[V any](mp map[string]V) []string {
	keys := make([]string, 0, len(mp))
	for k := range mp {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// digest is a short deterministic hash of s.
func digest(s string) [32]byte { return sha256.Sum256([]byte(s)) }

// errNotFound wraps windows.ErrNotFound with what was missing.
func errNotFound(what string) error { return fmt.Errorf("%s: %w", what, windows.ErrNotFound) }

// Network returns the network of that name, or nil.
func (st State) Network(name string) *hcnjson.HostComputeNetwork {
	for i := range st.Networks {
		if st.Networks[i].Name == name {
			return &st.Networks[i]
		}
	}
	return nil
}

// Service returns the service of that name, or nil.
func (st State) Service(name string) *Service { return st.Services[name] }

// KubewinRoutes are the routes with kubewin's metric.
func (st State) KubewinRoutes() []Route {
	var out []Route
	for _, r := range st.Routes {
		if r.Metric == windows.RouteMetric {
			out = append(out, r)
		}
	}
	return out
}

// Edit changes the machine's state directly, unrecorded: for a test to set the machine up as
// an older nodeboot, an administrator or HNS itself left it.
func (m *Machine) Edit(f func(*State)) error {
	return m.do(Op{}, false, func(st *State) (bool, error) {
		f(st)
		return true, nil
	})
}

// --- drift ---

// LoseNetwork removes a network with its endpoints, and the vSwitch when it was the adapter's
// last network, with the routes that went through their interfaces: HNS networks and endpoints
// are lost after a reboot, an HNS service restart or a Windows update
// (Azure/azure-container-networking issues 283 and 287, projectcalico/calico issue 5164).
func (m *Machine) LoseNetwork(name string) error {
	return m.do(Op{Backend: "drift", Call: "lose-network", Target: name}, true, func(st *State) (bool, error) {
		n := findNetwork(st, func(n *hcnjson.HostComputeNetwork) bool { return n.Name == name })
		if n == nil {
			return false, errNotFound("network " + name)
		}
		id, adapter := n.Id, networkAdapter(n, m.cfg.Adapter)
		for _, ep := range st.Endpoints {
			if ep.HostComputeNetwork == id {
				removeAdapter(st, "vEthernet ("+ep.Name+")")
			}
		}
		st.Endpoints = slices.DeleteFunc(st.Endpoints, func(ep Endpoint) bool { return ep.HostComputeNetwork == id })
		st.Networks = slices.DeleteFunc(st.Networks, func(x hcnjson.HostComputeNetwork) bool { return x.Id == id })
		if !m.adapterInUse(st, adapter) {
			m.vSwitchDown(st, adapter)
		}
		return true, nil
	})
}

// LoseEndpoint removes an endpoint and its host vNIC (with the routes through it), as HNS
// loses endpoints across restarts (GCE k8s-node-setup.psm1: "the HNS endpoints do not"
// persist; Azure/azure-container-networking issue 283).
func (m *Machine) LoseEndpoint(name string) error {
	return m.do(Op{Backend: "drift", Call: "lose-endpoint", Target: name}, true, func(st *State) (bool, error) {
		i := slices.IndexFunc(st.Endpoints, func(ep Endpoint) bool { return ep.Name == name })
		if i < 0 {
			return false, errNotFound("endpoint " + name)
		}
		removeAdapter(st, "vEthernet ("+name+")")
		st.Endpoints = slices.Delete(st.Endpoints, i, i+1)
		return true, nil
	})
}

// LoseRoute removes the active-store routes to dst, as `route delete` or a restart does:
// nodeboot writes its routes to the active store only, which a restart rebuilds from the
// persistent store (MicrosoftDocs windows-powershell-docs New-NetRoute, -PolicyStore).
func (m *Machine) LoseRoute(dst netip.Prefix) error {
	return m.do(Op{Backend: "drift", Call: "lose-route", Target: dst.String()}, true, func(st *State) (bool, error) {
		n := len(st.Routes)
		st.Routes = slices.DeleteFunc(st.Routes, func(r Route) bool { return r.Destination == dst && r.Store == windows.ActiveStore })
		if len(st.Routes) == n {
			return false, fmt.Errorf("no active route to %s", dst)
		}
		return true, nil
	})
}
