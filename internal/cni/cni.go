// Package cni renders the CNI network configuration a Windows node needs for its network mode:
// containernetworking's win-bridge and win-overlay plugins. Rendering is pure and deterministic.
package cni

import (
	"encoding/json"
	"fmt"
	"net/netip"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/ipam"
)

// Input is everything a CNI config depends on. Addresses known only at boot (pod CIDR, node IP)
// are fields here rather than read from the node.
type Input struct {
	Flavour       v1alpha1.CNIFlavour
	Runtime       v1alpha1.RuntimeName
	NetworkName   string
	InterfaceName string
	PodCIDR       netip.Prefix
	ClusterCIDR   netip.Prefix
	ServiceCIDR   netip.Prefix
	// NodeSubnet is optional: when valid it is excluded from outbound NAT.
	NodeSubnet netip.Prefix
	NodeIP     netip.Addr
	DNSServers []netip.Addr
	DNSSearch  []string
	// LoopbackDSR lets a pod reach itself through a service VIP (needs DSR support in HNS).
	LoopbackDSR bool
}

// FileName is the name nodeboot gives the config in the CNI config directory.
const FileName = "10-kubewin.conf"

// CNIVersion is the CNI spec version of the win-bridge and win-overlay configs.
const CNIVersion = "0.3.1"

// MACPrefix is the endpoint MAC prefix of win-overlay, the same as flannel's on Windows.
const MACPrefix = "0E-2A"

