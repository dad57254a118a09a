package windows

import (
	"context"
	"errors"
	"net/netip"
	"time"

	"github.com/kubewin/kubewin/nodeboot/internal/platform/windows/hcnjson"
)

// Backends are the Windows facilities the platform acts through, each a thin layer over one
// system interface. The decisions are made in this package, in portable code, and turned into
// requests: HNS requests as hcn JSON, service operations with their configuration, PowerShell
// scripts, files with their security descriptor. The Windows implementations (Native) pass
// the requests on; package winfake records them and simulates the machine.
type Backends struct {
	HNS    HNS
	SCM    SCM
	Shell  Shell
	Files  Files
	System System
}

// ErrNotFound is what a backend returns for a network, endpoint or service that does not exist.
var ErrNotFound = errors.New("not found")

// HNS is the Host Network Service, through the v2 (hcn) API.
type HNS interface {
	// NetworkByName returns the network of that name, or ErrNotFound.
	NetworkByName(name string) (*hcnjson.HostComputeNetwork, error)
	// Networks lists every network (hcn.ListNetworks).
	Networks() ([]hcnjson.HostComputeNetwork, error)
	// NetworkByID returns the network, or ErrNotFound.
	NetworkByID(id string) (*hcnjson.HostComputeNetwork, error)
	// CreateNetwork creates a network (hcn HostComputeNetwork.Create) and returns it as HNS
	// reports it, with its ID and the policies HNS adds.
	CreateNetwork(n *hcnjson.HostComputeNetwork) (*hcnjson.HostComputeNetwork, error)
	// ManagementIP returns the network's management address as HNS's v1 API reports it
	// (hcsshim HNSNetwork.ManagementIP), empty until HNS has set it: the one report of an
	// L2Bridge network's management address (flannel pkg/backend/hostgw/hostgw_windows.go).
	ManagementIP(networkID string) (string, error)
	// DeleteNetwork deletes a network by ID.
	DeleteNetwork(id string) error
	// AddNetworkPolicy and RemoveNetworkPolicy modify a network's policies (hcn
	// HostComputeNetwork.AddPolicy and RemovePolicy).
	AddNetworkPolicy(networkID string, req hcnjson.PolicyNetworkRequest) error
	RemoveNetworkPolicy(networkID string, req hcnjson.PolicyNetworkRequest) error
	// EndpointsOfNetwork lists the endpoints on a network.
	EndpointsOfNetwork(networkID string) ([]hcnjson.HostComputeEndpoint, error)
	// EndpointByName returns the endpoint of that name, or ErrNotFound.
	EndpointByName(name string) (*hcnjson.HostComputeEndpoint, error)
	// CreateEndpoint creates an endpoint on its network (hcn HostComputeEndpoint.Create).
	CreateEndpoint(ep *hcnjson.HostComputeEndpoint) (*hcnjson.HostComputeEndpoint, error)
	// DeleteEndpoint deletes an endpoint by ID.
	DeleteEndpoint(id string) error
	// LoadBalancers lists every load balancer (hcn.ListLoadBalancers); DeleteLoadBalancer
	// deletes one by ID.
	LoadBalancers() ([]hcnjson.HostComputeLoadBalancer, error)
	DeleteLoadBalancer(id string) error
	// AttachHost attaches an endpoint to the host's default network compartment. hcn has no
	// such call: the Windows implementation makes HNS's one (HostAttach with compartment 1) by
	// the endpoint's ID, as Microsoft's windows-container-networking does for the gateway
	// endpoint it creates through hcn (test/utilities, CreateGatewayEp).
	AttachHost(endpointID string) error
}

// ErrAlreadyAttached is what AttachHost returns for an endpoint already attached to the host
// ("This endpoint is already attached to the switch.", flannel-io/flannel
// pkg/backend/hostgw/hostgw_windows.go treats it as success).
var ErrAlreadyAttached = errors.New("the endpoint is already attached to the host")

// StartType is when the Service Control Manager starts a service.
type StartType string

// Start types (SERVICE_AUTO_START, SERVICE_DEMAND_START, SERVICE_DISABLED).
const (
	StartAutomatic StartType = "Automatic"
	StartManual    StartType = "Manual"
	StartDisabled  StartType = "Disabled"
)

// ServiceConfig is a service's configuration (mgr.Config, as nodeboot sets it: own process,
// normal error control, LocalSystem).
type ServiceConfig struct {
	// BinaryPathName is the command line the SCM starts.
	BinaryPathName string    `json:"binaryPathName"`
	StartType      StartType `json:"startType"`
	DisplayName    string    `json:"displayName,omitempty"`
	Description    string    `json:"description,omitempty"`
	Dependencies   []string  `json:"dependencies,omitempty"`
}

