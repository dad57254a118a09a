package armtest

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"
)

func (f *fixture) publicIP(t *testing.T, name string) armnetwork.PublicIPAddress {
	ctx := testContext(t)
	p, err := f.network.NewPublicIPAddressesClient().BeginCreateOrUpdate(ctx, testGroup, name, armnetwork.PublicIPAddress{
		Location: to.Ptr(f.s.Location()), SKU: &armnetwork.PublicIPAddressSKU{Name: to.Ptr(armnetwork.PublicIPAddressSKUNameStandard)},
		Properties: &armnetwork.PublicIPAddressPropertiesFormat{PublicIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic)},
	}, nil)
	return done(t, p, err).PublicIPAddress
}

func (f *fixture) nic(t *testing.T, name string, pools ...string) string {
	ctx := testContext(t)
	ipc := &armnetwork.InterfaceIPConfigurationPropertiesFormat{Subnet: &armnetwork.Subnet{ID: to.Ptr(f.subnetID)}}
	for _, p := range pools {
		ipc.LoadBalancerBackendAddressPools = append(ipc.LoadBalancerBackendAddressPools, &armnetwork.BackendAddressPool{ID: to.Ptr(p)})
	}
	p, err := f.network.NewInterfacesClient().BeginCreateOrUpdate(ctx, testGroup, name, armnetwork.Interface{
		Location: to.Ptr(f.s.Location()),
		Properties: &armnetwork.InterfacePropertiesFormat{IPConfigurations: []*armnetwork.InterfaceIPConfiguration{
			{Name: to.Ptr("ipconfig"), Properties: ipc},
		}},
	}, nil)
	return *done(t, p, err).ID
}

func (f *fixture) putSubnet(t *testing.T, change func(*armnetwork.SubnetPropertiesFormat)) {
	ctx := testContext(t)
	subnets := f.network.NewSubnetsClient()
	sn, err := subnets.Get(ctx, testGroup, "vnet", "nodes", nil)
	if err != nil {
		t.Fatal(err)
	}
	change(sn.Properties)
	p, err := subnets.BeginCreateOrUpdate(ctx, testGroup, "vnet", "nodes", sn.Subnet, nil)
	done(t, p, err)
}

