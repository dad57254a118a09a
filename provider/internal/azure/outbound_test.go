package azure

import (
	"context"
	"errors"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"

	"github.com/kubewin/kubewin/internal/testkit/armtest"
)

// A subnet's machines without a public address or a load balancer reach the Internet through the
// subnet's NAT gateway or a default route to a virtual appliance, and through nothing else: a
// subnet with neither, or with a default route to Internet (which needs one of the explicit
// outbound methods behind it), has no outbound path.
func TestSubnetOutbound(t *testing.T) {
	ctx := context.Background()
	c := secretClient(ctx, t)
	const group = "outbound"
	vnet, err := server.AddVirtualNetwork(armtest.VirtualNetwork{ResourceGroup: group, Name: "vnet", AddressPrefixes: []string{"10.40.0.0/16"},
		Subnets: map[string]string{"nodes": "10.40.1.0/24"}})
	if err != nil {
		t.Fatal(err)
	}
	subnetID := vnet + "/subnets/nodes"
	check := func(what string, want bool) {
		t.Helper()
		err := c.SubnetOutbound(ctx, subnetID)
		if got := err == nil; got != want || (err != nil && !errors.Is(err, ErrNoOutbound)) {
			t.Errorf("%s: SubnetOutbound = %v, want an outbound path: %v", what, err, want)
		}
	}
	putSubnet := func(p armnetwork.SubnetPropertiesFormat) {
		t.Helper()
		p.AddressPrefix = to.Ptr("10.40.1.0/24")
		poller, err := c.network.NewSubnetsClient().BeginCreateOrUpdate(ctx, group, "vnet", "nodes", armnetwork.Subnet{Properties: &p}, nil)
		if _, err := wait(ctx, c, poller, err); err != nil {
			t.Fatal(err)
		}
	}
	defaultRoute := func(hop armnetwork.RouteNextHopType, address string) {
		t.Helper()
		r := armnetwork.Route{Properties: &armnetwork.RoutePropertiesFormat{AddressPrefix: to.Ptr("0.0.0.0/0"), NextHopType: to.Ptr(hop)}}
		if address != "" {
			r.Properties.NextHopIPAddress = to.Ptr(address)
		}
		poller, err := c.network.NewRoutesClient().BeginCreateOrUpdate(ctx, group, "rt", "default", r, nil)
		if _, err := wait(ctx, c, poller, err); err != nil {
			t.Fatal(err)
		}
	}

	check("no NAT gateway, no route table", false)
	if _, err := server.AddRouteTable(group, "rt", subnetID); err != nil {
		t.Fatal(err)
	}
	defaultRoute(armnetwork.RouteNextHopTypeInternet, "")
	check("0.0.0.0/0 to Internet", false)
	defaultRoute(armnetwork.RouteNextHopTypeVirtualAppliance, "10.40.0.4")
	check("0.0.0.0/0 to a firewall", true)

	putSubnet(armnetwork.SubnetPropertiesFormat{})
	check("the route table dissociated", false)
	putSubnet(armnetwork.SubnetPropertiesFormat{NatGateway: &armnetwork.SubResource{ID: testNATGateway(ctx, t, c, group)}})
	check("a NAT gateway", true)
}

// testNATGateway makes a NAT gateway "nat" with a public address in a group of the test server,
// and returns its ID.
func testNATGateway(ctx context.Context, t *testing.T, c *Client, group string) *string {
	t.Helper()
	ipPoller, err := c.network.NewPublicIPAddressesClient().BeginCreateOrUpdate(ctx, group, "nat-ip", armnetwork.PublicIPAddress{
		Location: to.Ptr(server.Location()), SKU: &armnetwork.PublicIPAddressSKU{Name: to.Ptr(armnetwork.PublicIPAddressSKUNameStandard)},
		Properties: &armnetwork.PublicIPAddressPropertiesFormat{PublicIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic)},
	}, nil)
	ip, err := wait(ctx, c, ipPoller, err)
	if err != nil {
		t.Fatal(err)
	}
	natPoller, err := c.network.NewNatGatewaysClient().BeginCreateOrUpdate(ctx, group, "nat", armnetwork.NatGateway{
		Location: to.Ptr(server.Location()), SKU: &armnetwork.NatGatewaySKU{Name: to.Ptr(armnetwork.NatGatewaySKUNameStandard)},
		Properties: &armnetwork.NatGatewayPropertiesFormat{PublicIPAddresses: []*armnetwork.SubResource{{ID: ip.ID}}},
	}, nil)
	nat, err := wait(ctx, c, natPoller, err)
	if err != nil {
		t.Fatal(err)
	}
	return nat.ID
}
