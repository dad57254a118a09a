package azure

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"

	"github.com/kubewin/kubewin/internal/ipam"
	"github.com/kubewin/kubewin/internal/kubeadmboot"
)

// network is the cluster's network in the order Create makes it, a step's objects in parallel
// and each after those it refers to; Delete removes it in reverse. subnet is the masters' subnet,
// where an internal load balancer's frontend is. In kubewin's own virtual network a NAT gateway
// on both subnets is every machine's outbound path, Windows pools' included: Azure gives new
// subnets no default outbound access
// (https://learn.microsoft.com/azure/virtual-network/ip-services/default-outbound-access), and
// cluster-api-provider-azure gives node subnets a NAT gateway too.
func (c *Cluster) network(ctx context.Context, subnet netip.Prefix) [][]object {
	own := c.VNetID() != ""
	first := []object{newSpec(c, routeTables, c.routeTableName(), pure(c.routeTableBody))}
	if own {
		first = append(first, c.securityGroup(ctx, "agents"), newSpec(c, publicIPs, c.outboundIPName(), pure(c.outboundIPBody)))
	}
	if c.Spec.Network.PublicAPIServer {
		first = append(first, newSpec(c, publicIPs, c.publicIPName(), pure(c.publicIPBody)))
	}
	steps := [][]object{first}
	if own {
		steps = append(steps,
			[]object{c.securityGroup(ctx, "masters"), newSpec(c, natGateways, c.natGatewayName(), pure(c.natGatewayBody))},
			[]object{newSpec(c, virtualNetworks, c.vnetName(), pure(c.vnetBody))})
	}
	lb := newSpec(c, loadBalancers, c.lbName(), func() (armnetwork.LoadBalancer, error) { return c.loadBalancerBody(subnet) })
	return append(steps, []object{lb})
}

// securityGroup is the security group of the masters' or the agents' subnet. The masters' lets
// the cluster's own outbound address (the NAT gateway's, read when the group is made) reach
// the API server besides APIServerSourcePrefixes: the machines reach a public frontend from it.
func (c *Cluster) securityGroup(ctx context.Context, role string) object {
	return newSpec(c, securityGroups, c.nsgName(role), func() (armnetwork.SecurityGroup, error) {
		var outbound []string
		if role == "masters" && len(c.Spec.APIServerSourcePrefixes) > 0 {
			a, err := c.outboundAddress(ctx)
			if err != nil {
				return armnetwork.SecurityGroup{}, err
			}
			outbound = []string{a}
		}
		return c.securityGroupBody(role, outbound), nil
	})
}

// securityGroupBody is the security group of the masters' or the agents' subnet: the masters'
// lets APIServerSourcePrefixes and the cluster's outbound addresses reach the API server (any
// source without APIServerSourcePrefixes).
func (c *Cluster) securityGroupBody(role string, outbound []string) armnetwork.SecurityGroup {
	m := armnetwork.SecurityGroup{Location: to.Ptr(c.Spec.Location), Tags: c.tags(), Properties: &armnetwork.SecurityGroupPropertiesFormat{}}
	if role == "masters" {
		rule := &armnetwork.SecurityRulePropertiesFormat{
			Access: to.Ptr(armnetwork.SecurityRuleAccessAllow), Direction: to.Ptr(armnetwork.SecurityRuleDirectionInbound),
			Priority: to.Ptr[int32](100), Protocol: to.Ptr(armnetwork.SecurityRuleProtocolTCP),
			SourcePortRange: to.Ptr("*"), DestinationAddressPrefix: to.Ptr("*"), DestinationPortRange: to.Ptr(strconv.Itoa(kubeadmboot.APIServerPort)),
			Description: to.Ptr("kubewin: the Kubernetes API server"),
		}
		switch p := c.Spec.APIServerSourcePrefixes; len(p) {
		case 0:
			rule.SourceAddressPrefix = to.Ptr("*")
		default:
			// The cluster's machines reach a public frontend from their outbound address, which
			// the VirtualNetwork service tag does not hold.
			rule.SourceAddressPrefixes = to.SliceOfPtrs(append(slices.Clone(p), outbound...)...)
		}
		m.Properties.SecurityRules = []*armnetwork.SecurityRule{{Name: to.Ptr("apiserver"), Properties: rule}}
	}
	return m
}

