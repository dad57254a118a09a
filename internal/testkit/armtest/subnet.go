package armtest

import (
	"encoding/json"
	"net/http"
	"net/netip"
	"sort"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"
	"github.com/kubewin/kubewin/internal/ipam"
)

// Microsoft.Network subnets: their address ranges, route table and network security group, and
// the addresses they hand out.

type subnet struct {
	id     string
	name   string
	vnet   *virtualNetwork
	model  armnetwork.Subnet // as accepted
	prefix netip.Prefix
	table  string                // ID of the associated route table, "" when none
	nsg    string                // ID of the associated network security group, "" when none
	nat    string                // ID of the associated NAT gateway, "" when none
	used   map[netip.Addr]string // allocated address → ID of the IP configuration holding it
	state  armnetwork.ProvisioningState
}

func errSubnetInUse(sn *subnet, what string) *apiError {
	var holders []string
	for _, h := range sn.used {
		holders = append(holders, h)
	}
	sort.Strings(holders)
	return newError(http.StatusBadRequest, "InUseSubnetCannotBe"+strings.ToUpper(what[:1])+what[1:],
		"Subnet %s is in use by %s and cannot be %s. Delete the scale set instances using it first.", sn.id, strings.Join(holders, ", "), what)
}

// checkSubnet checks a subnet's properties against its network's address space and location and
// returns its prefix and route table ID; s.mu is held.
func (s *Server) checkSubnet(id, location string, space []netip.Prefix, p *armnetwork.SubnetPropertiesFormat) (netip.Prefix, string, *apiError) {
	var v string
	switch {
	case p != nil && p.AddressPrefix != nil:
		v = *p.AddressPrefix
	case p != nil && len(p.AddressPrefixes) == 1 && p.AddressPrefixes[0] != nil:
		v = *p.AddressPrefixes[0]
	default:
		return netip.Prefix{}, "", newError(http.StatusBadRequest, "InvalidRequestFormat",
			"Subnet %s needs properties.addressPrefix (one prefix), e.g. \"10.0.1.0/24\".", id)
	}
	prefix, e := parsePrefix(v, "properties.addressPrefix", id)
	if e != nil {
		return netip.Prefix{}, "", e
	}
	inside := false
	for _, sp := range space {
		inside = inside || (sp.Bits() <= prefix.Bits() && sp.Contains(prefix.Addr()))
	}
	if !inside {
		return netip.Prefix{}, "", newError(http.StatusBadRequest, "NetcfgSubnetRangeOutsideVnet",
			"Subnet '%s' is not valid because its IP address range %s is outside the IP address range of its virtual network.", id, prefix)
	}
	table := ""
	if p.RouteTable != nil {
		if p.RouteTable.ID == nil {
			return netip.Prefix{}, "", newError(http.StatusBadRequest, "InvalidRequestFormat", "properties.routeTable of subnet %s needs an id.", id)
		}
		rt := s.tables[strings.ToLower(*p.RouteTable.ID)]
		if rt == nil || !strings.EqualFold(rt.location, location) {
			return netip.Prefix{}, "", errReference(*p.RouteTable.ID, id)
		}
		table = rt.id
	}
	return prefix, table, nil
}

// subnetNSG returns the ID of the network security group a subnet names, which must exist; s.mu
// is held.
func (s *Server) subnetNSG(id string, p *armnetwork.SubnetPropertiesFormat) (string, *apiError) {
	if p == nil || p.NetworkSecurityGroup == nil {
		return "", nil
	}
	nsg := s.object(deref(p.NetworkSecurityGroup.ID), typeNSG)
	if nsg == nil {
		return "", errReference(deref(p.NetworkSecurityGroup.ID), id)
	}
	return nsg.id, nil
}

// subnetKind: subnets are written alone or with their virtual network, and deleted with it.
var subnetKind = kind{
	typ: typeSubnet, path: vnetPath + "/subnets/{}", version: NetworkAPIVersion, parent: &vnetKind,
	model: func() json.Unmarshaler { return &armnetwork.Subnet{} },
	find:  func(s *Server, id string) any { return found(s.findSubnet(id)) },
	write: func(s *Server, q *armRequest, m, _ any) (*change, *apiError) {
		return s.writeSubnet(q, *as[*armnetwork.Subnet](m))
	},
	view: func(_ *Server, r any, _ string) any { return subnetView(as[*subnet](r)) },
}

// writeSubnet creates or replaces a subnet of an existing virtual network; s.mu is held.
func (s *Server) writeSubnet(q *armRequest, m armnetwork.Subnet) (*change, *apiError) {
	id := q.resourceID()
	v := s.vnets[strings.ToLower(q.id(8))]
	prefix, table, e := s.checkSubnet(id, v.location, v.prefixes, m.Properties)
	if e != nil {
		return nil, e
	}
	nsg, e := s.subnetNSG(id, m.Properties)
	if e != nil {
		return nil, e
	}
	nat, e := s.subnetNAT(id, v.location, m.Properties)
	if e != nil {
		return nil, e
	}
	name := q.name(3)
	sn := v.subnets[strings.ToLower(name)]
	status := http.StatusOK
	if sn == nil {
		status = http.StatusCreated
		sn = &subnet{id: v.id + "/subnets/" + name, name: name, vnet: v, used: map[netip.Addr]string{}}
	} else if sn.prefix != prefix && len(sn.used) > 0 {
		return nil, errSubnetInUse(sn, "updated")
	}
	for _, other := range v.subnets {
		if other != sn && other.prefix.Overlaps(prefix) {
			return nil, newError(http.StatusBadRequest, "NetcfgSubnetRangesOverlap",
				"Subnet '%s' is not valid because its IP address range overlaps with that of an existing subnet '%s' in virtual network '%s'.", name,
				other.name, v.id)
		}
	}
	v.subnets[strings.ToLower(name)] = sn
	sn.model, sn.prefix, sn.table, sn.nsg, sn.nat, sn.state = m, prefix, table, nsg, nat, armnetwork.ProvisioningStateUpdating
	return &change{status: status, view: func() any { return subnetView(sn) }, commit: func(failure *apiError) func() {
		sn.state = settled(failure)
		return nil
	}}, nil
}

