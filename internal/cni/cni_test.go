package cni

import (
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/testkit/golden"
)

// guidesInput is the example of the original guides' "Upstream L3 Routing" topology.
func guidesInput() Input {
	return Input{
		Flavour:       v1alpha1.CNIWinBridge,
		Runtime:       v1alpha1.RuntimeDocker,
		NetworkName:   "l2bridge",
		InterfaceName: "Ethernet",
		PodCIDR:       netip.MustParsePrefix("10.10.187.64/26"),
		ClusterCIDR:   netip.MustParsePrefix("10.10.0.0/16"),
		ServiceCIDR:   netip.MustParsePrefix("11.0.0.0/8"),
		NodeSubnet:    netip.MustParsePrefix("10.127.132.128/25"),
		NodeIP:        netip.MustParseAddr("10.127.132.213"),
		DNSServers:    []netip.Addr{netip.MustParseAddr("11.0.0.10")},
	}
}

func TestRenderGolden(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*Input)
	}{
		{"win-bridge-containerd.json", func(in *Input) {
			in.Flavour, in.Runtime, in.NetworkName = v1alpha1.CNIWinBridge, v1alpha1.RuntimeContainerd, "cbr0"
			in.DNSSearch = []string{"svc.cluster.local"}
			in.LoopbackDSR = true
		}},
		{"win-bridge-docker.json", func(in *Input) {
			in.Flavour, in.NetworkName = v1alpha1.CNIWinBridge, "cbr0"
		}},
		{"win-overlay.json", func(in *Input) {
			in.Flavour, in.Runtime, in.NetworkName = v1alpha1.CNIWinOverlay, v1alpha1.RuntimeContainerd, "vxlan0"
			in.NodeSubnet = netip.Prefix{}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := guidesInput()
			tt.modify(&in)
			got, err := Render(in)
			if err != nil {
				t.Fatal(err)
			}
			golden.Assert(t, tt.name, got)
		})
	}
}

func TestRenderErrors(t *testing.T) {
	tests := []struct {
		name    string
		modify  func(*Input)
		wantErr string
	}{
		{"pod CIDR outside cluster", func(in *Input) { in.PodCIDR = netip.MustParsePrefix("10.11.0.0/24") }, "outside cluster CIDR"},
		{"tiny pod CIDR", func(in *Input) { in.PodCIDR = netip.MustParsePrefix("10.10.187.64/30") }, "too small for l2bridge"},
		{"no node IP", func(in *Input) { in.NodeIP = netip.Addr{} }, "node IP is not set"},
		{"IPv6", func(in *Input) { in.ServiceCIDR = netip.MustParsePrefix("fd00::/108") }, "IPv6 is not supported yet"},
		{"overlay on docker", func(in *Input) { in.Flavour = v1alpha1.CNIWinOverlay }, "needs the containerd runtime"},
		{"external", func(in *Input) { in.Flavour = v1alpha1.CNINone }, `"none" has no config`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := guidesInput()
			tt.modify(&in)
			_, err := Render(in)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestFromNodeConfig(t *testing.T) {
	c := &v1alpha1.NodeConfig{
		Cluster: v1alpha1.Cluster{ClusterCIDR: "10.10.0.0/16", ServiceCIDR: "11.0.0.0/8", ClusterDNS: []string{"11.0.0.10"}},
		Node:    v1alpha1.Node{Subnet: "10.127.132.128/25"},
		Network: v1alpha1.Network{Name: "l2bridge"},
		Runtime: v1alpha1.Runtime{Name: v1alpha1.RuntimeDocker},
	}
	c.Default()
	found := netip.MustParsePrefix("10.127.132.0/24") // the adapter's subnet; node.subnet wins
	in, err := FromNodeConfig(c, netip.MustParsePrefix("10.10.187.64/26"), netip.MustParseAddr("10.127.132.213"), found)
	if err != nil {
		t.Fatal(err)
	}
	want := guidesInput()
	want.DNSSearch = []string{"svc.cluster.local"}
	if !reflect.DeepEqual(in, want) {
		t.Errorf("FromNodeConfig =\n%+v\nwant\n%+v", in, want)
	}

	// Without node.subnet, the subnet found on the adapter is excluded from outbound NAT.
	c.Node.Subnet = ""
	if in, err = FromNodeConfig(c, netip.MustParsePrefix("10.10.187.64/26"), netip.MustParseAddr("10.127.132.213"), found); err != nil {
		t.Fatal(err)
	}
	if in.NodeSubnet != found || !slices.Contains(in.natExceptions(), found.String()) {
		t.Errorf("node subnet %s, NAT exceptions %v: want %s excepted", in.NodeSubnet, in.natExceptions(), found)
	}
}
