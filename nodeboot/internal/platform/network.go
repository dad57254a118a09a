package platform

import (
	"fmt"
	"net/netip"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/ipam"
)

// NetworkType is an HNS network type.
type NetworkType string

// HNS network types kubewin creates.
const (
	L2Bridge NetworkType = "L2Bridge"
	Overlay  NetworkType = "Overlay"
)

// NetworkSpec is an HNS network as nodeboot wants it.
type NetworkSpec struct {
	Name    string      `json:"name"`
	Type    NetworkType `json:"type"`
	Adapter string      `json:"adapter"`
	// Subnet is the node's pod CIDR; Gateway its first address.
	Subnet  netip.Prefix `json:"subnet"`
	Gateway netip.Addr   `json:"gateway"`
	// HostEndpoint is the host vNIC address (l2bridge: the pods' gateway; overlay: the source VIP).
	HostEndpoint netip.Addr `json:"hostEndpoint"`
	// VNI is the VXLAN network identifier (overlay).
	VNI int32 `json:"vni,omitempty"`
	// Bootstrap is the throwaway "External" network created first so that the vSwitch and the
	// management vNIC exist before the real network: creating them blips connectivity once.
	Bootstrap BootstrapNetwork `json:"bootstrap"`
}

// BootstrapNetwork is the throwaway external network.
type BootstrapNetwork struct {
	Name    string       `json:"name"`
	Subnet  netip.Prefix `json:"subnet"`
	Gateway netip.Addr   `json:"gateway"`
	// VSID is set for overlay, whose bootstrap network must be an overlay too.
	VSID int32 `json:"vsid,omitempty"`
}

// bootstrapVSID is the overlay bootstrap network's VSID, distinct from any pod VNI (≥ 4096)
// (microsoft/SDN Kubernetes/windows/helper.psm1 CreateExternalNetwork: VSID 9999).
const bootstrapVSID = 9999

// BootstrapNetworkName is the throwaway network's name, as GCE and microsoft/SDN name it.
const BootstrapNetworkName = "External"

// NetworkSpecFor returns the HNS network of a node, or ok=false when the network mode leaves
// the network to a CNI DaemonSet (external).
func NetworkSpecFor(c *v1alpha1.NodeConfig, podCIDR netip.Prefix) (spec NetworkSpec, ok bool, err error) {
	var typ NetworkType
	switch c.Network.Mode {
	case v1alpha1.NetworkModeL2Bridge, v1alpha1.NetworkModeHostGateway:
		typ = L2Bridge
	case v1alpha1.NetworkModeOverlay:
		typ = Overlay
	case v1alpha1.NetworkModeExternal:
		return NetworkSpec{}, false, nil
	default:
		return NetworkSpec{}, false, fmt.Errorf("network mode %q has no HNS network", c.Network.Mode)
	}
	b, err := ipam.BridgeAddresses(podCIDR)
	if err != nil {
		return NetworkSpec{}, false, err
	}
	spec = NetworkSpec{
		Name:         c.Network.Name,
		Type:         typ,
		Adapter:      c.Network.InterfaceName,
		Subnet:       podCIDR,
		Gateway:      b.Gateway,
		HostEndpoint: b.HostEndpoint,
		Bootstrap: BootstrapNetwork{
			Name:    BootstrapNetworkName,
			Subnet:  netip.MustParsePrefix("192.168.255.0/30"),
			Gateway: netip.MustParseAddr("192.168.255.1"),
		},
	}
	if typ == Overlay {
		spec.VNI = c.Network.VNI
		spec.Bootstrap.VSID = bootstrapVSID
	}
	return spec, true, nil
}