// routeTableBody is the route table of the masters' and the agents' subnets.
func (c *Cluster) routeTableBody() armnetwork.RouteTable {
	// Azure's own routes (BGP) are not wanted between the nodes' pods: only kubewin's.
	return armnetwork.RouteTable{
		Location: to.Ptr(c.Spec.Location), Tags: c.tags(),
		Properties: &armnetwork.RouteTablePropertiesFormat{DisableBgpRoutePropagation: to.Ptr(true)},
	}
}

// vnetBody is kubewin's virtual network with the masters' and the agents' subnets, each with its
// security group, the route table and the NAT gateway. The masters' subnet has the route table
// too, so that the API servers reach pods (webhooks, aggregated APIs, metrics-server) as
// aks-engine's masters did; Azure drops traffic to pod addresses a subnet has no route for.
func (c *Cluster) vnetBody() armnetwork.VirtualNetwork {
	n := c.Spec.Network
	subnet := func(name, prefix, nsg string) *armnetwork.Subnet {
		return &armnetwork.Subnet{Name: to.Ptr(name), Properties: &armnetwork.SubnetPropertiesFormat{
			AddressPrefix:        to.Ptr(prefix),
			NetworkSecurityGroup: &armnetwork.SecurityGroup{ID: to.Ptr(c.id(typeSecurityGroup, nsg).String())},
			RouteTable:           &armnetwork.RouteTable{ID: to.Ptr(c.RouteTableID())},
			NatGateway:           &armnetwork.SubResource{ID: to.Ptr(c.id(typeNatGateway, c.natGatewayName()).String())},
		}}
	}
	return armnetwork.VirtualNetwork{
		Location: to.Ptr(c.Spec.Location), Tags: c.tags(),
		Properties: &armnetwork.VirtualNetworkPropertiesFormat{
			AddressSpace: &armnetwork.AddressSpace{AddressPrefixes: []*string{to.Ptr(n.VNetCIDR)}},
			Subnets: []*armnetwork.Subnet{
				subnet("masters", n.ControlPlaneSubnetCIDR, c.nsgName("masters")),
				subnet("agents", n.AgentSubnetCIDR, c.nsgName("agents")),
			},
		},
	}
}

// natGatewayBody is the NAT gateway of kubewin's subnets, with the outbound address.
func (c *Cluster) natGatewayBody() armnetwork.NatGateway {
	return armnetwork.NatGateway{
		Location: to.Ptr(c.Spec.Location), Tags: c.tags(),
		SKU: &armnetwork.NatGatewaySKU{Name: to.Ptr(armnetwork.NatGatewaySKUNameStandard)},
		Properties: &armnetwork.NatGatewayPropertiesFormat{
			PublicIPAddresses: []*armnetwork.SubResource{{ID: to.Ptr(c.id(typePublicIP, c.outboundIPName()).String())}},
		},
	}
}

// outboundAddress reads the NAT gateway's public address.
func (c *Cluster) outboundAddress(ctx context.Context) (string, error) {
	r, err := c.Client.network.NewPublicIPAddressesClient().Get(ctx, c.Spec.ResourceGroup, c.outboundIPName(), nil)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", c.id(typePublicIP, c.outboundIPName()), err)
	}
	if r.Properties == nil || r.Properties.IPAddress == nil {
		return "", fmt.Errorf("public IP address %s has no address", c.id(typePublicIP, c.outboundIPName()))
	}
	return *r.Properties.IPAddress, nil
}

// checkOutbound refuses existing subnets without an outbound path before anything is made: the
// agents' subnet (the Linux agents' and the Windows pools') needs one (SubnetOutbound), and so does
// the masters' behind an internal API server (a public one's load balancer has outbound rules).
func (c *Cluster) checkOutbound(ctx context.Context) error {
	n := c.Spec.Network
	ids := []string{n.AgentSubnetID}
	if !n.PublicAPIServer {
		ids = append(ids, n.ControlPlaneSubnetID)
	}
	for _, id := range ids {
		if err := c.Client.SubnetOutbound(ctx, id); err != nil {
			return fmt.Errorf("%w (apt, pkgs.k8s.io and container images need it), or let kubewin make the cluster's network "+
				"(unset master_subnet_id and agent_subnet_id)", err)
		}
	}
	return nil
}

