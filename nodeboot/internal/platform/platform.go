// Package platform is what nodeboot needs from the machine it runs on, behind small interfaces:
// files, the computer name, the OS build, the container runtime, the HNS network, services and
// routes. The windows implementation (package platform/windows) decides how to apply them and
// sends the requests to Windows through thin backends; the sim implementation (package
// platform/sim) is the same Windows platform on a simulated Windows machine for the local
// backend, where a simulated kubelet stands in for kubelet.exe. The join code is the same on
// both. The specs here are pure and tested on any OS.
package platform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
)

// Platform is the machine.
type Platform interface {
	// ComputerName is the machine's computer name; a NodeConfig without node.name names the node
	// after it (a scale set's instances share one NodeConfig).
	ComputerName() (string, error)
	// ImageState is Windows setup's state (ImageStateComplete once setup has finished).
	ImageState() (string, error)
	// MetadataEndpoint is the base URL of the cloud's instance metadata service (Azure IMDS),
	// empty when the machine has none.
	MetadataEndpoint() string
	// Dialer opens the machine's TCP connections to the cluster; nil: the operating system's,
	// as client-go makes them.
	Dialer() DialFunc
	// Path maps a Windows path on the node to a path nodeboot can open.
	Path(win string) string
	// WriteFile writes a file, creating its directory.
	WriteFile(win string, data []byte) error
	// WriteSecret writes a file only its owner (SYSTEM, Administrators on Windows) can read.
	WriteSecret(win string, data []byte) error
	// RemoveFile removes a file; a missing file is not an error.
	RemoveFile(win string) error
	// RemoveAll removes a directory and everything in it; a missing directory is not an error.
	RemoveAll(win string) error
	// RemovePods stops and removes the runtime's containers of Kubernetes pods.
	RemovePods(ctx context.Context, runtime v1alpha1.RuntimeName) error
	// Symlink makes win a symbolic link to target, a file name in win's directory, replacing
	// the file or link win was.
	Symlink(win, target string) error
	// OSBuild is the Windows build number of the machine.
	OSBuild() (uint32, error)
	// Memory is the machine's physical memory in bytes, which the kubelet's memory
	// reservations are sized from.
	Memory() (uint64, error)
	// CheckRuntime returns an error unless the runtime answers on its endpoint.
	CheckRuntime(ctx context.Context, name v1alpha1.RuntimeName, endpoint string) error
	// CheckPorts returns an error when a port the node needs is taken.
	CheckPorts() error
	// Address returns the address and subnet of the named host adapter.
	Address(adapter string) (netip.Addr, netip.Prefix, error)
	// LookupHost resolves host by asking only the DNS server at server, as a pod whose
	// resolv.conf names the cluster DNS service does. A machine whose pod network is simulated
	// returns ErrPodNetworkSimulated.
	LookupHost(ctx context.Context, server netip.AddrPort, host string) ([]netip.Addr, error)

	Network() Network
	Services() Services
	Routes() Routes
	Diagnostics() Diagnostics
}

// DialFunc opens a connection to address ("host:port") on network ("tcp"), as rest.Config.Dial
// does.
type DialFunc = func(ctx context.Context, network, address string) (net.Conn, error)

// ErrPodNetworkSimulated is what a simulated machine's LookupHost returns: its pod network is
// simulated, and no cluster DNS answers on it, so what a real node's query would find is unknown.
var ErrPodNetworkSimulated = errors.New("the machine's pod network is simulated and reaches no cluster DNS")

// ImageStateComplete is the ImageState of a Windows whose setup has finished: "The specialize
// and oobeSystem configuration passes are complete". Until then setup may still rename the
// computer and the provisioner may not have written the custom data
// (https://learn.microsoft.com/en-us/windows-hardware/manufacture/desktop/windows-setup-states: the
// REG_SZ value ImageState under HKEY_LOCAL_MACHINE\SOFTWARE\Microsoft\Windows\CurrentVersion\Setup\State).
const ImageStateComplete = "IMAGE_STATE_COMPLETE"

