package armtest

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"
)

// The network a machine's connections cross, as Azure carries them: the simulated machines ask
// Reach before each connection their bootstrap makes (Instance.Reach), and fail as they would
// when Azure would not carry it. Rules, each from Azure's documentation:
//
//   - Routing (https://learn.microsoft.com/azure/virtual-network/virtual-networks-udr-overview):
//     a destination takes the longest matching prefix of the source subnet's routes: the virtual
//     network's address space (VnetLocal), the routes of the subnet's route table (a user route
//     wins over a system route of the same prefix), 0.0.0.0/0 to Internet, and 10.0.0.0/8,
//     172.16.0.0/12, 192.168.0.0/16 and 100.64.0.0/10 to None, which drops the traffic.
//   - Outbound (https://learn.microsoft.com/azure/virtual-network/ip-services/default-outbound-access):
//     Internet traffic needs an explicit outbound path, in Azure's order of precedence: the
//     subnet's NAT gateway, the NIC's public IP address, a backend pool of a Standard load
//     balancer with an outbound rule (or a load-balancing rule on a public frontend that does not
//     disable outbound SNAT). Default outbound access is retired for new subnets and not given.
//     The traffic leaves with that path's public address as its source.
//   - Internal load balancer hairpin
//     (https://learn.microsoft.com/azure/load-balancer/components#limitations): "Outbound flow
//     from a backend VM to a frontend of an internal Load Balancer will fail." A machine in the
//     backend pool of a frontend's load-balancing rule cannot connect to that frontend.
//   - Network security groups (https://learn.microsoft.com/azure/virtual-network/network-security-groups-overview):
//     a connection to a public load balancer frontend arrives at the backends with its outbound
//     source address; their subnet's and NIC's security groups allow it only if an inbound rule
//     (by priority, then the default rules AllowVnetInBound, AllowAzureLoadBalancerInBound and
//     DenyAllInBound) allows that source. The source of traffic that left through an outbound
//     path is a public address, not in the VirtualNetwork service tag
//     (https://learn.microsoft.com/azure/virtual-network/service-tags-overview).
//
// Public addresses are the server's (127.64.0.0/10, publicip.go); loopback addresses outside
// them are the machine itself. Traffic within a virtual network passes security groups unchecked
// (AllowVnetInBound), as kubewin writes no deny rules.

// PackageMirror stands for the Internet hosts machines download from (the Ubuntu archive,
// pkgs.k8s.io, a release mirror): an address of RFC 5737's documentation range, which the
// system routes send to Internet.
var PackageMirror = netip.MustParseAddrPort("198.51.100.10:443")

// noneRoutes are Azure's system routes to next hop None.
var noneRoutes = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"), netip.MustParsePrefix("100.64.0.0/10"),
}

// endpoint is where a connection starts: an IP configuration of a NIC.
type endpoint struct {
	id       string // the machine or NIC
	subnet   *subnet
	addr     netip.Addr
	pools    []string // lower-case IDs of the backend pools it is in
	publicIP string   // ID of its public IP address, "" when none
	// instancePublicIP: a scale-set instance with a public IP address configuration, whose
	// address the server does not allocate.
	instancePublicIP bool
	nsg              string // ID of its NIC's security group, "" when none
}

// Reach reports whether the machine of a virtual machine or scale-set instance, or a network
// interface (by ARM ID), can open a TCP connection to to: nil, or why Azure would not carry it.
func (s *Server) Reach(from string, to netip.AddrPort) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	src, err := s.endpointOf(from)
	if err != nil {
		return err
	}
	dst := to.Addr()
	if dst == src.addr || (dst.IsLoopback() && !s.publicUsed[dst]) {
		return nil
	}
	if lb, f := s.frontendAt(dst); lb != nil {
		return s.reachFrontend(src, lb, f, to)
	}
	hop, prefix := s.route(src.subnet, dst)
	switch hop {
	case armnetwork.RouteNextHopTypeNone:
		return fmt.Errorf("%s cannot reach %s: subnet %s routes %s to None (Azure drops it): no route to the destination", src.id, to, src.subnet.id,
			prefix)
	case armnetwork.RouteNextHopTypeInternet:
		_, err := s.outbound(src)
		return err
	}
	return nil
}

