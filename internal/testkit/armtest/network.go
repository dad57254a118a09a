package armtest

import (
	"fmt"
	"net/http"
	"net/netip"
	"sort"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"
	"github.com/kubewin/kubewin/internal/ipam"
)

// Microsoft.Network: virtual networks and subnets (whose addresses scale-set NICs get), route
// tables and routes, and the NIC list of a scale set.

type virtualNetwork struct {
	id       string
	location string
	model    armnetwork.VirtualNetwork // as accepted, subnets left out
	prefixes []netip.Prefix
	subnets  map[string]*subnet // by lower-case name
	state    armnetwork.ProvisioningState
}

type subnet struct {
	id     string
	name   string
	vnet   *virtualNetwork
	model  armnetwork.Subnet // as accepted
	prefix netip.Prefix
	table  string                // ID of the associated route table, "" when none
	nsg    string                // ID of the associated network security group, "" when none
	used   map[netip.Addr]string // allocated address → ID of the IP configuration holding it
	state  armnetwork.ProvisioningState
}

type routeTable struct {
	id       string
	location string
	model    armnetwork.RouteTable // as accepted, routes left out
	routes   map[string]*route     // by lower-case name
	state    armnetwork.ProvisioningState
}

type route struct {
	id    string
	name  string
	model armnetwork.Route
	state armnetwork.ProvisioningState
}

// errParentNotFound is ARM's answer to a write on a child of a missing resource.
func errParentNotFound(childType, parentID string) *apiError {
	return newError(http.StatusNotFound, "ParentResourceNotFound",
		"Failed to perform 'write' on resource(s) of type '%s', because the parent resource '%s' could not be found.", childType, parentID)
}

func errResourceNotFound(typ, name, group string) *apiError {
	return newError(http.StatusNotFound, "ResourceNotFound",
		"The Resource '%s/%s' under resource group '%s' was not found. For more details please go to https://aka.ms/ARMResourceNotFoundFix", typ, name, group)
}

// errReference is the answer to a reference to a missing resource or one in another region.
func errReference(referenced, by string) *apiError {
	return newError(http.StatusBadRequest, "InvalidResourceReference",
		"Resource %s referenced by resource %s was not found. Please make sure that the referenced resource exists, and that both resources are in the same region.", referenced, by)
}

// parsePrefix parses a subnet or address-space prefix.
func parsePrefix(v, field, owner string) (netip.Prefix, *apiError) {
	p, err := ipam.ParsePrefix(v)
	if err != nil {
		return netip.Prefix{}, newError(http.StatusBadRequest, "InvalidCIDRNotation", "The address prefix %s of %s in resource %s is invalid: %v.", v, field, owner, err)
	}
	return p, nil
}

// VirtualNetwork describes a virtual network for AddVirtualNetwork.
type VirtualNetwork struct {
	ResourceGroup   string
	Name            string
	AddressPrefixes []string          // the address space, e.g. ["10.0.0.0/16"]
	Subnets         map[string]string // subnet name → address prefix, e.g. {"nodes": "10.0.1.0/24"}
}

// AddVirtualNetwork creates a virtual network (and its resource group when missing) in the
// server's location, as if it had been deployed before the test, and returns its ID. A subnet's
// ID is the network's ID followed by /subnets/<name>.
func (s *Server) AddVirtualNetwork(v VirtualNetwork) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addGroup(v.ResourceGroup)
	id := s.ResourceGroupID(s.groups[strings.ToLower(v.ResourceGroup)]) + "/providers/Microsoft.Network/virtualNetworks/" + v.Name
	m := armnetwork.VirtualNetwork{
		Location: to.Ptr(s.opts.Location),
		Properties: &armnetwork.VirtualNetworkPropertiesFormat{
			AddressSpace: &armnetwork.AddressSpace{AddressPrefixes: to.SliceOfPtrs(v.AddressPrefixes...)},
		},
	}
	for _, name := range sortedKeys(v.Subnets) {
		m.Properties.Subnets = append(m.Properties.Subnets, &armnetwork.Subnet{
			Name: to.Ptr(name), Properties: &armnetwork.SubnetPropertiesFormat{AddressPrefix: to.Ptr(v.Subnets[name])},
		})
	}
	apply, e := s.prepareVirtualNetwork(id, m)
	if e != nil {
		return "", e
	}
	apply(armnetwork.ProvisioningStateSucceeded)
	return id, nil
}