// ErrNoOutbound is SubnetOutbound's answer for a subnet without an outbound path.
var ErrNoOutbound = errors.New("no outbound path to the Internet")

// SubnetOutbound checks that the machines of a subnet reach the Internet without a public address
// of their own or a load balancer's outbound rules (kubewin's scale sets and VMs on a subnet it did
// not make have neither): through the subnet's NAT gateway, or a user route of 0.0.0.0/0 to a
// virtual appliance or a virtual network gateway (a firewall: AKS's outbound type
// userDefinedRouting, learn.microsoft.com/azure/aks/egress-outboundtype). Azure gives new subnets
// no default outbound access (https://learn.microsoft.com/azure/virtual-network/ip-services/default-outbound-access).
// The error says what to do.
func (c *Client) SubnetOutbound(ctx context.Context, id string) error {
	sn, err := c.subnet(ctx, id)
	if err != nil {
		return err
	}
	p := sn.Properties
	if p != nil && p.NatGateway != nil {
		return nil
	}
	if p != nil && p.RouteTable != nil && p.RouteTable.ID != nil {
		t, err := c.OpenRouteTable(*p.RouteTable.ID)
		if err != nil {
			return err
		}
		rt, err := t.get(ctx)
		if err != nil {
			return fmt.Errorf("subnet %s: %w", id, err)
		}
		if rt.Properties != nil && slices.ContainsFunc(rt.Properties.Routes, defaultRouteToGateway) {
			return nil
		}
	}
	return fmt.Errorf("subnet %s has %w: no NAT gateway, and no route of 0.0.0.0/0 to a virtual appliance or "+
		"gateway in its route table; Azure gives new subnets no default outbound access "+
		"(https://learn.microsoft.com/azure/virtual-network/ip-services/default-outbound-access). Associate a NAT gateway with it "+
		"(azurerm_subnet_nat_gateway_association), or route 0.0.0.0/0 to your firewall", id, ErrNoOutbound)
}

// defaultRouteToGateway reports whether a route sends 0.0.0.0/0 to a virtual appliance or a
// virtual network gateway.
func defaultRouteToGateway(r *armnetwork.Route) bool {
	p := r.Properties
	return p != nil && deref(p.AddressPrefix) == "0.0.0.0/0" && p.NextHopType != nil &&
		(*p.NextHopType == armnetwork.RouteNextHopTypeVirtualAppliance || *p.NextHopType == armnetwork.RouteNextHopTypeVirtualNetworkGateway)
}

// masterSubnet is the prefix of the masters' subnet.
func (c *Cluster) masterSubnet(ctx context.Context) (netip.Prefix, error) {
	if c.Spec.Network.ControlPlaneSubnetID == "" {
		return ipam.ParsePrefix(c.Spec.Network.ControlPlaneSubnetCIDR)
	}
	prefixes, err := c.Client.SubnetPrefixes(ctx, []string{c.Spec.Network.ControlPlaneSubnetID})
	if err != nil {
		return netip.Prefix{}, err
	}
	p := prefixes[c.Spec.Network.ControlPlaneSubnetID]
	if len(p) == 0 {
		return netip.Prefix{}, fmt.Errorf("subnet %s has no address prefix", c.Spec.Network.ControlPlaneSubnetID)
	}
	return p[0], nil
}

// outboundIPBody is the NAT gateway's public address: a static Standard address without zones,
// as the NAT gateway has none.
func (c *Cluster) outboundIPBody() armnetwork.PublicIPAddress {
	return armnetwork.PublicIPAddress{
		Location: to.Ptr(c.Spec.Location), Tags: c.tags(),
		SKU: &armnetwork.PublicIPAddressSKU{Name: to.Ptr(armnetwork.PublicIPAddressSKUNameStandard),
			Tier: to.Ptr(armnetwork.PublicIPAddressSKUTierRegional)},
		Properties: &armnetwork.PublicIPAddressPropertiesFormat{
			PublicIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic),
			PublicIPAddressVersion:   to.Ptr(armnetwork.IPVersionIPv4),
		},
	}
}

