package azure

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/kubewin/kubewin/internal/ipam"
	"github.com/kubewin/kubewin/internal/kubeadmboot"
)

// ensure creates a resource unless it exists already, which must then be the cluster's: get
// returns its tags, or ARM's 404.
func (c *Cluster) ensure(ctx context.Context, id string, get func() (map[string]*string, error), put func() error) error {
	tags, err := get()
	if err == nil {
		return c.ours(id, tags)
	}
	if !notFound(err) {
		return fmt.Errorf("read %s: %w", id, err)
	}
	tflog.Info(ctx, "creating", map[string]any{"resource": id})
	if err := put(); err != nil {
		return fmt.Errorf("create %s: %w", id, err)
	}
	return nil
}

// remove deletes a resource of the cluster; one that is gone, or is not the cluster's, is left.
func (c *Cluster) remove(ctx context.Context, id string, get func() (map[string]*string, error), del func() error) error {
	tags, err := get()
	if notFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", id, err)
	}
	if c.ours(id, tags) != nil {
		tflog.Warn(ctx, "not deleting a resource the cluster did not create", map[string]any{"resource": id})
		return nil
	}
	tflog.Info(ctx, "deleting", map[string]any{"resource": id})
	if err := del(); err != nil && !notFound(err) {
		return fmt.Errorf("delete %s: %w", id, err)
	}
	return nil
}

func (c *Cluster) ensureNSG(ctx context.Context, role string) error {
	client := c.Client.network.NewSecurityGroupsClient()
	name := c.nsgName(role)
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
		case 1:
			rule.SourceAddressPrefix = to.Ptr(p[0])
		default:
			rule.SourceAddressPrefixes = to.SliceOfPtrs(p...)
		}
		m.Properties.SecurityRules = []*armnetwork.SecurityRule{{Name: to.Ptr("apiserver"), Properties: rule}}
	}
	return c.ensure(ctx, c.rid("Microsoft.Network", "networkSecurityGroups", name), func() (map[string]*string, error) {
		r, err := client.Get(ctx, c.Spec.ResourceGroup, name, nil)
		return r.Tags, err
	}, func() error {
		p, err := client.BeginCreateOrUpdate(ctx, c.Spec.ResourceGroup, name, m, nil)
		_, err = wait(ctx, c.Client, p, err)
		return err
	})
}

func (c *Cluster) ensureRouteTable(ctx context.Context) error {
	client := c.Client.network.NewRouteTablesClient()
	name := c.routeTableName()
	return c.ensure(ctx, c.RouteTableID(), func() (map[string]*string, error) {
		r, err := client.Get(ctx, c.Spec.ResourceGroup, name, nil)
		return r.Tags, err
	}, func() error {
		// Azure's own routes (BGP) are not wanted between the nodes' pods: only kubewin's.
		m := armnetwork.RouteTable{Location: to.Ptr(c.Spec.Location), Tags: c.tags(), Properties: &armnetwork.RouteTablePropertiesFormat{DisableBgpRoutePropagation: to.Ptr(true)}}
		p, err := client.BeginCreateOrUpdate(ctx, c.Spec.ResourceGroup, name, m, nil)
		_, err = wait(ctx, c.Client, p, err)
		return err
	})
}

func (c *Cluster) ensureVNet(ctx context.Context) error {
	if c.VNetID() == "" {
		return nil
	}
	client := c.Client.network.NewVirtualNetworksClient()
	n := c.Spec.Network
	subnet := func(name, prefix, nsg string, table bool) *armnetwork.Subnet {
		sn := &armnetwork.Subnet{Name: to.Ptr(name), Properties: &armnetwork.SubnetPropertiesFormat{
			AddressPrefix:        to.Ptr(prefix),
			NetworkSecurityGroup: &armnetwork.SecurityGroup{ID: to.Ptr(c.rid("Microsoft.Network", "networkSecurityGroups", nsg))},
		}}
		if table {
			sn.Properties.RouteTable = &armnetwork.RouteTable{ID: to.Ptr(c.RouteTableID())}
		}
		return sn
	}
	m := armnetwork.VirtualNetwork{
		Location: to.Ptr(c.Spec.Location), Tags: c.tags(),
		Properties: &armnetwork.VirtualNetworkPropertiesFormat{
			AddressSpace: &armnetwork.AddressSpace{AddressPrefixes: []*string{to.Ptr(n.VNetCIDR)}},
			Subnets: []*armnetwork.Subnet{
				subnet("masters", n.MasterSubnetCIDR, c.nsgName("masters"), false),
				subnet("agents", n.AgentSubnetCIDR, c.nsgName("agents"), true),
			},
		},
	}
	return c.ensure(ctx, c.VNetID(), func() (map[string]*string, error) {
		r, err := client.Get(ctx, c.Spec.ResourceGroup, c.vnetName(), nil)
		return r.Tags, err
	}, func() error {
		p, err := client.BeginCreateOrUpdate(ctx, c.Spec.ResourceGroup, c.vnetName(), m, nil)
		_, err = wait(ctx, c.Client, p, err)
		return err
	})
}