// prepareVirtualNetwork checks a virtual network PUT and returns the function that applies it with
// a provisioning state; s.mu is held.
func (s *Server) prepareVirtualNetwork(id string, m armnetwork.VirtualNetwork) (func(armnetwork.ProvisioningState), *apiError) {
	if m.Location == nil || *m.Location == "" {
		return nil, newError(http.StatusBadRequest, "LocationRequired", "The location property is required for this definition.")
	}
	if m.Properties == nil || m.Properties.AddressSpace == nil || len(m.Properties.AddressSpace.AddressPrefixes) == 0 {
		return nil, newError(http.StatusBadRequest, "InvalidRequestFormat",
			"Virtual network %s needs properties.addressSpace.addressPrefixes, e.g. [\"10.0.0.0/16\"].", id)
	}
	var space []netip.Prefix
	for _, p := range m.Properties.AddressSpace.AddressPrefixes {
		if p == nil {
			return nil, newError(http.StatusBadRequest, "InvalidRequestFormat", "Virtual network %s has a null address prefix.", id)
		}
		pfx, e := parsePrefix(*p, "properties.addressSpace.addressPrefixes", id)
		if e != nil {
			return nil, e
		}
		space = append(space, pfx)
	}
	old := s.vnets[strings.ToLower(id)]
	type planned struct {
		name   string
		model  armnetwork.Subnet
		prefix netip.Prefix
		table  string
		nsg    string
		keep   *subnet
	}
	var plan []planned
	seen := map[string]bool{}
	for i, sm := range m.Properties.Subnets {
		if sm == nil || sm.Name == nil || *sm.Name == "" {
			return nil, newError(http.StatusBadRequest, "InvalidRequestFormat", "Subnet %d of virtual network %s has no name.", i, id)
		}
		name := *sm.Name
		if seen[strings.ToLower(name)] {
			return nil, newError(http.StatusBadRequest, "InvalidRequestFormat", "Virtual network %s lists subnet %q twice.", id, name)
		}
		seen[strings.ToLower(name)] = true
		sid := id + "/subnets/" + name
		prefix, table, e := s.checkSubnet(sid, *m.Location, space, sm.Properties)
		if e != nil {
			return nil, e
		}
		nsg, e := s.subnetNSG(sid, sm.Properties)
		if e != nil {
			return nil, e
		}
		p := planned{name: name, model: *sm, prefix: prefix, table: table, nsg: nsg}
		if old != nil {
			p.keep = old.subnets[strings.ToLower(name)]
			if p.keep != nil && p.keep.prefix != prefix && len(p.keep.used) > 0 {
				return nil, errSubnetInUse(p.keep, "updated")
			}
		}
		for _, q := range plan {
			if q.prefix.Overlaps(prefix) {
				return nil, newError(http.StatusBadRequest, "NetcfgSubnetRangesOverlap",
					"Subnet '%s' is not valid because its IP address range overlaps with that of an existing subnet '%s' in virtual network '%s'.", name, q.name, id)
			}
		}
		plan = append(plan, p)
	}
	if old != nil {
		for key, sn := range old.subnets {
			if !seen[key] && len(sn.used) > 0 {
				return nil, errSubnetInUse(sn, "deleted")
			}
		}
	}
	return func(state armnetwork.ProvisioningState) {
		v := old
		if v == nil {
			v = &virtualNetwork{id: id}
			s.vnets[strings.ToLower(id)] = v
		}
		v.location, v.prefixes, v.state = *m.Location, space, state
		v.model = m
		v.model.Properties = clone(m.Properties)
		v.model.Properties.Subnets = nil
		subnets := map[string]*subnet{}
		for _, p := range plan {
			sn := p.keep
			if sn == nil {
				sn = &subnet{id: id + "/subnets/" + p.name, vnet: v, used: map[netip.Addr]string{}}
			}
			sn.name, sn.model, sn.prefix, sn.table, sn.nsg, sn.state = p.name, p.model, p.prefix, p.table, p.nsg, state
			subnets[strings.ToLower(p.name)] = sn
		}
		v.subnets = subnets
	}, nil
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

func (s *Server) getVirtualNetwork(w http.ResponseWriter, q *armRequest) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.vnets[strings.ToLower(q.resourceID())]
	if v == nil {
		return errResourceNotFound(typeVNet, q.name(2), q.group)
	}
	writeJSON(w, http.StatusOK, s.vnetView(v))
	return nil
}