// publicIPBody is the API server's public address, in the control planes' zones.
func (c *Cluster) publicIPBody() armnetwork.PublicIPAddress {
	m := c.outboundIPBody()
	if z := c.Spec.ControlPlanes.Zones; len(z) > 0 {
		m.Zones = to.SliceOfPtrs(z...)
	}
	if c.Spec.Network.DNSPrefix != "" {
		m.Properties.DNSSettings = &armnetwork.PublicIPAddressDNSSettings{DomainNameLabel: to.Ptr(c.Spec.Network.DNSPrefix)}
	}
	return m
}

// publicAddress reads the API server's public address and its DNS name.
func (c *Cluster) publicAddress(ctx context.Context) (addr, fqdn string, err error) {
	id := c.id(typePublicIP, c.publicIPName())
	r, err := c.Client.network.NewPublicIPAddressesClient().Get(ctx, c.Spec.ResourceGroup, c.publicIPName(), nil)
	if err != nil {
		return "", "", fmt.Errorf("read %s: %w", id, err)
	}
	if r.Properties == nil || r.Properties.IPAddress == nil {
		return "", "", fmt.Errorf("public IP address %s has no address", id)
	}
	if d := r.Properties.DNSSettings; d != nil && d.Fqdn != nil {
		fqdn = *d.Fqdn
	}
	return *r.Properties.IPAddress, fqdn, nil
}

// loadBalancerBody is the API server's Standard load balancer: the frontend, the masters'
// pool with its probe and rule on 6443 and, with a public frontend, outbound rules for the
// masters' and agents' pools.
func (c *Cluster) loadBalancerBody(masterSubnet netip.Prefix) (armnetwork.LoadBalancer, error) {
	id := c.id(typeLoadBalancer, c.lbName())
	sub := func(kind, name string) *armnetwork.SubResource {
		return &armnetwork.SubResource{ID: to.Ptr(id.child(kind, name))}
	}
	frontend := &armnetwork.FrontendIPConfiguration{Name: to.Ptr("apiserver"), Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{}}
	if c.Spec.Network.PublicAPIServer {
		frontend.Properties.PublicIPAddress = &armnetwork.PublicIPAddress{ID: to.Ptr(c.id(typePublicIP, c.publicIPName()).String())}
	} else {
		a, err := frontendAddress(masterSubnet)
		if err != nil {
			return armnetwork.LoadBalancer{}, err
		}
		frontend.Properties.Subnet = &armnetwork.Subnet{ID: to.Ptr(c.ControlPlaneSubnetID())}
		frontend.Properties.PrivateIPAllocationMethod = to.Ptr(armnetwork.IPAllocationMethodStatic)
		frontend.Properties.PrivateIPAddress = to.Ptr(a.String())
		if z := c.Spec.ControlPlanes.Zones; len(z) > 0 {
			frontend.Zones = to.SliceOfPtrs(z...)
		}
	}
	port := to.Ptr[int32](kubeadmboot.APIServerPort)
	m := armnetwork.LoadBalancer{
		Location: to.Ptr(c.Spec.Location), Tags: c.tags(TagControlPlanes, strconv.Itoa(c.Spec.ControlPlanes.Count)),
		SKU: &armnetwork.LoadBalancerSKU{Name: to.Ptr(armnetwork.LoadBalancerSKUNameStandard), Tier: to.Ptr(armnetwork.LoadBalancerSKUTierRegional)},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{
			FrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{frontend},
			BackendAddressPools:      []*armnetwork.BackendAddressPool{{Name: to.Ptr("masters")}, {Name: to.Ptr("agents")}},
			Probes: []*armnetwork.Probe{{Name: to.Ptr("apiserver"), Properties: &armnetwork.ProbePropertiesFormat{
				Protocol: to.Ptr(armnetwork.ProbeProtocolTCP), Port: port, IntervalInSeconds: to.Ptr[int32](5), ProbeThreshold: to.Ptr[int32](2),
			}}},
			LoadBalancingRules: []*armnetwork.LoadBalancingRule{{Name: to.Ptr("apiserver"), Properties: &armnetwork.LoadBalancingRulePropertiesFormat{
				FrontendIPConfiguration: sub("frontendIPConfigurations", "apiserver"),
				BackendAddressPool:      sub("backendAddressPools", "masters"),
				Probe:                   sub("probes", "apiserver"),
				Protocol:                to.Ptr(armnetwork.TransportProtocolTCP), FrontendPort: port, BackendPort: port,
				IdleTimeoutInMinutes: to.Ptr[int32](30), EnableTCPReset: to.Ptr(true),
				// The outbound rules below give the masters their outbound connections.
				DisableOutboundSnat: to.Ptr(c.Spec.Network.PublicAPIServer),
			}}},
		},
	}
	if c.Spec.Network.PublicAPIServer {
		for _, pool := range []string{"masters", "agents"} {
			m.Properties.OutboundRules = append(m.Properties.OutboundRules, &armnetwork.OutboundRule{
				Name: to.Ptr("outbound-" + pool),
				Properties: &armnetwork.OutboundRulePropertiesFormat{
					FrontendIPConfigurations: []*armnetwork.SubResource{sub("frontendIPConfigurations", "apiserver")},
					BackendAddressPool:       sub("backendAddressPools", pool),
					Protocol:                 to.Ptr(armnetwork.LoadBalancerOutboundRuleProtocolAll),
					IdleTimeoutInMinutes:     to.Ptr[int32](30), EnableTCPReset: to.Ptr(true),
				},
			})
		}
	}
	return m, nil
}