// endpointOf finds the primary IP configuration of a virtual machine, a scale-set instance or a
// network interface; s.mu is held.
func (s *Server) endpointOf(id string) (endpoint, error) {
	key := strings.ToLower(id)
	if vm := s.vms[key]; vm != nil && len(vm.nics) > 0 {
		nic := s.objects[vm.nics[0]]
		if nic == nil {
			return endpoint{}, fmt.Errorf("virtual machine %s has no network interface", id)
		}
		e, err := s.nicEndpoint(nic)
		e.id = vm.id
		return e, err
	}
	if nic := s.object(id, typeNIC); nic != nil {
		return s.nicEndpoint(nic)
	}
	if i := strings.LastIndex(key, "/virtualmachines/"); i > 0 {
		n, _ := strconv.Atoi(key[i+len("/virtualmachines/"):])
		if ss := s.scaleSets[key[:i]]; ss != nil && ss.instances[n] != nil {
			return instanceEndpoint(ss.instances[n], id)
		}
	}
	return endpoint{}, fmt.Errorf("no virtual machine, scale-set instance or network interface %s", id)
}

func (s *Server) nicEndpoint(nic *netObject) (endpoint, error) {
	m := as[*armnetwork.Interface](nic.model)
	e := endpoint{id: nic.id}
	if m.Properties.NetworkSecurityGroup != nil {
		e.nsg = deref(m.Properties.NetworkSecurityGroup.ID)
	}
	for _, c := range m.Properties.IPConfigurations {
		if c.Properties.Primary == nil || !*c.Properties.Primary {
			continue
		}
		e.subnet = s.findSubnet(deref(c.Properties.Subnet.ID))
		e.addr, _ = netip.ParseAddr(deref(c.Properties.PrivateIPAddress))
		for _, p := range c.Properties.LoadBalancerBackendAddressPools {
			e.pools = append(e.pools, strings.ToLower(deref(p.ID)))
		}
		if c.Properties.PublicIPAddress != nil {
			e.publicIP = deref(c.Properties.PublicIPAddress.ID)
		}
	}
	if e.subnet == nil {
		return e, fmt.Errorf("network interface %s is in no subnet", nic.id)
	}
	return e, nil
}

// instanceEndpoint is a scale-set instance's primary IP configuration, with the pools and public
// IP address configuration of the model it was created with.
func instanceEndpoint(in *vmInstance, id string) (endpoint, error) {
	e := endpoint{id: id}
	for _, n := range in.nics {
		for _, c := range n.ipConfigs {
			if n.primary && c.primary {
				e.subnet, e.addr = c.subnet, c.addr
			}
		}
	}
	if e.subnet == nil {
		return e, fmt.Errorf("scale-set instance %s has no primary IP configuration", id)
	}
	for _, nc := range in.profile.NetworkProfile.NetworkInterfaceConfigurations {
		if nc.Properties.Primary == nil || !*nc.Properties.Primary {
			continue
		}
		if nc.Properties.NetworkSecurityGroup != nil {
			e.nsg = deref(nc.Properties.NetworkSecurityGroup.ID)
		}
		for _, c := range nc.Properties.IPConfigurations {
			for _, p := range c.Properties.LoadBalancerBackendAddressPools {
				e.pools = append(e.pools, strings.ToLower(deref(p.ID)))
			}
			e.instancePublicIP = e.instancePublicIP || c.Properties.PublicIPAddressConfiguration != nil
		}
	}
	return e, nil
}

// route is the next hop type of a destination from a subnet and the prefix that chose it; s.mu
// is held.
func (s *Server) route(sn *subnet, dst netip.Addr) (armnetwork.RouteNextHopType, netip.Prefix) {
	best, hop := netip.MustParsePrefix("0.0.0.0/0"), armnetwork.RouteNextHopTypeInternet
	consider := func(p netip.Prefix, h armnetwork.RouteNextHopType, user bool) {
		if p.Contains(dst) && (p.Bits() > best.Bits() || (user && p.Bits() == best.Bits())) {
			best, hop = p, h
		}
	}
	for _, p := range noneRoutes {
		consider(p, armnetwork.RouteNextHopTypeNone, false)
	}
	for _, p := range sn.vnet.prefixes {
		consider(p, armnetwork.RouteNextHopTypeVnetLocal, false)
	}
	if rt := s.tables[strings.ToLower(sn.table)]; rt != nil {
		for _, r := range rt.routes {
			if p, err := netip.ParsePrefix(deref(r.model.Properties.AddressPrefix)); err == nil && r.model.Properties.NextHopType != nil {
				consider(p, *r.model.Properties.NextHopType, true)
			}
		}
	}
	return hop, best
}