func (s *Server) putVirtualNetwork(w http.ResponseWriter, q *armRequest) *apiError {
	var m armnetwork.VirtualNetwork
	if e := s.decodeBody(q, &m); e != nil {
		return e
	}
	id := q.resourceID()
	s.mu.Lock()
	defer s.mu.Unlock()
	if op := s.busy(id); op != nil {
		return s.conflict(op, id)
	}
	apply, e := s.prepareVirtualNetwork(id, m)
	if e != nil {
		return e
	}
	status := http.StatusOK
	if s.vnets[strings.ToLower(id)] == nil {
		status = http.StatusCreated
	}
	apply(armnetwork.ProvisioningStateUpdating)
	v := s.vnets[strings.ToLower(id)]
	op := s.startOperation(q, id, func(failure *apiError) func() {
		v.state = settled(failure)
		for _, sn := range v.subnets {
			sn.state = v.state
		}
		return nil
	})
	s.writeStarted(w, op, status, s.vnetView(v))
	return nil
}

// settled is the provisioning state of a network resource whose operation ended.
func settled(failure *apiError) armnetwork.ProvisioningState {
	if failure != nil {
		return armnetwork.ProvisioningStateFailed
	}
	return armnetwork.ProvisioningStateSucceeded
}

func (s *Server) getSubnet(w http.ResponseWriter, q *armRequest) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.vnets[strings.ToLower(q.id(8))]
	if v == nil {
		return errResourceNotFound(typeVNet, q.name(2), q.group)
	}
	sn := v.subnets[strings.ToLower(q.name(3))]
	if sn == nil {
		return errResourceNotFound(typeSubnet, q.name(2)+"/"+q.name(3), q.group)
	}
	writeJSON(w, http.StatusOK, subnetView(sn))
	return nil
}