// masterSubnet is the prefix of the masters' subnet.
func (c *Cluster) masterSubnet(ctx context.Context) (netip.Prefix, error) {
	if c.Spec.Network.MasterSubnetID == "" {
		return ipam.ParsePrefix(c.Spec.Network.MasterSubnetCIDR)
	}
	prefixes, err := c.Client.SubnetPrefixes(ctx, []string{c.Spec.Network.MasterSubnetID})
	if err != nil {
		return netip.Prefix{}, err
	}
	p := prefixes[c.Spec.Network.MasterSubnetID]
	if len(p) == 0 {
		return netip.Prefix{}, fmt.Errorf("subnet %s has no address prefix", c.Spec.Network.MasterSubnetID)
	}
	return p[0], nil
}

// ensurePublicIP makes the API server's public address and returns it and its DNS name.
func (c *Cluster) ensurePublicIP(ctx context.Context) (addr, fqdn string, err error) {
	client := c.Client.network.NewPublicIPAddressesClient()
	name := c.publicIPName()
	m := armnetwork.PublicIPAddress{
		Location: to.Ptr(c.Spec.Location), Tags: c.tags(),
		SKU: &armnetwork.PublicIPAddressSKU{Name: to.Ptr(armnetwork.PublicIPAddressSKUNameStandard), Tier: to.Ptr(armnetwork.PublicIPAddressSKUTierRegional)},
		Properties: &armnetwork.PublicIPAddressPropertiesFormat{
			PublicIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic),
			PublicIPAddressVersion:   to.Ptr(armnetwork.IPVersionIPv4),
		},
	}
	if z := c.Spec.Masters.Zones; len(z) > 0 {
		m.Zones = to.SliceOfPtrs(z...)
	}
	if c.Spec.Network.DNSPrefix != "" {
		m.Properties.DNSSettings = &armnetwork.PublicIPAddressDNSSettings{DomainNameLabel: to.Ptr(c.Spec.Network.DNSPrefix)}
	}
	id := c.rid("Microsoft.Network", "publicIPAddresses", name)
	if err := c.ensure(ctx, id, func() (map[string]*string, error) {
		r, err := client.Get(ctx, c.Spec.ResourceGroup, name, nil)
		return r.Tags, err
	}, func() error {
		p, err := client.BeginCreateOrUpdate(ctx, c.Spec.ResourceGroup, name, m, nil)
		_, err = wait(ctx, c.Client, p, err)
		return err
	}); err != nil {
		return "", "", err
	}
	r, err := client.Get(ctx, c.Spec.ResourceGroup, name, nil)
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