// The network the machines' connections cross: routes, outbound paths, the internal load
// balancer hairpin and the security groups in front of a public frontend.
func TestReach(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := testContext(t)
	lbID := f.s.ResourceGroupID(testGroup) + "/providers/Microsoft.Network/loadBalancers/"
	a := f.nic(t, "a")
	reach := func(from, to string, want string) {
		t.Helper()
		err := f.s.Reach(from, netip.MustParseAddrPort(to))
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("Reach(%s, %s) = %v, want %q", lastSegment(from), to, err, want)
		}
	}

	// No outbound path: Azure's default outbound access is not given.
	reach(a, PackageMirror.String(), "no outbound path")
	reach(a, "10.0.1.200:22", "")
	// A NAT gateway on the subnet is one; it cannot be deleted while the subnet names it.
	natIP := f.publicIP(t, "nat-ip")
	p, err := f.network.NewNatGatewaysClient().BeginCreateOrUpdate(ctx, testGroup, "nat", armnetwork.NatGateway{
		Location: to.Ptr(f.s.Location()), SKU: &armnetwork.NatGatewaySKU{Name: to.Ptr(armnetwork.NatGatewaySKUNameStandard)},
		Properties: &armnetwork.NatGatewayPropertiesFormat{PublicIPAddresses: []*armnetwork.SubResource{{ID: natIP.ID}}},
	}, nil)
	nat := done(t, p, err)
	f.putSubnet(t, func(sp *armnetwork.SubnetPropertiesFormat) { sp.NatGateway = &armnetwork.SubResource{ID: nat.ID} })
	reach(a, PackageMirror.String(), "")
	_, err = f.network.NewNatGatewaysClient().BeginDelete(ctx, testGroup, "nat", nil)
	if re := responseError(t, err); re.StatusCode != http.StatusBadRequest || re.ErrorCode != "InUseNatGatewayCannotBeDeleted" {
		t.Errorf("deleting a NAT gateway in use: %v", err)
	}

	// Pod addresses outside the virtual network are dropped (10.0.0.0/8 goes to None) unless a
	// route of the subnet's route table takes them.
	reach(a, "10.244.1.5:443", "to None")
	route := podRoute("10.244.1.0/24", "10.0.1.200")
	route.Name = to.Ptr("node-1")
	rt := f.createRouteTable(t, "pods", &route)
	f.putSubnet(t, func(sp *armnetwork.SubnetPropertiesFormat) { sp.RouteTable = &armnetwork.RouteTable{ID: rt.ID} })
	reach(a, "10.244.1.5:443", "")

	// An internal frontend: a backend of its rule cannot reach it, another machine can.
	frontend := func(props *armnetwork.FrontendIPConfigurationPropertiesFormat) armnetwork.LoadBalancer {
		port := to.Ptr[int32](6443)
		return armnetwork.LoadBalancer{
			Location: to.Ptr(f.s.Location()), SKU: &armnetwork.LoadBalancerSKU{Name: to.Ptr(armnetwork.LoadBalancerSKUNameStandard)},
			Properties: &armnetwork.LoadBalancerPropertiesFormat{
				FrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{{Name: to.Ptr("fe"), Properties: props}},
				BackendAddressPools:      []*armnetwork.BackendAddressPool{{Name: to.Ptr("pool")}},
				LoadBalancingRules: []*armnetwork.LoadBalancingRule{{Name: to.Ptr("api"), Properties: &armnetwork.LoadBalancingRulePropertiesFormat{
					FrontendIPConfiguration: &armnetwork.SubResource{ID: to.Ptr(lbID + "ilb/frontendIPConfigurations/fe")},
					BackendAddressPool:      &armnetwork.SubResource{ID: to.Ptr(lbID + "ilb/backendAddressPools/pool")},
					Protocol:                to.Ptr(armnetwork.TransportProtocolTCP), FrontendPort: port, BackendPort: port,
				}}},
			},
		}
	}
	lbs := f.network.NewLoadBalancersClient()
	p2, err := lbs.BeginCreateOrUpdate(ctx, testGroup, "ilb", frontend(&armnetwork.FrontendIPConfigurationPropertiesFormat{
		Subnet: &armnetwork.Subnet{ID: to.Ptr(f.subnetID)}, PrivateIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic),
		PrivateIPAddress: to.Ptr("10.0.1.100"),
	}), nil)
	done(t, p2, err)
	backend := f.nic(t, "backend", lbID+"ilb/backendAddressPools/pool")
	reach(backend, "10.0.1.100:6443", "its own internal load balancer")
	reach(a, "10.0.1.100:6443", "")
	reach(a, "10.0.1.100:22", "no load-balancing rule for port 22")

	// A public frontend: the connection arrives from the NAT gateway's address, which the
	// backends' security group must let in.
	apiIP := f.publicIP(t, "api-ip")
	body := frontend(&armnetwork.FrontendIPConfigurationPropertiesFormat{PublicIPAddress: &armnetwork.PublicIPAddress{ID: apiIP.ID}})
	p2, err = lbs.BeginCreateOrUpdate(ctx, testGroup, "ilb", body, nil)
	done(t, p2, err)
	rule := func(sources ...string) armnetwork.SecurityGroup {
		return armnetwork.SecurityGroup{Location: to.Ptr(f.s.Location()), Properties: &armnetwork.SecurityGroupPropertiesFormat{
			SecurityRules: []*armnetwork.SecurityRule{{Name: to.Ptr("api"), Properties: &armnetwork.SecurityRulePropertiesFormat{
				Access: to.Ptr(armnetwork.SecurityRuleAccessAllow), Direction: to.Ptr(armnetwork.SecurityRuleDirectionInbound),
				Priority: to.Ptr[int32](100), Protocol: to.Ptr(armnetwork.SecurityRuleProtocolTCP), SourcePortRange: to.Ptr("*"),
				SourceAddressPrefixes: to.SliceOfPtrs(sources...), DestinationAddressPrefix: to.Ptr("*"), DestinationPortRange: to.Ptr("6443"),
			}}},
		}}
	}
	nsgs := f.network.NewSecurityGroupsClient()
	p3, err := nsgs.BeginCreateOrUpdate(ctx, testGroup, "nsg", rule("203.0.113.0/24"), nil)
	nsg := done(t, p3, err)
	f.putSubnet(t, func(sp *armnetwork.SubnetPropertiesFormat) {
		sp.NetworkSecurityGroup = &armnetwork.SecurityGroup{ID: nsg.ID}
	})
	api := *apiIP.Properties.IPAddress + ":6443"
	reach(a, api, "no backend's network security group lets in")
	p3, err = nsgs.BeginCreateOrUpdate(ctx, testGroup, "nsg", rule("203.0.113.0/24", *natIP.Properties.IPAddress), nil)
	done(t, p3, err)
	reach(a, api, "")
	reach(backend, api, "") // a public frontend has no hairpin limitation
}
