package platform

import (
	"net/netip"
	"testing"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
)

func TestNetworkSpecFor(t *testing.T) {
	pod := netip.MustParsePrefix("10.244.3.0/24")
	c := &v1alpha1.NodeConfig{}
	c.Default()
	s, ok, err := NetworkSpecFor(c, pod)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if s.Type != L2Bridge || s.Name != "cbr0" || s.Gateway.String() != "10.244.3.1" || s.HostEndpoint.String() != "10.244.3.2" ||
		s.Adapter != "Ethernet" || s.VNI != 0 {
		t.Errorf("l2bridge spec = %+v", s)
	}
	if s.Bootstrap.Subnet.String() != "192.168.255.0/30" || s.Bootstrap.VSID != 0 {
		t.Errorf("bootstrap network = %+v", s.Bootstrap)
	}

	c = &v1alpha1.NodeConfig{Network: v1alpha1.Network{Mode: v1alpha1.NetworkModeOverlay, VNI: 4097}}
	c.Default()
	s, _, _ = NetworkSpecFor(c, pod)
	if s.Type != Overlay || s.VNI != 4097 || s.Name != "vxlan0" || s.Bootstrap.VSID != bootstrapVSID {
		t.Errorf("overlay spec = %+v", s)
	}

	c = &v1alpha1.NodeConfig{Network: v1alpha1.Network{Mode: v1alpha1.NetworkModeExternal}}
	c.Default()
	if _, ok, err := NetworkSpecFor(c, pod); ok || err != nil {
		t.Errorf("external mode made a network: %v %v", ok, err)
	}
	if _, _, err := NetworkSpecFor(&v1alpha1.NodeConfig{Network: v1alpha1.Network{Mode: v1alpha1.NetworkModeL2Bridge}},
		netip.MustParsePrefix("10.0.0.0/30")); err == nil {
		t.Error("tiny pod CIDR accepted")
	}
}