// outbound is the public address a source's Internet traffic leaves with; s.mu is held.
func (s *Server) outbound(src endpoint) (netip.Addr, error) {
	if nat := s.object(src.subnet.nat, typeNatGateway); nat != nil {
		for _, ref := range as[*armnetwork.NatGateway](nat.model).Properties.PublicIPAddresses {
			if pip := s.object(deref(ref.ID), typePublicIP); pip != nil {
				return pip.address, nil
			}
		}
	}
	if pip := s.object(src.publicIP, typePublicIP); pip != nil {
		return pip.address, nil
	}
	if src.instancePublicIP {
		return netip.Addr{}, nil
	}
	for _, o := range s.objects {
		if o.typ != typeLoadBalancer {
			continue
		}
		p := as[*armnetwork.LoadBalancer](o.model).Properties
		for _, r := range p.OutboundRules {
			if slices.Contains(src.pools, strings.ToLower(deref(r.Properties.BackendAddressPool.ID))) && len(r.Properties.FrontendIPConfigurations) > 0 {
				if a := s.frontendPublicAddress(p, deref(r.Properties.FrontendIPConfigurations[0].ID)); a.IsValid() {
					return a, nil
				}
			}
		}
		for _, r := range p.LoadBalancingRules {
			rp := r.Properties
			if rp.BackendAddressPool == nil || (rp.DisableOutboundSnat != nil && *rp.DisableOutboundSnat) {
				continue
			}
			if slices.Contains(src.pools, strings.ToLower(deref(rp.BackendAddressPool.ID))) {
				if a := s.frontendPublicAddress(p, deref(rp.FrontendIPConfiguration.ID)); a.IsValid() {
					return a, nil
				}
			}
		}
	}
	return netip.Addr{}, fmt.Errorf("%s has no outbound path to the Internet: subnet %s has no NAT gateway, the machine no public IP address, "+
		"and it is in no backend pool of a load balancer with an outbound rule; Azure gives new subnets no default outbound access "+
		"(https://learn.microsoft.com/azure/virtual-network/ip-services/default-outbound-access)", src.id, src.subnet.id)
}

// frontendPublicAddress is the public address of a load balancer's frontend, if it has one; s.mu
// is held.
func (s *Server) frontendPublicAddress(p *armnetwork.LoadBalancerPropertiesFormat, frontendID string) netip.Addr {
	for _, f := range p.FrontendIPConfigurations {
		if strings.EqualFold(deref(f.ID), frontendID) && f.Properties.PublicIPAddress != nil {
			if pip := s.object(deref(f.Properties.PublicIPAddress.ID), typePublicIP); pip != nil {
				return pip.address
			}
		}
	}
	return netip.Addr{}
}

// frontendAt finds the load balancer frontend with an address; s.mu is held.
func (s *Server) frontendAt(a netip.Addr) (*netObject, *armnetwork.FrontendIPConfiguration) {
	for _, o := range s.objects {
		if o.typ != typeLoadBalancer {
			continue
		}
		p := as[*armnetwork.LoadBalancer](o.model).Properties
		for _, f := range p.FrontendIPConfigurations {
			if f.Properties.PrivateIPAddress != nil && f.Properties.Subnet != nil && deref(f.Properties.PrivateIPAddress) == a.String() {
				return o, f
			}
			if f.Properties.PublicIPAddress != nil && s.frontendPublicAddress(p, deref(f.ID)) == a {
				return o, f
			}
		}
	}
	return nil, nil
}

