// Package hcnjson holds twins of the hcsshim hcn types nodeboot sends to the Host Network
// Service, with the same names, fields and JSON tags, so that the requests are built and
// recorded on any OS and marshal to exactly the JSON hcn would send. hcn itself compiles only
// on Windows (every file of github.com/Microsoft/hcsshim/hcn but doc.go is //go:build
// windows); a test compares these types with hcn's source, field by field.
package hcnjson

import "encoding/json"

// Version is hcn.Version (hcn/hcnglobals.go); SchemaVersion is hcn's alias for it.
type Version struct {
	Major int `json:"Major"`
	Minor int `json:"Minor"`
}

// SchemaVersion is the HNS schema version of a request.
type SchemaVersion = Version

// V2 is schema 2.0, which every hcn request carries.
var V2 = SchemaVersion{Major: 2, Minor: 0}

// ExtraParams is hcn.ExtraParams (hcn/hcn.go).
type ExtraParams struct {
	Resources        json.RawMessage `json:",omitempty"`
	SharedContainers json.RawMessage `json:",omitempty"`
	LayeredOn        string          `json:",omitempty"`
	SwitchGuid       string          `json:",omitempty"`
	UtilityVM        string          `json:",omitempty"`
	VirtualMachine   string          `json:",omitempty"`
}

// Health is hcn.Health (hcn/hcn.go).
type Health struct {
	Data  interface{} `json:",omitempty"`
	Extra ExtraParams `json:",omitempty"`
}

// SubnetFlags is hcn.SubnetFlags (hcn/hcnnetwork.go).
type SubnetFlags uint32

// Route is hcn.Route (hcn/hcnnetwork.go).
type Route struct {
	NextHop           string `json:",omitempty"`
	DestinationPrefix string `json:",omitempty"`
	Metric            uint16 `json:",omitempty"`
}

// Subnet is hcn.Subnet (hcn/hcnnetwork.go).
type Subnet struct {
	IpAddressPrefix string            `json:",omitempty"`
	Policies        []json.RawMessage `json:",omitempty"`
	Routes          []Route           `json:",omitempty"`
	Flags           SubnetFlags       `json:",omitempty"`
}

// Ipam is hcn.Ipam (hcn/hcnnetwork.go).
type Ipam struct {
	Type    string   `json:",omitempty"` // Ex: Static, DHCP
	Subnets []Subnet `json:",omitempty"`
}

// MacRange is hcn.MacRange (hcn/hcnnetwork.go).
type MacRange struct {
	StartMacAddress string `json:",omitempty"`
	EndMacAddress   string `json:",omitempty"`
}

// MacPool is hcn.MacPool (hcn/hcnnetwork.go).
type MacPool struct {
	Ranges []MacRange `json:",omitempty"`
}

// Dns is hcn.Dns (hcn/hcnnetwork.go).
type Dns struct {
	Domain     string   `json:",omitempty"`
	Search     []string `json:",omitempty"`
	ServerList []string `json:",omitempty"`
	Options    []string `json:",omitempty"`
}

// NetworkType is hcn.NetworkType (hcn/hcnnetwork.go).
type NetworkType string

// The network types nodeboot creates.
const (
	L2Bridge NetworkType = "L2Bridge"
	Overlay  NetworkType = "Overlay"
)

// NetworkFlags is hcn.NetworkFlags (hcn/hcnnetwork.go).
type NetworkFlags uint32

// EnableNonPersistent is hcn.EnableNonPersistent: HNS drops the network at reboot.
const EnableNonPersistent NetworkFlags = 8

// HostComputeNetwork is hcn.HostComputeNetwork (hcn/hcnnetwork.go).
type HostComputeNetwork struct {
	Id            string          `json:"ID,omitempty"`
	Name          string          `json:",omitempty"`
	Type          NetworkType     `json:",omitempty"`
	Policies      []NetworkPolicy `json:",omitempty"`
	MacPool       MacPool         `json:",omitempty"`
	Dns           Dns             `json:",omitempty"`
	Ipams         []Ipam          `json:",omitempty"`
	Flags         NetworkFlags    `json:",omitempty"` // 0: None
	Health        Health          `json:",omitempty"`
	SchemaVersion SchemaVersion   `json:",omitempty"`
}

// PolicyNetworkRequest is hcn.PolicyNetworkRequest (hcn/hcnnetwork.go), the body of AddPolicy
// and RemovePolicy.
type PolicyNetworkRequest struct {
	Policies []NetworkPolicy `json:",omitempty"`
}

// NetworkPolicyType is hcn.NetworkPolicyType (hcn/hcnpolicy.go).
type NetworkPolicyType string

// The network policy types nodeboot sends or reads.
const (
	NetAdapterName    NetworkPolicyType = "NetAdapterName"
	DrMacAddress      NetworkPolicyType = "DrMacAddress"
	ProviderAddress   NetworkPolicyType = "ProviderAddress"
	RemoteSubnetRoute NetworkPolicyType = "RemoteSubnetRoute"
	HostRoute         NetworkPolicyType = "HostRoute"
)

// NetworkPolicy is hcn.NetworkPolicy (hcn/hcnpolicy.go).
type NetworkPolicy struct {
	Type     NetworkPolicyType `json:""`
	Settings json.RawMessage   `json:",omitempty"`
}