// findSubnet returns the subnet with the given ID; s.mu is held.
func (s *Server) findSubnet(id string) *subnet {
	i := strings.LastIndex(strings.ToLower(id), "/subnets/")
	if i < 0 {
		return nil
	}
	v := s.vnets[strings.ToLower(id[:i])]
	if v == nil {
		return nil
	}
	return v.subnets[strings.ToLower(id[i+len("/subnets/"):])]
}

// allocateIP gives the lowest free address of a subnet to the IP configuration owner. Azure
// reserves the network address, the next three and the broadcast address; s.mu is held.
func allocateIP(sn *subnet, owner string) (netip.Addr, *apiError) {
	size := uint64(1) << (32 - sn.prefix.Bits())
	for n := uint64(4); n+1 < size; n++ {
		a, err := ipam.Nth(sn.prefix, n)
		if err != nil {
			break
		}
		if _, taken := sn.used[a]; !taken {
			sn.used[a] = owner
			return a, nil
		}
	}
	return netip.Addr{}, newError(http.StatusBadRequest, "SubnetIsFull",
		"Subnet %s with address prefix %s does not have enough capacity for 1 IP addresses.", sn.id, sn.prefix)
}

// holdAddress takes a static address, or the lowest free one, of a subnet for owner; an
// address owner holds already (in the resource's previous version) stays its. s.mu is held.
func (s *Server) holdAddress(sn *subnet, method *armnetwork.IPAllocationMethod, addr *string, owner string) (netip.Addr, *apiError) {
	if method == nil || *method == armnetwork.IPAllocationMethodDynamic {
		for a, holder := range sn.used {
			if holder == owner {
				return a, nil
			}
		}
		return allocateIP(sn, owner)
	}
	a, err := netip.ParseAddr(deref(addr))
	if err != nil {
		return netip.Addr{}, newError(http.StatusBadRequest, "PrivateIPAddressRequired",
			"%s has static allocation and needs privateIPAddress (an address of %s), not %q.", owner, sn.prefix, deref(addr))
	}
	if !sn.prefix.Contains(a) {
		return netip.Addr{}, newError(http.StatusBadRequest, "PrivateIPAddressNotInSubnet",
			"Private static IP address %s does not belong to the range of subnet prefix %s.", a, sn.prefix)
	}
	if holder, taken := sn.used[a]; taken && holder != owner {
		return netip.Addr{}, newError(http.StatusBadRequest, "PrivateIPAddressInUse",
			"IP configuration %s is using the private IP address %s which is already allocated to resource %s.", owner, a, holder)
	}
	sn.used[a] = owner
	return a, nil
}

// parsePrefix parses a subnet or address-space prefix.
func parsePrefix(v, field, owner string) (netip.Prefix, *apiError) {
	p, err := ipam.ParsePrefix(v)
	if err != nil {
		return netip.Prefix{}, newError(http.StatusBadRequest, "InvalidCIDRNotation", "The address prefix %s of %s in resource %s is invalid: %v.", v,
			field, owner, err)
	}
	return p, nil
}

func subnetView(sn *subnet) armnetwork.Subnet {
	out := armnetwork.Subnet{ID: to.Ptr(sn.id), Name: to.Ptr(sn.name), Type: to.Ptr(typeSubnet), Properties: &armnetwork.SubnetPropertiesFormat{}}
	if sn.model.Properties != nil {
		out.Properties = clone(sn.model.Properties)
	}
	out.Properties.ProvisioningState = to.Ptr(sn.state)
	out.Properties.RouteTable, out.Properties.NetworkSecurityGroup, out.Properties.NatGateway = nil, nil, nil
	if sn.table != "" {
		out.Properties.RouteTable = &armnetwork.RouteTable{ID: to.Ptr(sn.table)}
	}
	if sn.nsg != "" {
		out.Properties.NetworkSecurityGroup = &armnetwork.SecurityGroup{ID: to.Ptr(sn.nsg)}
	}
	if sn.nat != "" {
		out.Properties.NatGateway = &armnetwork.SubResource{ID: to.Ptr(sn.nat)}
	}
	out.Properties.IPConfigurations = nil
	for _, owner := range sortedValues(sn.used) {
		out.Properties.IPConfigurations = append(out.Properties.IPConfigurations, &armnetwork.IPConfiguration{ID: to.Ptr(owner)})
	}
	return out
}

func sortedValues[K comparable](m map[K]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}