// ensureLoadBalancer makes the API server's Standard load balancer: the frontend, the masters'
// pool with its probe and rule on 6443 and, with a public frontend, outbound rules for the
// masters' and agents' pools.
func (c *Cluster) ensureLoadBalancer(ctx context.Context, masterSubnet netip.Prefix) error {
	client := c.Client.network.NewLoadBalancersClient()
	id := c.ID()
	sub := func(kind, name string) *armnetwork.SubResource {
		return &armnetwork.SubResource{ID: to.Ptr(id + "/" + kind + "/" + name)}
	}
	frontend := &armnetwork.FrontendIPConfiguration{Name: to.Ptr("apiserver"), Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{}}
	if c.Spec.Network.PublicAPIServer {
		frontend.Properties.PublicIPAddress = &armnetwork.PublicIPAddress{ID: to.Ptr(c.rid("Microsoft.Network", "publicIPAddresses", c.publicIPName()))}
	} else {
		a, err := frontendAddress(masterSubnet)
		if err != nil {
			return err
		}
		frontend.Properties.Subnet = &armnetwork.Subnet{ID: to.Ptr(c.MasterSubnetID())}
		frontend.Properties.PrivateIPAllocationMethod = to.Ptr(armnetwork.IPAllocationMethodStatic)
		frontend.Properties.PrivateIPAddress = to.Ptr(a.String())
		if z := c.Spec.Masters.Zones; len(z) > 0 {
			frontend.Zones = to.SliceOfPtrs(z...)
		}
	}
	port := to.Ptr[int32](kubeadmboot.APIServerPort)
	m := armnetwork.LoadBalancer{
		Location: to.Ptr(c.Spec.Location), Tags: c.tags(TagMasters, strconv.Itoa(c.Spec.Masters.Count)),
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
			m.Properties.OutboundRules = append(m.Properties.OutboundRules, &armnetwork.OutboundRule{Name: to.Ptr("outbound-" + pool), Properties: &armnetwork.OutboundRulePropertiesFormat{
				FrontendIPConfigurations: []*armnetwork.SubResource{sub("frontendIPConfigurations", "apiserver")},
				BackendAddressPool:       sub("backendAddressPools", pool),
				Protocol:                 to.Ptr(armnetwork.LoadBalancerOutboundRuleProtocolAll),
				IdleTimeoutInMinutes:     to.Ptr[int32](30), EnableTCPReset: to.Ptr(true),
			}})
		}
	}
	return c.ensure(ctx, id, func() (map[string]*string, error) {
		r, err := client.Get(ctx, c.Spec.ResourceGroup, c.lbName(), nil)
		return r.Tags, err
	}, func() error { return c.putLoadBalancer(ctx, m) })
}

func (c *Cluster) putLoadBalancer(ctx context.Context, m armnetwork.LoadBalancer) error {
	p, err := c.Client.network.NewLoadBalancersClient().BeginCreateOrUpdate(ctx, c.Spec.ResourceGroup, c.lbName(), m, nil)
	_, err = wait(ctx, c.Client, p, err)
	return err
}

// setMasterCount records the number of control planes on the load balancer.
func (c *Cluster) setMasterCount(ctx context.Context, n int) error {
	r, err := c.Client.network.NewLoadBalancersClient().Get(ctx, c.Spec.ResourceGroup, c.lbName(), nil)
	if err != nil {
		return fmt.Errorf("read %s: %w", c.ID(), err)
	}
	m := r.LoadBalancer
	if m.Tags == nil {
		m.Tags = map[string]*string{}
	}
	m.Tags[TagMasters] = to.Ptr(strconv.Itoa(n))
	return c.putLoadBalancer(ctx, m)
}

func (c *Cluster) pool(name string) *armnetwork.BackendAddressPool {
	return &armnetwork.BackendAddressPool{ID: to.Ptr(c.ID() + "/backendAddressPools/" + name)}
}

// ensureMasterNIC makes control plane i's network interface, with its static address, in the
// load balancer's masters' pool.
func (c *Cluster) ensureMasterNIC(ctx context.Context, i int, addr netip.Addr) error {
	client := c.Client.network.NewInterfacesClient()
	name := c.nicName(i)
	m := armnetwork.Interface{
		Location: to.Ptr(c.Spec.Location), Tags: c.tags(),
		Properties: &armnetwork.InterfacePropertiesFormat{
			IPConfigurations: []*armnetwork.InterfaceIPConfiguration{{Name: to.Ptr("ipconfig"), Properties: &armnetwork.InterfaceIPConfigurationPropertiesFormat{
				Primary: to.Ptr(true), Subnet: &armnetwork.Subnet{ID: to.Ptr(c.MasterSubnetID())},
				PrivateIPAllocationMethod:       to.Ptr(armnetwork.IPAllocationMethodStatic),
				PrivateIPAddress:                to.Ptr(addr.String()),
				LoadBalancerBackendAddressPools: []*armnetwork.BackendAddressPool{c.pool("masters")},
			}}},
		},
	}
	return c.ensure(ctx, c.rid("Microsoft.Network", "networkInterfaces", name), func() (map[string]*string, error) {
		r, err := client.Get(ctx, c.Spec.ResourceGroup, name, nil)
		return r.Tags, err
	}, func() error {
		p, err := client.BeginCreateOrUpdate(ctx, c.Spec.ResourceGroup, name, m, nil)
		_, err = wait(ctx, c.Client, p, err)
		return err
	})
}