// Network manages HNS networks.
type Network interface {
	// Ensure makes the network exist as specified (after its bootstrap network), replacing a
	// stale one of the same name, and returns what peers need to reach it.
	Ensure(ctx context.Context, spec NetworkSpec) (NetworkInfo, error)
	// Check reports what of the network differs from spec, with HNS queries and the host's
	// interface list only (no change, no PowerShell), so that it can run often; a zero Drift
	// means Ensure has nothing to repair.
	Check(ctx context.Context, spec NetworkSpec) (Drift, error)
	// ReplaceRemoteSubnets makes the overlay network's remote subnet routes exactly subnets,
	// and reports whether it changed any.
	ReplaceRemoteSubnets(ctx context.Context, network string, subnets []RemoteSubnet) (bool, error)
	// Delete removes the network and its endpoints; a missing network is not an error.
	Delete(ctx context.Context, name string) error
	// RemovePodState removes what pods and kube-proxy left in HNS: the network's endpoints other
	// than its host endpoint, and every load balancer. Only while neither the kubelet nor
	// kube-proxy runs: they are the pods' and services' own.
	RemovePodState(ctx context.Context, name string) error
}

// Drift is what Check found of a network that differs from its spec.
type Drift struct {
	// Network says why the pod network must be made again (missing, or not as specified);
	// making it again drops the load balancers kube-proxy programmed on the old one.
	Network string `json:"network,omitempty"`
	// Host lists what else is missing: the bootstrap network, the l2bridge host endpoint or
	// its host vNIC.
	Host []string `json:"host,omitempty"`
}

// None reports whether nothing drifted.
func (d Drift) None() bool { return d.Network == "" && len(d.Host) == 0 }

// String lists the findings, separated by "; ".
func (d Drift) String() string {
	var all []string
	if d.Network != "" {
		all = append(all, d.Network)
	}
	return strings.Join(append(all, d.Host...), "; ")
}

// NetworkInfo is what an ensured network tells about itself.
type NetworkInfo struct {
	// VTEPMAC is an overlay network's distributed router MAC, which peers address VXLAN
	// packets to (flannel's VtepMAC), as 00:15:5d:..:..:..
	VTEPMAC string `json:"vtepMAC,omitempty"`
}

// RemoteSubnet is a peer's pod CIDR on an overlay network: reached through VXLAN with VNI at
// the peer's provider address and distributed router MAC.
type RemoteSubnet struct {
	Destination     netip.Prefix `json:"destination"`
	ProviderAddress netip.Addr   `json:"providerAddress"`
	VTEPMAC         string       `json:"vtepMAC"`
	VNI             int32        `json:"vni"`
}

// Services manages the node's services (Windows services, or their record in sim).
type Services interface {
	// Ensure installs the service, or updates its configuration.
	Ensure(ctx context.Context, spec ServiceSpec) error
	Start(ctx context.Context, name string) error
	Stop(ctx context.Context, name string) error
	// Running reports whether the service runs (or is starting or stopping); a missing service
	// does not.
	Running(ctx context.Context, name string) (bool, error)
	// Delete stops and removes the service; a missing service is not an error.
	Delete(ctx context.Context, name string) error
}

// ServiceSpec is a node service.
type ServiceSpec struct {
	Name        string   `json:"name"`
	DisplayName string   `json:"displayName"`
	Description string   `json:"description"`
	Executable  string   `json:"executable"` // Windows path
	Args        []string `json:"args"`
	// Dependencies are services that must run first.
	Dependencies []string `json:"dependencies,omitempty"`
	// Start is when the service starts.
	Start StartMode `json:"start"`
	// LogFile receives the service's output through LogRunner (kube-log-runner.exe: the node
	// components lost their log-file flags in Kubernetes 1.26).
	LogFile   string `json:"logFile,omitempty"`
	LogRunner string `json:"logRunner,omitempty"`
	// SelfRegistering services are registered by their own program (containerd.exe and
	// dockerd.exe --register-service), which writes the service entry it runs as; Args are
	// what it passes on to its service command line.
	SelfRegistering bool `json:"selfRegistering,omitempty"`
}

// StartMode is when a service starts.
type StartMode string

// Start modes.
const (
	// StartAtBoot services are started by the service manager when the machine boots.
	StartAtBoot StartMode = "boot"
	// StartByNodeboot services are started by nodeboot, on every boot after it has prepared
	// what they need (the HNS network), never by the service manager on its own.
	StartByNodeboot StartMode = "nodeboot"
)

// Routes programs the routes to other nodes' pod CIDRs (host-gateway mode).
type Routes interface {
	// Replace makes the kubewin routes exactly routes, and reports whether it changed any.
	// They last until the machine restarts: nodeboot programs them again on every boot.
	Replace(ctx context.Context, routes []Route) (bool, error)
}