func (s *Server) putSubnet(w http.ResponseWriter, q *armRequest) *apiError {
	var m armnetwork.Subnet
	if e := s.decodeBody(q, &m); e != nil {
		return e
	}
	id := q.resourceID()
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.vnets[strings.ToLower(q.id(8))]
	if v == nil {
		return errParentNotFound(typeSubnet, q.id(8))
	}
	if op := s.busy(id); op != nil {
		return s.conflict(op, id)
	}
	prefix, table, e := s.checkSubnet(id, v.location, v.prefixes, m.Properties)
	if e != nil {
		return e
	}
	nsg, e := s.subnetNSG(id, m.Properties)
	if e != nil {
		return e
	}
	name := q.name(3)
	sn := v.subnets[strings.ToLower(name)]
	status := http.StatusOK
	if sn == nil {
		status = http.StatusCreated
		sn = &subnet{id: v.id + "/subnets/" + name, name: name, vnet: v, used: map[netip.Addr]string{}}
	} else if sn.prefix != prefix && len(sn.used) > 0 {
		return errSubnetInUse(sn, "updated")
	}
	for _, other := range v.subnets {
		if other != sn && other.prefix.Overlaps(prefix) {
			return newError(http.StatusBadRequest, "NetcfgSubnetRangesOverlap",
				"Subnet '%s' is not valid because its IP address range overlaps with that of an existing subnet '%s' in virtual network '%s'.", name, other.name, v.id)
		}
	}
	v.subnets[strings.ToLower(name)] = sn
	sn.model, sn.prefix, sn.table, sn.nsg, sn.state = m, prefix, table, nsg, armnetwork.ProvisioningStateUpdating
	op := s.startOperation(q, id, func(failure *apiError) func() {
		sn.state = settled(failure)
		return nil
	})
	s.writeStarted(w, op, status, subnetView(sn))
	return nil
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

func (s *Server) vnetView(v *virtualNetwork) armnetwork.VirtualNetwork {
	out := v.model
	out.ID, out.Name, out.Type = to.Ptr(v.id), to.Ptr(lastSegment(v.id)), to.Ptr(typeVNet)
	out.Location = to.Ptr(v.location)
	out.Properties = clone(v.model.Properties)
	out.Properties.ProvisioningState = to.Ptr(v.state)
	for _, key := range sortedKeys(v.subnets) {
		sn := subnetView(v.subnets[key])
		out.Properties.Subnets = append(out.Properties.Subnets, &sn)
	}
	return out
}

func subnetView(sn *subnet) armnetwork.Subnet {
	out := armnetwork.Subnet{ID: to.Ptr(sn.id), Name: to.Ptr(sn.name), Type: to.Ptr(typeSubnet), Properties: &armnetwork.SubnetPropertiesFormat{}}
	if sn.model.Properties != nil {
		out.Properties = clone(sn.model.Properties)
	}
	out.Properties.ProvisioningState = to.Ptr(sn.state)
	out.Properties.RouteTable, out.Properties.NetworkSecurityGroup = nil, nil
	if sn.table != "" {
		out.Properties.RouteTable = &armnetwork.RouteTable{ID: to.Ptr(sn.table)}
	}
	if sn.nsg != "" {
		out.Properties.NetworkSecurityGroup = &armnetwork.SecurityGroup{ID: to.Ptr(sn.nsg)}
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

func lastSegment(id string) string { return id[strings.LastIndex(id, "/")+1:] }

// Route tables and routes.

func (s *Server) getRouteTable(w http.ResponseWriter, q *armRequest) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	rt := s.tables[strings.ToLower(q.resourceID())]
	if rt == nil {
		return errResourceNotFound(typeRouteTable, q.name(2), q.group)
	}
	writeJSON(w, http.StatusOK, s.tableView(rt))
	return nil
}

func (s *Server) putRouteTable(w http.ResponseWriter, q *armRequest) *apiError {
	var m armnetwork.RouteTable
	if e := s.decodeBody(q, &m); e != nil {
		return e
	}
	id := q.resourceID()
	if m.Location == nil || *m.Location == "" {
		return newError(http.StatusBadRequest, "LocationRequired", "The location property is required for this definition.")
	}
	var routes []*armnetwork.Route
	if m.Properties != nil {
		routes = m.Properties.Routes
	}
	if len(routes) > s.opts.MaxRoutesPerTable {
		return s.errRouteLimit(id, len(routes))
	}
	planned := map[string]*route{}
	for i, r := range routes {
		if r == nil || r.Name == nil || *r.Name == "" {
			return newError(http.StatusBadRequest, "InvalidRequestFormat", "Route %d of route table %s has no name.", i, id)
		}
		if planned[strings.ToLower(*r.Name)] != nil {
			return newError(http.StatusBadRequest, "InvalidRequestFormat", "Route table %s lists route %q twice.", id, *r.Name)
		}
		rid := id + "/routes/" + *r.Name
		if e := checkRoute(rid, r.Properties); e != nil {
			return e
		}
		planned[strings.ToLower(*r.Name)] = &route{id: rid, name: *r.Name, model: *r, state: armnetwork.ProvisioningStateUpdating}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if op := s.busy(id); op != nil {
		return s.conflict(op, id)
	}
	rt := s.tables[strings.ToLower(id)]
	status := http.StatusOK
	if rt == nil {
		status = http.StatusCreated
		rt = &routeTable{id: id}
		s.tables[strings.ToLower(id)] = rt
	}
	rt.location, rt.model, rt.routes, rt.state = *m.Location, m, planned, armnetwork.ProvisioningStateUpdating
	if m.Properties != nil {
		rt.model.Properties = clone(m.Properties)
		rt.model.Properties.Routes = nil
	}
	op := s.startOperation(q, id, func(failure *apiError) func() {
		rt.state = settled(failure)
		for _, r := range rt.routes {
			r.state = rt.state
		}
		return nil
	})
	s.writeStarted(w, op, status, s.tableView(rt))
	return nil
}

// CodeRouteLimit is the error code of a route table write that would exceed
// Options.MaxRoutesPerTable. Network answers limit violations with "<Limit>LimitReached" codes
// (e.g. IPv4BasicSkuPublicIpCountLimitReached); the route limit's own code could not be
// confirmed from public sources, so tests should compare with this constant.
const CodeRouteLimit = "RoutesPerRouteTableLimitReached"

func (s *Server) errRouteLimit(table string, n int) *apiError {
	return newError(http.StatusBadRequest, CodeRouteLimit,
		"Route table %s would have %d routes; a route table holds at most %d user-defined routes. Spread the routes over more route tables (one per subnet) or aggregate prefixes.",
		table, n, s.opts.MaxRoutesPerTable)
}

// checkRoute checks a route's properties as Network does.
func checkRoute(id string, p *armnetwork.RoutePropertiesFormat) *apiError {
	if p == nil || p.AddressPrefix == nil || *p.AddressPrefix == "" {
		return newError(http.StatusBadRequest, "InvalidRequestFormat", "Route %s needs properties.addressPrefix, e.g. \"10.244.1.0/24\".", id)
	}
	pfx, err := netip.ParsePrefix(*p.AddressPrefix)
	if err != nil || pfx.Masked() != pfx {
		return newError(http.StatusBadRequest, "InvalidCIDRNotation",
			"The address prefix %s of route %s is not a CIDR in canonical form (no host bits set), e.g. 10.244.1.0/24.", *p.AddressPrefix, id)
	}
	if p.NextHopType == nil {
		return newError(http.StatusBadRequest, "InvalidRequestFormat", "Route %s needs properties.nextHopType, one of %v.", id, armnetwork.PossibleRouteNextHopTypeValues())
	}
	valid := false
	for _, t := range armnetwork.PossibleRouteNextHopTypeValues() {
		valid = valid || t == *p.NextHopType
	}
	if !valid {
		return newError(http.StatusBadRequest, "InvalidRequestFormat", "Route %s has nextHopType %q; use one of %v.", id, *p.NextHopType, armnetwork.PossibleRouteNextHopTypeValues())
	}
	hasIP := p.NextHopIPAddress != nil && *p.NextHopIPAddress != ""
	switch {
	case *p.NextHopType == armnetwork.RouteNextHopTypeVirtualAppliance && !hasIP:
		return newError(http.StatusBadRequest, "InvalidRequestFormat",
			"Route %s has nextHopType VirtualAppliance and needs properties.nextHopIpAddress, the appliance's (node's) private IP.", id)
	case *p.NextHopType != armnetwork.RouteNextHopTypeVirtualAppliance && hasIP:
		return newError(http.StatusBadRequest, "InvalidRequestFormat",
			"Route %s has nextHopType %s: nextHopIpAddress is only allowed with VirtualAppliance; remove it.", id, *p.NextHopType)
	case hasIP:
		if _, err := netip.ParseAddr(*p.NextHopIPAddress); err != nil {
			return newError(http.StatusBadRequest, "InvalidRequestFormat", "Route %s has nextHopIpAddress %q, which is not an IP address.", id, *p.NextHopIPAddress)
		}
	}
	return nil
}

func (s *Server) deleteRouteTable(w http.ResponseWriter, q *armRequest) *apiError {
	id := q.resourceID()
	s.mu.Lock()
	defer s.mu.Unlock()
	rt := s.tables[strings.ToLower(id)]
	if rt == nil {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	if subnets := s.subnetsOf(rt.id); len(subnets) > 0 {
		return newError(http.StatusBadRequest, "InUseRouteTableCannotBeDeleted",
			"Route table %s is in use by subnet(s) %s and cannot be deleted. Dissociate it from the subnets first.", id, strings.Join(subnets, ", "))
	}
	if op := s.busy(id); op != nil {
		return s.conflict(op, id)
	}
	rt.state = armnetwork.ProvisioningStateDeleting
	op := s.startOperation(q, id, func(failure *apiError) func() {
		if failure != nil {
			rt.state = armnetwork.ProvisioningStateFailed
		} else {
			delete(s.tables, strings.ToLower(id))
		}
		return nil
	})
	s.writeStarted(w, op, http.StatusAccepted, nil)
	return nil
}

// subnetsOf returns the IDs of the subnets associated with a route table; s.mu is held.
func (s *Server) subnetsOf(table string) []string {
	var out []string
	for _, v := range s.vnets {
		for _, sn := range v.subnets {
			if strings.EqualFold(sn.table, table) {
				out = append(out, sn.id)
			}
		}
	}
	sort.Strings(out)
	return out
}

// AddRouteTable seeds an empty route table in a resource group, associated with the subnets
// named by resource ID (as azurerm_subnet_route_table_association would), and returns its ID.
func (s *Server) AddRouteTable(group, name string, subnetIDs ...string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addGroup(group)
	id := s.ResourceGroupID(s.groups[strings.ToLower(group)]) + "/providers/Microsoft.Network/routeTables/" + name
	var subnets []*subnet
	for _, sid := range subnetIDs {
		sn := s.findSubnet(sid)
		if sn == nil {
			return "", fmt.Errorf("no subnet %s to associate route table %s with", sid, name)
		}
		subnets = append(subnets, sn)
	}
	s.tables[strings.ToLower(id)] = &routeTable{
		id: id, location: s.opts.Location, routes: map[string]*route{}, state: armnetwork.ProvisioningStateSucceeded,
		model: armnetwork.RouteTable{Location: to.Ptr(s.opts.Location), Properties: &armnetwork.RouteTablePropertiesFormat{}},
	}
	for _, sn := range subnets {
		sn.table = id
	}
	return id, nil
}

func (s *Server) tableView(rt *routeTable) armnetwork.RouteTable {
	out := rt.model
	out.ID, out.Name, out.Type, out.Location = to.Ptr(rt.id), to.Ptr(lastSegment(rt.id)), to.Ptr(typeRouteTable), to.Ptr(rt.location)
	out.Properties = &armnetwork.RouteTablePropertiesFormat{}
	if rt.model.Properties != nil {
		out.Properties = clone(rt.model.Properties)
	}
	out.Properties.ProvisioningState = to.Ptr(rt.state)
	out.Properties.Routes = nil
	for _, key := range sortedKeys(rt.routes) {
		r := routeView(rt.routes[key])
		out.Properties.Routes = append(out.Properties.Routes, &r)
	}
	out.Properties.Subnets = nil
	for _, id := range s.subnetsOf(rt.id) {
		out.Properties.Subnets = append(out.Properties.Subnets, &armnetwork.Subnet{ID: to.Ptr(id)})
	}
	return out
}

func routeView(r *route) armnetwork.Route {
	out := armnetwork.Route{ID: to.Ptr(r.id), Name: to.Ptr(r.name), Type: to.Ptr(typeRoute), Properties: clone(r.model.Properties)}
	out.Properties.ProvisioningState = to.Ptr(r.state)
	return out
}

// table returns the route table of a route request, or the error for a missing one; s.mu is held.
func (s *Server) table(q *armRequest) (*routeTable, *apiError) {
	rt := s.tables[strings.ToLower(q.id(8))]
	if rt == nil {
		return nil, errResourceNotFound(typeRouteTable, q.name(2), q.group)
	}
	return rt, nil
}

func (s *Server) listRoutes(w http.ResponseWriter, q *armRequest) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	rt, e := s.table(q)
	if e != nil {
		return e
	}
	keys := sortedKeys(rt.routes)
	start, end, next, e := s.page(q, len(keys))
	if e != nil {
		return e
	}
	res := armnetwork.RouteListResult{NextLink: next, Value: []*armnetwork.Route{}}
	for _, k := range keys[start:end] {
		r := routeView(rt.routes[k])
		res.Value = append(res.Value, &r)
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) getRoute(w http.ResponseWriter, q *armRequest) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	rt, e := s.table(q)
	if e != nil {
		return e
	}
	r := rt.routes[strings.ToLower(q.name(3))]
	if r == nil {
		return errResourceNotFound(typeRoute, q.name(2)+"/"+q.name(3), q.group)
	}
	writeJSON(w, http.StatusOK, routeView(r))
	return nil
}

func (s *Server) putRoute(w http.ResponseWriter, q *armRequest) *apiError {
	var m armnetwork.Route
	if e := s.decodeBody(q, &m); e != nil {
		return e
	}
	id := q.resourceID()
	if e := checkRoute(id, m.Properties); e != nil {
		return e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rt := s.tables[strings.ToLower(q.id(8))]
	if rt == nil {
		return errParentNotFound(typeRoute, q.id(8))
	}
	if op := s.busy(id); op != nil {
		return s.conflict(op, id)
	}
	key := strings.ToLower(q.name(3))
	r := rt.routes[key]
	status := http.StatusOK
	if r == nil {
		if len(rt.routes)+1 > s.opts.MaxRoutesPerTable {
			return s.errRouteLimit(rt.id, len(rt.routes)+1)
		}
		status = http.StatusCreated
		r = &route{id: rt.id + "/routes/" + q.name(3), name: q.name(3)}
		rt.routes[key] = r
	}
	r.model, r.state = m, armnetwork.ProvisioningStateUpdating
	op := s.startOperation(q, id, func(failure *apiError) func() {
		r.state = settled(failure)
		return nil
	})
	s.writeStarted(w, op, status, routeView(r))
	return nil
}

func (s *Server) deleteRoute(w http.ResponseWriter, q *armRequest) *apiError {
	id := q.resourceID()
	s.mu.Lock()
	defer s.mu.Unlock()
	rt, e := s.table(q)
	if e != nil {
		return e
	}
	key := strings.ToLower(q.name(3))
	r := rt.routes[key]
	if r == nil {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	if op := s.busy(id); op != nil {
		return s.conflict(op, id)
	}
	r.state = armnetwork.ProvisioningStateDeleting
	op := s.startOperation(q, id, func(failure *apiError) func() {
		if failure != nil {
			r.state = armnetwork.ProvisioningStateFailed
		} else if rt.routes[key] == r {
			delete(rt.routes, key)
		}
		return nil
	})
	s.writeStarted(w, op, http.StatusAccepted, nil)
	return nil
}

// listScaleSetNICs lists the network interfaces of a scale set's instances, as
// InterfacesClient.NewListVirtualMachineScaleSetNetworkInterfacesPager reads them.
func (s *Server) listScaleSetNICs(w http.ResponseWriter, q *armRequest) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, e := s.scaleSet(q)
	if e != nil {
		return e
	}
	var nics []*armnetwork.Interface
	for _, in := range ss.sortedInstances() {
		for _, n := range in.nics {
			nics = append(nics, nicView(ss, in, n))
		}
	}
	start, end, next, e := s.page(q, len(nics))
	if e != nil {
		return e
	}
	writeJSON(w, http.StatusOK, armnetwork.InterfaceListResult{Value: append([]*armnetwork.Interface{}, nics[start:end]...), NextLink: next})
	return nil
}

func nicView(ss *scaleSet, in *vmInstance, n instanceNIC) *armnetwork.Interface {
	vmID := in.resourceID(ss)
	id := vmID + "/networkInterfaces/" + n.name
	nic := &armnetwork.Interface{
		ID: to.Ptr(id), Name: to.Ptr(n.name), Type: to.Ptr("Microsoft.Network/networkInterfaces"), Location: to.Ptr(ss.location),
		Properties: &armnetwork.InterfacePropertiesFormat{
			EnableIPForwarding:          to.Ptr(n.ipForwarding),
			EnableAcceleratedNetworking: to.Ptr(n.accelerated),
			Primary:                     to.Ptr(n.primary),
			MacAddress:                  to.Ptr(n.mac),
			VirtualMachine:              &armnetwork.SubResource{ID: to.Ptr(vmID)},
			ProvisioningState:           to.Ptr(armnetwork.ProvisioningStateSucceeded),
		},
	}
	for _, c := range n.ipConfigs {
		nic.Properties.IPConfigurations = append(nic.Properties.IPConfigurations, &armnetwork.InterfaceIPConfiguration{
			ID: to.Ptr(id + "/ipConfigurations/" + c.name), Name: to.Ptr(c.name),
			Properties: &armnetwork.InterfaceIPConfigurationPropertiesFormat{
				Primary:                   to.Ptr(c.primary),
				PrivateIPAddress:          to.Ptr(c.addr.String()),
				PrivateIPAddressVersion:   to.Ptr(armnetwork.IPVersionIPv4),
				PrivateIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodDynamic),
				Subnet:                    &armnetwork.Subnet{ID: to.Ptr(c.subnet.id)},
				ProvisioningState:         to.Ptr(armnetwork.ProvisioningStateSucceeded),
			},
		})
	}
	return nic
}
