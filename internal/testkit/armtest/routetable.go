package armtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"sort"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"
)

// Microsoft.Network route tables and their routes.

type routeTable struct {
	id       string
	location string
	model    armnetwork.RouteTable // as accepted, routes left out
	routes   map[string]*route     // by lower-case name
	state    armnetwork.ProvisioningState
	// etag changes with every write of the table or of one of its routes (newETag).
	etag string
}

type route struct {
	id    string
	name  string
	model armnetwork.Route
	state armnetwork.ProvisioningState
}

// routeTableKind: a PUT replaces the routes too, and is refused when its If-Match names another
// etag (checkIfMatch); a table associated with subnets is not deleted.
var routeTableKind = kind{
	typ: typeRouteTable, path: tablePath, version: NetworkAPIVersion,
	model: func() json.Unmarshaler { return &armnetwork.RouteTable{} },
	check: func(s *Server, q *armRequest, m any) *apiError {
		return s.checkRouteTable(q.resourceID(), as[*armnetwork.RouteTable](m))
	},
	find: func(s *Server, id string) any { return found(s.tables[strings.ToLower(id)]) },
	write: func(s *Server, q *armRequest, m, old any) (*change, *apiError) {
		etag := ""
		if old != nil {
			etag = as[*routeTable](old).etag
		}
		if e := checkIfMatch(q, etag, old != nil); e != nil {
			return nil, e
		}
		return s.writeRouteTable(q.resourceID(), *as[*armnetwork.RouteTable](m), old == nil), nil
	},
	inUse: func(s *Server, q *armRequest, r any) *apiError {
		if subnets := s.subnetsOf(as[*routeTable](r).id); len(subnets) > 0 {
			return newError(http.StatusBadRequest, "InUseRouteTableCannotBeDeleted",
				"Route table %s is in use by subnet(s) %s and cannot be deleted. Dissociate it from the subnets first.",
				q.resourceID(), strings.Join(subnets, ", "))
		}
		return nil
	},
	remove: func(s *Server, _ *armRequest, r any) *change {
		rt := as[*routeTable](r)
		rt.state = armnetwork.ProvisioningStateDeleting
		return &change{commit: func(failure *apiError) func() {
			if failure != nil {
				rt.state = armnetwork.ProvisioningStateFailed
			} else {
				delete(s.tables, strings.ToLower(rt.id))
			}
			return nil
		}}
	},
	view: func(s *Server, r any, _ string) any { return s.tableView(as[*routeTable](r)) },
}

// checkRouteTable checks a route table body and its routes.
func (s *Server) checkRouteTable(id string, m *armnetwork.RouteTable) *apiError {
	if m.Location == nil || *m.Location == "" {
		return newError(http.StatusBadRequest, "LocationRequired", "The location property is required for this definition.")
	}
	routes := tableRoutes(m)
	if len(routes) > s.opts.MaxRoutesPerTable {
		return s.errRouteLimit(id, len(routes))
	}
	seen := map[string]bool{}
	for i, r := range routes {
		if r == nil || r.Name == nil || *r.Name == "" {
			return newError(http.StatusBadRequest, "InvalidRequestFormat", "Route %d of route table %s has no name.", i, id)
		}
		if seen[strings.ToLower(*r.Name)] {
			return newError(http.StatusBadRequest, "InvalidRequestFormat", "Route table %s lists route %q twice.", id, *r.Name)
		}
		if e := checkRoute(id+"/routes/"+*r.Name, r.Properties); e != nil {
			return e
		}
		seen[strings.ToLower(*r.Name)] = true
	}
	return nil
}

func tableRoutes(m *armnetwork.RouteTable) []*armnetwork.Route {
	if m.Properties == nil {
		return nil
	}
	return m.Properties.Routes
}

// writeRouteTable creates or replaces a checked route table with its routes; s.mu is held.
func (s *Server) writeRouteTable(id string, m armnetwork.RouteTable, create bool) *change {
	planned := map[string]*route{}
	for _, r := range tableRoutes(&m) {
		planned[strings.ToLower(*r.Name)] = &route{id: id + "/routes/" + *r.Name, name: *r.Name, model: *r, state: armnetwork.ProvisioningStateUpdating}
	}
	rt := s.tables[strings.ToLower(id)]
	status := http.StatusOK
	if create {
		status = http.StatusCreated
		rt = &routeTable{id: id}
		s.tables[strings.ToLower(id)] = rt
	}
	rt.location, rt.model, rt.routes, rt.state, rt.etag = *m.Location, m, planned, armnetwork.ProvisioningStateUpdating, newETag()
	if m.Properties != nil {
		rt.model.Properties = clone(m.Properties)
		rt.model.Properties.Routes = nil
	}
	return &change{status: status, view: func() any { return s.tableView(rt) }, commit: func(failure *apiError) func() {
		rt.state = settled(failure)
		for _, r := range rt.routes {
			r.state = rt.state
		}
		return nil
	}}
}