// Route sends a destination prefix to a next hop.
type Route struct {
	Destination netip.Prefix `json:"destination"`
	NextHop     netip.Addr   `json:"nextHop"`
}

// Diagnostics reads what a diagnostics bundle holds of the machine (nodeboot diagnose). It
// changes nothing.
type Diagnostics interface {
	// HNS returns HNS's networks, the endpoints on each and the load balancers, as HNS
	// reports them.
	HNS(ctx context.Context) (HNSState, error)
	// ServiceStates returns the state and configuration of each named service; a missing
	// service has State ServiceMissing.
	ServiceStates(ctx context.Context, names []string) ([]ServiceStatus, error)
	// RouteTable returns every IPv4 route of the machine, in both stores.
	RouteTable(ctx context.Context) ([]RouteEntry, error)
	// Events returns, newest first, at most maxEach entries of each event log source that
	// tells about the node; the Service Control Manager's only when they name one of services.
	Events(ctx context.Context, services []string, maxEach int) ([]Event, error)
	// NodebootLog returns the end of nodeboot's own log, at most maxBytes.
	NodebootLog(ctx context.Context, maxBytes int) ([]byte, error)
}

// HNSState is what HNS holds, each object as HNS's v2 (hcn) API reports it.
type HNSState struct {
	Networks  []json.RawMessage `json:"networks"`
	Endpoints []json.RawMessage `json:"endpoints"`
	// LoadBalancers are kube-proxy's policy lists.
	LoadBalancers []json.RawMessage `json:"loadBalancers"`
}

// ServiceStatus is a service's state and configuration.
type ServiceStatus struct {
	Name      string `json:"name"`
	State     string `json:"state"`
	StartType string `json:"startType,omitempty"`
	// Command is the command line the service manager starts.
	Command string `json:"command,omitempty"`
}

// ServiceMissing is the State of a service that is not installed.
const ServiceMissing = "NotInstalled"

// RouteEntry is a route of the machine's routing table.
type RouteEntry struct {
	Destination    string `json:"destination"`
	NextHop        string `json:"nextHop"`
	InterfaceIndex int    `json:"interfaceIndex"`
	Metric         int    `json:"metric"`
	Store          string `json:"store"`
}

// Event is an event log entry.
type Event struct {
	Log     string    `json:"log"`
	Source  string    `json:"source"`
	ID      int       `json:"id"`
	Level   string    `json:"level"`
	Time    time.Time `json:"time"`
	Message string    `json:"message"`
}

// Host is what baking an image needs from the machine beyond Platform.
type Host interface {
	// AllowInbound opens an inbound port in the host firewall.
	AllowInbound(ctx context.Context, rule FirewallRule) error
	// DisableAutomaticUpdates keeps Windows Update from installing updates and restarting the
	// node on its own: patches arrive as new images.
	DisableAutomaticUpdates(ctx context.Context) error
	// ExcludeFromScanning keeps the antivirus out of the node's hot paths; it reports false
	// when the image has no Microsoft Defender.
	ExcludeFromScanning(ctx context.Context, paths []string) (bool, error)
	// ImportImage loads an OCI archive (a Windows path) into the runtime's image store. osVersion,
	// when set, is the image's os.version: the runtime imports and unpacks the image for that
	// Windows build, which may be older than the machine's (Hyper-V isolation runs it).
	ImportImage(ctx context.Context, runtime v1alpha1.RuntimeName, archive, osVersion string) error
	// RestartRuntime restarts the runtime so that it reads its new configuration.
	RestartRuntime(ctx context.Context, runtime v1alpha1.RuntimeName) error
}

// FirewallRule is an inbound allow rule.
type FirewallRule struct {
	Name     string `json:"name"`
	Protocol string `json:"protocol"` // TCP or UDP
	Port     int    `json:"port"`
	// LastPort ends a range of ports that starts at Port; zero for Port alone.
	LastPort int `json:"lastPort,omitempty"`
}

// Ports is the rule's port or range, as 10250 or 30000-32767.
func (r FirewallRule) Ports() string {
	if r.LastPort == 0 {
		return strconv.Itoa(r.Port)
	}
	return fmt.Sprintf("%d-%d", r.Port, r.LastPort)
}