// reachFrontend is a connection to a load balancer frontend; s.mu is held.
func (s *Server) reachFrontend(src endpoint, lb *netObject, f *armnetwork.FrontendIPConfiguration, to netip.AddrPort) error {
	var rule *armnetwork.LoadBalancingRule
	for _, r := range as[*armnetwork.LoadBalancer](lb.model).Properties.LoadBalancingRules {
		rp := r.Properties
		if strings.EqualFold(deref(rp.FrontendIPConfiguration.ID), deref(f.ID)) && rp.FrontendPort != nil && int(*rp.FrontendPort) == int(to.Port()) {
			rule = r
		}
	}
	if rule == nil || rule.Properties.BackendAddressPool == nil {
		return fmt.Errorf("%s cannot reach %s: load balancer %s has no load-balancing rule for port %d of frontend %s", src.id, to, lb.id, to.Port(),
			deref(f.Name))
	}
	pool := strings.ToLower(deref(rule.Properties.BackendAddressPool.ID))
	source := src.addr
	if f.Properties.PublicIPAddress == nil {
		if slices.Contains(src.pools, pool) {
			return fmt.Errorf("%s cannot reach %s: it is in backend pool %s of that internal load balancer frontend, and a backend's flow to its own "+
				"internal load balancer's frontend fails (https://learn.microsoft.com/azure/load-balancer/components#limitations)", src.id, to, pool)
		}
	} else {
		a, err := s.outbound(src)
		if err != nil {
			return err
		}
		source = a
	}
	for _, b := range s.poolEndpoints(pool) {
		if s.allows(b.subnet.nsg, source, b.subnet.vnet, to.Port()) && s.allows(b.nsg, source, b.subnet.vnet, to.Port()) {
			return nil
		}
	}
	return fmt.Errorf("%s cannot reach %s: it arrives from %s, which no backend's network security group lets in on port %d "+
		"(the VirtualNetwork service tag does not hold an outbound public address)", src.id, to, source, to.Port())
}

// poolEndpoints are the endpoints in a backend pool: network interfaces and scale-set instances;
// s.mu is held.
func (s *Server) poolEndpoints(pool string) []endpoint {
	var out []endpoint
	for _, o := range s.objects {
		if o.typ == typeNIC {
			if e, err := s.nicEndpoint(o); err == nil && slices.Contains(e.pools, pool) {
				out = append(out, e)
			}
		}
	}
	for _, ss := range s.scaleSets {
		for _, in := range ss.instances {
			if e, err := instanceEndpoint(in, in.resourceID(ss)); err == nil && slices.Contains(e.pools, pool) {
				out = append(out, e)
			}
		}
	}
	return out
}

// allows reports whether a network security group (none: "") lets a TCP connection from source
// in on port; s.mu is held.
func (s *Server) allows(nsgID string, source netip.Addr, v *virtualNetwork, port uint16) bool {
	nsg := s.object(nsgID, typeNSG)
	if nsg == nil {
		return true
	}
	inVNet := slices.ContainsFunc(v.prefixes, func(p netip.Prefix) bool { return p.Contains(source) })
	rules := slices.Clone(as[*armnetwork.SecurityGroup](nsg.model).Properties.SecurityRules)
	slices.SortFunc(rules, func(a, b *armnetwork.SecurityRule) int { return int(*a.Properties.Priority - *b.Properties.Priority) })
	for _, r := range rules {
		p := r.Properties
		if *p.Direction != armnetwork.SecurityRuleDirectionInbound ||
			(*p.Protocol != armnetwork.SecurityRuleProtocolTCP && *p.Protocol != armnetwork.SecurityRuleProtocolAsterisk) ||
			!portMatches(p.DestinationPortRange, p.DestinationPortRanges, port) ||
			!sourceMatches(p.SourceAddressPrefix, p.SourceAddressPrefixes, source, inVNet) {
			continue
		}
		return *p.Access == armnetwork.SecurityRuleAccessAllow
	}
	return inVNet // AllowVnetInBound, then DenyAllInBound
}

func portMatches(one *string, many []*string, port uint16) bool {
	ranges := many
	if one != nil {
		ranges = append(ranges, one)
	}
	for _, r := range ranges {
		lo, hi, found := strings.Cut(deref(r), "-")
		if !found {
			hi = lo
		}
		a, errA := strconv.Atoi(lo)
		b, errB := strconv.Atoi(hi)
		if deref(r) == "*" || (errA == nil && errB == nil && a <= int(port) && int(port) <= b) {
			return true
		}
	}
	return false
}

func sourceMatches(one *string, many []*string, source netip.Addr, inVNet bool) bool {
	prefixes := many
	if one != nil {
		prefixes = append(prefixes, one)
	}
	for _, v := range prefixes {
		switch p := deref(v); {
		case p == "*" || strings.EqualFold(p, "Any"):
			return true
		case strings.EqualFold(p, "VirtualNetwork"):
			if inVNet {
				return true
			}
		case strings.EqualFold(p, "Internet"):
			if !inVNet {
				return true
			}
		default:
			if pfx, err := netip.ParsePrefix(p); err == nil && pfx.Contains(source) {
				return true
			}
			if a, err := netip.ParseAddr(p); err == nil && a == source {
				return true
			}
		}
	}
	return false
}