// routeKind: routes are written alone or with their table; the table holds at most
// Options.MaxRoutesPerTable.
var routeKind = kind{
	typ: typeRoute, path: tablePath + "/routes/{}", version: NetworkAPIVersion, parent: &routeTableKind, list: true,
	model: func() json.Unmarshaler { return &armnetwork.Route{} },
	check: func(_ *Server, q *armRequest, m any) *apiError {
		return checkRoute(q.resourceID(), as[*armnetwork.Route](m).Properties)
	},
	find: func(s *Server, id string) any {
		i := strings.LastIndex(strings.ToLower(id), "/routes/")
		if rt := s.tables[strings.ToLower(id[:i])]; rt != nil {
			return found(rt.routes[strings.ToLower(id[i+len("/routes/"):])])
		}
		return nil
	},
	write: func(s *Server, q *armRequest, m, _ any) (*change, *apiError) {
		return s.writeRoute(q, *as[*armnetwork.Route](m))
	},
	remove: func(s *Server, q *armRequest, r any) *change {
		rt, key, rr := s.tables[strings.ToLower(q.id(8))], strings.ToLower(q.name(3)), as[*route](r)
		rr.state, rt.etag = armnetwork.ProvisioningStateDeleting, newETag()
		return &change{commit: func(failure *apiError) func() {
			if failure != nil {
				rr.state = armnetwork.ProvisioningStateFailed
			} else if rt.routes[key] == rr {
				delete(rt.routes, key)
			}
			return nil
		}}
	},
	view: func(_ *Server, r any, _ string) any { return routeView(as[*route](r)) },
	items: func(s *Server, q *armRequest) []any {
		rt := s.tables[strings.ToLower(q.id(8))]
		var out []any
		for _, k := range sortedKeys(rt.routes) {
			out = append(out, routeView(rt.routes[k]))
		}
		return out
	},
}

// writeRoute creates or replaces a checked route of an existing route table; s.mu is held.
func (s *Server) writeRoute(q *armRequest, m armnetwork.Route) (*change, *apiError) {
	rt := s.tables[strings.ToLower(q.id(8))]
	key := strings.ToLower(q.name(3))
	r := rt.routes[key]
	status := http.StatusOK
	if r == nil {
		if len(rt.routes)+1 > s.opts.MaxRoutesPerTable {
			return nil, s.errRouteLimit(rt.id, len(rt.routes)+1)
		}
		status = http.StatusCreated
		r = &route{id: rt.id + "/routes/" + q.name(3), name: q.name(3)}
		rt.routes[key] = r
	}
	r.model, r.state, rt.etag = m, armnetwork.ProvisioningStateUpdating, newETag()
	return &change{status: status, view: func() any { return routeView(r) }, commit: func(failure *apiError) func() {
		r.state = settled(failure)
		return nil
	}}, nil
}

// CodeRouteLimit is the error code of a route table write that would exceed
// Options.MaxRoutesPerTable. Network answers limit violations with "<Limit>LimitReached" codes
// (e.g. IPv4BasicSkuPublicIpCountLimitReached); the route limit's own code could not be
// confirmed from public sources, so tests should compare with this constant.
const CodeRouteLimit = "RoutesPerRouteTableLimitReached"

func (s *Server) errRouteLimit(table string, n int) *apiError {
	return newError(http.StatusBadRequest, CodeRouteLimit,
		"Route table %s would have %d routes; a route table holds at most %d user-defined routes. Spread the routes over more route tables (one per "+
			"subnet) or aggregate prefixes.",
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
		return newError(http.StatusBadRequest, "InvalidRequestFormat", "Route %s needs properties.nextHopType, one of %v.", id,
			armnetwork.PossibleRouteNextHopTypeValues())
	}
	valid := false
	for _, t := range armnetwork.PossibleRouteNextHopTypeValues() {
		valid = valid || t == *p.NextHopType
	}
	if !valid {
		return newError(http.StatusBadRequest, "InvalidRequestFormat", "Route %s has nextHopType %q; use one of %v.", id, *p.NextHopType,
			armnetwork.PossibleRouteNextHopTypeValues())
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
			return newError(http.StatusBadRequest, "InvalidRequestFormat", "Route %s has nextHopIpAddress %q, which is not an IP address.", id,
				*p.NextHopIPAddress)
		}
	}
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
	id := s.ResourceGroupID(s.groups[strings.ToLower(group)].name) + "/providers/Microsoft.Network/routeTables/" + name
	var subnets []*subnet
	for _, sid := range subnetIDs {
		sn := s.findSubnet(sid)
		if sn == nil {
			return "", fmt.Errorf("no subnet %s to associate route table %s with", sid, name)
		}
		subnets = append(subnets, sn)
	}
	s.tables[strings.ToLower(id)] = &routeTable{
		id: id, location: s.opts.Location, routes: map[string]*route{}, state: armnetwork.ProvisioningStateSucceeded, etag: newETag(),
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
	out.Etag = to.Ptr(rt.etag)
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