// deleteNetwork removes the cluster's network resources, dependents first.
func (c *Cluster) deleteNetwork(ctx context.Context, masters int) error {
	nics := c.Client.network.NewInterfacesClient()
	for i := range masters {
		name := c.nicName(i)
		if err := c.remove(ctx, c.rid("Microsoft.Network", "networkInterfaces", name), func() (map[string]*string, error) {
			r, err := nics.Get(ctx, c.Spec.ResourceGroup, name, nil)
			return r.Tags, err
		}, func() error {
			p, err := nics.BeginDelete(ctx, c.Spec.ResourceGroup, name, nil)
			_, err = wait(ctx, c.Client, p, err)
			return err
		}); err != nil {
			return err
		}
	}
	lbs := c.Client.network.NewLoadBalancersClient()
	if err := c.remove(ctx, c.ID(), func() (map[string]*string, error) {
		r, err := lbs.Get(ctx, c.Spec.ResourceGroup, c.lbName(), nil)
		return r.Tags, err
	}, func() error {
		p, err := lbs.BeginDelete(ctx, c.Spec.ResourceGroup, c.lbName(), nil)
		_, err = wait(ctx, c.Client, p, err)
		return err
	}); err != nil {
		return err
	}
	pips := c.Client.network.NewPublicIPAddressesClient()
	if err := c.remove(ctx, c.rid("Microsoft.Network", "publicIPAddresses", c.publicIPName()), func() (map[string]*string, error) {
		r, err := pips.Get(ctx, c.Spec.ResourceGroup, c.publicIPName(), nil)
		return r.Tags, err
	}, func() error {
		p, err := pips.BeginDelete(ctx, c.Spec.ResourceGroup, c.publicIPName(), nil)
		_, err = wait(ctx, c.Client, p, err)
		return err
	}); err != nil {
		return err
	}
	if c.VNetID() != "" {
		vnets := c.Client.network.NewVirtualNetworksClient()
		if err := c.remove(ctx, c.VNetID(), func() (map[string]*string, error) {
			r, err := vnets.Get(ctx, c.Spec.ResourceGroup, c.vnetName(), nil)
			return r.Tags, err
		}, func() error {
			p, err := vnets.BeginDelete(ctx, c.Spec.ResourceGroup, c.vnetName(), nil)
			_, err = wait(ctx, c.Client, p, err)
			return err
		}); err != nil {
			return err
		}
	}
	tables := c.Client.network.NewRouteTablesClient()
	if err := c.remove(ctx, c.RouteTableID(), func() (map[string]*string, error) {
		r, err := tables.Get(ctx, c.Spec.ResourceGroup, c.routeTableName(), nil)
		return r.Tags, err
	}, func() error {
		p, err := tables.BeginDelete(ctx, c.Spec.ResourceGroup, c.routeTableName(), nil)
		_, err = wait(ctx, c.Client, p, err)
		return err
	}); err != nil {
		return err
	}
	nsgs := c.Client.network.NewSecurityGroupsClient()
	for _, role := range []string{"masters", "agents"} {
		name := c.nsgName(role)
		if err := c.remove(ctx, c.rid("Microsoft.Network", "networkSecurityGroups", name), func() (map[string]*string, error) {
			r, err := nsgs.Get(ctx, c.Spec.ResourceGroup, name, nil)
			return r.Tags, err
		}, func() error {
			p, err := nsgs.BeginDelete(ctx, c.Spec.ResourceGroup, name, nil)
			_, err = wait(ctx, c.Client, p, err)
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}