// RecoveryAction is one entry of a service's failure actions: restart the service after Delay,
// or, with Restart false, take no action.
type RecoveryAction struct {
	Restart bool          `json:"restart"`
	Delay   time.Duration `json:"delay"`
}

// Recovery is what the SCM does when a service fails: the Nth failure within ResetPeriod runs
// the Nth action, and "if N is greater than cActions, the service controller repeats the last
// action in the array" ([MS-SCMR] 2.2.40 SERVICE_FAILURE_ACTIONSW). A failure is a crash, a
// service process that ends without reporting SERVICE_STOPPED; with OnNonCrashFailures it is
// also a stop with a non-zero exit code ([MS-SCMR] 2.2.41 SERVICE_FAILURE_ACTIONS_FLAG).
type Recovery struct {
	Actions            []RecoveryAction `json:"actions"`
	ResetPeriod        time.Duration    `json:"resetPeriod"`
	OnNonCrashFailures bool             `json:"onNonCrashFailures,omitempty"`
}

// ServiceState is a service's state.
type ServiceState string

// Service states nodeboot tells apart.
const (
	Stopped ServiceState = "Stopped"
	Running ServiceState = "Running"
	Pending ServiceState = "Pending" // start or stop pending
)

// SCM is the Service Control Manager.
type SCM interface {
	// Query returns a service's configuration and state, or ErrNotFound.
	Query(name string) (ServiceConfig, ServiceState, error)
	Create(name string, c ServiceConfig) error
	Update(name string, c ServiceConfig) error
	// QueryRecovery returns what the SCM does when a service fails; SetRecovery sets it.
	QueryRecovery(name string) (Recovery, error)
	SetRecovery(name string, r Recovery) error
	// Start asks the SCM to start a service; Stop sends it the stop control. Neither waits.
	Start(name string) error
	Stop(name string) error
	// Delete marks a service for deletion.
	Delete(name string) error
}

// Script is a PowerShell script nodeboot runs, with the values it was written from.
type Script struct {
	// Name says what the script does, as "routes.apply".
	Name string
	// Params are the values the script was written from (one of the *Params types of this
	// package): the recording backend simulates the script's effect from them.
	Params any
	// Text is the script. Every value in it went through powershell.Quote.
	Text string
}

// Shell runs PowerShell.
type Shell interface {
	// Run runs a script (with powershell's stop-at-first-error preamble) and returns its
	// standard output.
	Run(ctx context.Context, s Script) ([]byte, error)
}

// Files are the machine's files.
type Files interface {
	// Path maps a Windows path to a path this process can open.
	Path(win string) string
	// Write replaces a file with data, atomically, creating its directory. A non-empty SDDL
	// is the security descriptor the file is created with: it never exists with another one.
	Write(win string, data []byte, sddl string) error
	// Remove removes a file; a missing file is not an error.
	Remove(win string) error
	// RemoveAll removes a directory and everything in it; a missing directory is not an error.
	RemoveAll(win string) error
	// Symlink makes win a symbolic link to target, a file name in win's directory, replacing
	// the file or link win was.
	Symlink(win, target string) error
}

// Interface is a host network interface.
type Interface struct {
	Name  string         `json:"name"`
	Index int            `json:"index"`
	Addrs []netip.Prefix `json:"addrs"` // IPv4 addresses with their prefix length
}

// ActiveRoute is an IPv4 route in effect: a row of the IP forwarding table (MIB_IPFORWARD_ROW2).
type ActiveRoute struct {
	Destination    netip.Prefix `json:"destination"`
	NextHop        netip.Addr   `json:"nextHop"` // 0.0.0.0: on-link
	InterfaceIndex int          `json:"interfaceIndex"`
}

// System answers questions about the machine.
type System interface {
	ComputerName() (string, error)
	// ImageState is the value ImageState under HKLM\SOFTWARE\Microsoft\Windows\CurrentVersion\Setup\State
	// (platform.ImageStateComplete once setup has finished).
	ImageState() (string, error)
	OSBuild() (uint32, error)
	// Memory is the physical memory in bytes.
	Memory() (uint64, error)
	Interfaces() ([]Interface, error)
	// IPv4Routes lists the IPv4 routes in effect (the active store; GetIpForwardTable2), without
	// PowerShell, so that the drift check can read them often.
	IPv4Routes() ([]ActiveRoute, error)
	// PipeExists reports whether a named pipe (\\.\pipe\name) exists.
	PipeExists(name string) bool
	// PortFree returns an error when a TCP port is taken.
	PortFree(port int) error
}