// SubnetPolicyType is hcn.SubnetPolicyType (hcn/hcnpolicy.go).
type SubnetPolicyType string

// VSID is hcn.VSID, the subnet policy that sets an overlay's virtual subnet ID.
const VSID SubnetPolicyType = "VSID"

// SubnetPolicy is hcn.SubnetPolicy (hcn/hcnpolicy.go).
type SubnetPolicy struct {
	Type     SubnetPolicyType `json:""`
	Settings json.RawMessage  `json:",omitempty"`
}

// VsidPolicySetting is hcn.VsidPolicySetting (hcn/hcnpolicy.go).
type VsidPolicySetting struct {
	IsolationId uint32 `json:""`
}

// NetAdapterNameNetworkPolicySetting is hcn.NetAdapterNameNetworkPolicySetting (hcn/hcnpolicy.go).
type NetAdapterNameNetworkPolicySetting struct {
	NetworkAdapterName string `json:",omitempty"`
}

// DrMacAddressNetworkPolicySetting is hcn.DrMacAddressNetworkPolicySetting (hcn/hcnpolicy.go).
type DrMacAddressNetworkPolicySetting struct {
	Address string `json:",omitempty"`
}

// ProviderAddressEndpointPolicySetting is hcn.ProviderAddressEndpointPolicySetting
// (hcn/hcnpolicy.go); HNS reports a network's management address in this shape.
type ProviderAddressEndpointPolicySetting struct {
	ProviderAddress string `json:",omitempty"`
}

// RemoteSubnetRoutePolicySetting is hcn.RemoteSubnetRoutePolicySetting (hcn/hcnpolicy.go).
type RemoteSubnetRoutePolicySetting struct {
	DestinationPrefix           string
	IsolationId                 uint16
	ProviderAddress             string
	DistributedRouterMacAddress string
}

// IpConfig is hcn.IpConfig (hcn/hcnendpoint.go).
type IpConfig struct {
	IpAddress    string `json:",omitempty"`
	PrefixLength uint8  `json:",omitempty"`
}

// EndpointFlags is hcn.EndpointFlags (hcn/hcnendpoint.go).
type EndpointFlags uint32

// EndpointPolicyType is hcn.EndpointPolicyType (hcn/hcnpolicy.go).
type EndpointPolicyType string

// EndpointPolicy is hcn.EndpointPolicy (hcn/hcnpolicy.go).
type EndpointPolicy struct {
	Type     EndpointPolicyType `json:""`
	Settings json.RawMessage    `json:",omitempty"`
}

// HostComputeEndpoint is hcn.HostComputeEndpoint (hcn/hcnendpoint.go).
type HostComputeEndpoint struct {
	Id                   string           `json:"ID,omitempty"`
	Name                 string           `json:",omitempty"`
	HostComputeNetwork   string           `json:",omitempty"` // GUID
	HostComputeNamespace string           `json:",omitempty"` // GUID
	Policies             []EndpointPolicy `json:",omitempty"`
	IpConfigurations     []IpConfig       `json:",omitempty"`
	Dns                  Dns              `json:",omitempty"`
	Routes               []Route          `json:",omitempty"`
	MacAddress           string           `json:",omitempty"`
	Flags                EndpointFlags    `json:",omitempty"`
	Health               Health           `json:",omitempty"`
	SchemaVersion        SchemaVersion    `json:",omitempty"`
}

// HostComputeLoadBalancer is hcn.HostComputeLoadBalancer (hcn/hcnloadbalancer.go): kube-proxy's
// winkernel proxier creates one per service port; HNS's v1 API lists the same objects as policy
// lists (Get-HnsPolicyList).
type HostComputeLoadBalancer struct {
	Id                   string                    `json:"ID,omitempty"` //nolint:revive // hcn's field name: the types are twins
	HostComputeEndpoints []string                  `json:",omitempty"`
	SourceVIP            string                    `json:",omitempty"`
	FrontendVIPs         []string                  `json:",omitempty"`
	PortMappings         []LoadBalancerPortMapping `json:",omitempty"`
	SchemaVersion        SchemaVersion             `json:",omitempty"`
	Flags                LoadBalancerFlags         `json:",omitempty"`
}

// LoadBalancerPortMapping is hcn.LoadBalancerPortMapping (hcn/hcnloadbalancer.go).
type LoadBalancerPortMapping struct {
	Protocol         uint32                       `json:",omitempty"`
	InternalPort     uint16                       `json:",omitempty"`
	ExternalPort     uint16                       `json:",omitempty"`
	DistributionType LoadBalancerDistribution     `json:",omitempty"`
	Flags            LoadBalancerPortMappingFlags `json:",omitempty"`
}

// LoadBalancerFlags is hcn.LoadBalancerFlags (hcn/hcnloadbalancer.go).
type LoadBalancerFlags uint32

// LoadBalancerPortMappingFlags is hcn.LoadBalancerPortMappingFlags (hcn/hcnloadbalancer.go).
type LoadBalancerPortMappingFlags uint32

// LoadBalancerDistribution is hcn.LoadBalancerDistribution (hcn/hcnloadbalancer.go).
type LoadBalancerDistribution uint32