// Render returns the CNI config for in, as indented JSON.
func Render(in Input) ([]byte, error) {
	if err := in.check(); err != nil {
		return nil, err
	}
	var doc any
	switch in.Flavour {
	case v1alpha1.CNIWinBridge:
		doc = in.winBridge()
	case v1alpha1.CNIWinOverlay:
		if in.Runtime != v1alpha1.RuntimeContainerd {
			return nil, fmt.Errorf("cni win-overlay needs the containerd runtime, not %q", in.Runtime)
		}
		doc = in.winOverlay()
	default:
		return nil, fmt.Errorf("cni flavour %q has no config to render", in.Flavour)
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

func (in Input) check() error {
	for name, p := range map[string]netip.Prefix{"pod CIDR": in.PodCIDR, "cluster CIDR": in.ClusterCIDR, "service CIDR": in.ServiceCIDR} {
		if !p.IsValid() {
			return fmt.Errorf("cni: %s is not set", name)
		}
		if !p.Addr().Is4() {
			return ipam.ErrIPv6
		}
	}
	if !in.NodeIP.IsValid() {
		return fmt.Errorf("cni: node IP is not set")
	}
	if in.NetworkName == "" {
		return fmt.Errorf("cni: network name is not set")
	}
	if !in.ClusterCIDR.Contains(in.PodCIDR.Addr()) {
		return fmt.Errorf("cni: pod CIDR %s is outside cluster CIDR %s", in.PodCIDR, in.ClusterCIDR)
	}
	_, err := ipam.BridgeAddresses(in.PodCIDR)
	return err
}

// natExceptions are the destinations pods reach without outbound NAT: services, other pods, and
// the node subnet when known, whose hosts route to pod CIDRs on a bridged network (the route
// table or host-gw routes): pod-to-VNet traffic keeps the pod's address, so NSG and network
// policy rules written for pod IPs match (aks-engine puts the VNet in the exceptions of its
// Windows CNI configs). An overlay network leaves it out: its pod IPs are not routable there.
func (in Input) natExceptions() []string {
	ex := []string{in.ServiceCIDR.String(), in.ClusterCIDR.String()}
	if in.NodeSubnet.IsValid() {
		ex = append(ex, in.NodeSubnet.String())
	}
	return ex
}

// encapRoutes are the destinations sent through the host vSwitch so that kube-proxy's VFP rules
// apply: the service network and the node's own address.
func (in Input) encapRoutes() []string {
	return []string{in.ServiceCIDR.String(), netip.PrefixFrom(in.NodeIP, 32).String()}
}

func (in Input) dnsServers() []string {
	s := make([]string, len(in.DNSServers))
	for i, a := range in.DNSServers {
		s[i] = a.String()
	}
	return s
}

// --- win-bridge / win-overlay (containernetworking plugins) ---

// policy is {"name": "EndpointPolicy", "value": {...}} in the containernetworking plugins'.
type policy struct {
	Name  string `json:"name"`
	Value any    `json:"value"`
}

type v1OutboundNAT struct {
	Type          string   `json:"Type"`
	ExceptionList []string `json:"ExceptionList"`
}

type v1Route struct {
	Type              string `json:"Type"`
	DestinationPrefix string `json:"DestinationPrefix"`
	NeedEncap         bool   `json:"NeedEncap"`
}

func (in Input) v1Policies() []any {
	p := []any{v1OutboundNAT{Type: "OutBoundNAT", ExceptionList: in.natExceptions()}}
	for _, dst := range in.encapRoutes() {
		p = append(p, v1Route{Type: "ROUTE", DestinationPrefix: dst, NeedEncap: true})
	}
	return p
}

type pluginConf struct {
	CNIVersion        string       `json:"cniVersion"`
	Name              string       `json:"name"`
	Type              string       `json:"type"`
	APIVersion        int          `json:"apiVersion"`
	Capabilities      capabilities `json:"capabilities"`
	IPAM              hostLocal    `json:"ipam"`
	DNS               dns          `json:"dns"`
	Policies          []policy     `json:"policies"`
	LoopbackDSR       bool         `json:"loopbackDSR,omitempty"`
	EndpointMacPrefix string       `json:"endpointMacPrefix,omitempty"`
}

type capabilities struct {
	PortMappings bool `json:"portMappings"`
	DNS          bool `json:"dns"`
}

type hostLocal struct {
	Type   string        `json:"type"`
	Ranges [][]ipRange   `json:"ranges"`
	Routes []destination `json:"routes"`
}

type ipRange struct {
	Subnet     string `json:"subnet"`
	RangeStart string `json:"rangeStart"`
	RangeEnd   string `json:"rangeEnd"`
}

type destination struct {
	Dst string `json:"dst"`
}

type dns struct {
	Nameservers []string `json:"nameservers"`
	Search      []string `json:"search,omitempty"`
}

type v2Policy struct {
	Type     string `json:"Type"`
	Settings any    `json:"Settings"`
}

type outboundNATSettings struct {
	Exceptions []string `json:"Exceptions"`
}

type sdnRouteSettings struct {
	DestinationPrefix string `json:"DestinationPrefix"`
	NeedEncap         bool   `json:"NeedEncap"`
}

type providerAddressSettings struct {
	ProviderAddress string `json:"ProviderAddress"`
}

func (in Input) pluginBase(pluginType string, apiVersion int) pluginConf {
	b, _ := ipam.BridgeAddresses(in.PodCIDR)
	return pluginConf{
		CNIVersion:   CNIVersion,
		Name:         in.NetworkName,
		Type:         pluginType,
		APIVersion:   apiVersion,
		Capabilities: capabilities{PortMappings: true, DNS: true},
		IPAM: hostLocal{
			Type:   "host-local",
			Ranges: [][]ipRange{{{Subnet: in.PodCIDR.String(), RangeStart: b.FirstPod.String(), RangeEnd: b.LastPod.String()}}},
			Routes: []destination{{Dst: "0.0.0.0/0"}},
		},
		DNS:         dns{Nameservers: in.dnsServers(), Search: in.DNSSearch},
		LoopbackDSR: in.LoopbackDSR,
	}
}

func (in Input) winBridge() pluginConf {
	// containerd drives HNS through the v2 (HCN) API; Docker through cri-dockerd uses v1.
	if in.Runtime == v1alpha1.RuntimeDocker {
		c := in.pluginBase("win-bridge", 1)
		for _, v := range in.v1Policies() {
			c.Policies = append(c.Policies, policy{Name: "EndpointPolicy", Value: v})
		}
		return c
	}
	c := in.pluginBase("win-bridge", 2)
	c.Policies = append(c.Policies, policy{Name: "EndpointPolicy", Value: v2Policy{Type: "OutBoundNAT",
		Settings: outboundNATSettings{Exceptions: in.natExceptions()}}})
	for _, dst := range in.encapRoutes() {
		c.Policies = append(c.Policies, policy{Name: "EndpointPolicy", Value: v2Policy{Type: "SDNRoute", Settings: sdnRouteSettings{DestinationPrefix: dst,
			NeedEncap: true}}})
	}
	return c
}

func (in Input) winOverlay() pluginConf {
	c := in.pluginBase("win-overlay", 2)
	c.EndpointMacPrefix = MACPrefix
	c.Policies = []policy{
		{Name: "EndpointPolicy", Value: v2Policy{Type: "OutBoundNAT", Settings: outboundNATSettings{Exceptions: []string{in.ServiceCIDR.String(),
			in.ClusterCIDR.String()}}}},
		{Name: "EndpointPolicy", Value: v2Policy{Type: "SDNRoute", Settings: sdnRouteSettings{DestinationPrefix: in.ServiceCIDR.String(),
			NeedEncap: true}}},
		{Name: "EndpointPolicy", Value: v2Policy{Type: "ProviderAddress", Settings: providerAddressSettings{ProviderAddress: in.NodeIP.String()}}},
	}
	return c
}

// FromNodeConfig builds the Input for a node from its (defaulted, valid) NodeConfig and the
// addresses found at boot: the node's subnet is node.subnet, else the one found on its adapter
// (nodeSubnet, may be the zero prefix).
func FromNodeConfig(c *v1alpha1.NodeConfig, podCIDR netip.Prefix, nodeIP netip.Addr, nodeSubnet netip.Prefix) (Input, error) {
	in := Input{
		Flavour:       c.Network.CNI,
		Runtime:       c.Runtime.Name,
		NetworkName:   c.Network.Name,
		InterfaceName: c.Network.InterfaceName,
		PodCIDR:       podCIDR,
		NodeIP:        nodeIP,
		NodeSubnet:    nodeSubnet,
		DNSSearch:     []string{"svc." + c.Cluster.ClusterDomain},
		LoopbackDSR:   c.KubeProxy.EnableDSR,
	}
	var err error
	if in.ClusterCIDR, err = ipam.ParsePrefix(c.Cluster.ClusterCIDR); err != nil {
		return Input{}, fmt.Errorf("cluster.clusterCIDR: %w", err)
	}
	if in.ServiceCIDR, err = ipam.ParsePrefix(c.Cluster.ServiceCIDR); err != nil {
		return Input{}, fmt.Errorf("cluster.serviceCIDR: %w", err)
	}
	if c.Node.Subnet != "" {
		if in.NodeSubnet, err = ipam.ParsePrefix(c.Node.Subnet); err != nil {
			return Input{}, fmt.Errorf("node.subnet: %w", err)
		}
	}
	for _, s := range c.Cluster.ClusterDNS {
		a, err := ipam.ParseAddr(s)
		if err != nil {
			return Input{}, fmt.Errorf("cluster.clusterDNS: %w", err)
		}
		in.DNSServers = append(in.DNSServers, a)
	}
	return in, nil
}