// setControlPlaneCount records the number of control planes on the load balancer, through
// UpdateTags: a PUT of the load balancer as GET returns it fails once its pools have members
// (hashicorp/terraform-provider-azurerm#7691).
func (c *Cluster) setControlPlaneCount(ctx context.Context, n int) error {
	lbs := c.Client.network.NewLoadBalancersClient()
	r, err := lbs.Get(ctx, c.Spec.ResourceGroup, c.lbName(), nil)
	if err != nil {
		return fmt.Errorf("read %s: %w", c.ID(), err)
	}
	tags := map[string]*string{TagControlPlanes: to.Ptr(strconv.Itoa(n))}
	for k, v := range r.Tags {
		if k != TagControlPlanes {
			tags[k] = v
		}
	}
	if _, err := lbs.UpdateTags(ctx, c.Spec.ResourceGroup, c.lbName(), armnetwork.TagsObject{Tags: tags}, nil); err != nil {
		return fmt.Errorf("update the tags of %s: %w", c.ID(), err)
	}
	return nil
}

func (c *Cluster) pool(name string) *armnetwork.BackendAddressPool {
	return &armnetwork.BackendAddressPool{ID: to.Ptr(c.id(typeLoadBalancer, c.lbName()).child("backendAddressPools", name))}
}

// controlPlaneNIC is control plane i's network interface, with its static address addr (on create).
func (c *Cluster) controlPlaneNIC(i int, addr netip.Addr) object {
	return newSpec(c, interfaces, c.nicName(i), pure(func() armnetwork.Interface { return c.controlPlaneNICBody(addr) }))
}

// masterNICBody is a control plane's network interface with its static address, in the load
// balancer's masters' pool.
func (c *Cluster) controlPlaneNICBody(addr netip.Addr) armnetwork.Interface {
	return armnetwork.Interface{
		Location: to.Ptr(c.Spec.Location), Tags: c.tags(),
		Properties: &armnetwork.InterfacePropertiesFormat{
			IPConfigurations: []*armnetwork.InterfaceIPConfiguration{{Name: to.Ptr("ipconfig"),
				Properties: &armnetwork.InterfaceIPConfigurationPropertiesFormat{
					Primary: to.Ptr(true), Subnet: &armnetwork.Subnet{ID: to.Ptr(c.ControlPlaneSubnetID())},
					PrivateIPAllocationMethod:       to.Ptr(armnetwork.IPAllocationMethodStatic),
					PrivateIPAddress:                to.Ptr(addr.String()),
					LoadBalancerBackendAddressPools: []*armnetwork.BackendAddressPool{c.pool("masters")},
				}}},
		},
	}
}
