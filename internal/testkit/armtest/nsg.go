package armtest

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"
)

// Microsoft.Network network security groups.

// nsgKind: security rules need distinct priorities per direction.
var nsgKind = netObjectRules{
	typ: typeNSG, name: "networkSecurityGroups", inUseCode: "InUseNetworkSecurityGroupCannotBeDeleted",
	model: func() json.Unmarshaler { return &armnetwork.SecurityGroup{} },
	check: checkNSG,
	build: func(s *Server, q *armRequest, m any, _ *netObject) (*netObject, *apiError) {
		return s.buildNSG(q, as[*armnetwork.SecurityGroup](m))
	},
	view: nsgView,
}.kind()

// checkNSG checks a network security group body before the store is read.
func checkNSG(_ *Server, q *armRequest, v any) *apiError {
	m := as[*armnetwork.SecurityGroup](v)
	id := q.resourceID()
	if e := checkLocation(m.Location); e != nil {
		return e
	}
	m.ID, m.Name, m.Type, m.Etag = nil, nil, nil, nil
	if m.Properties == nil {
		m.Properties = &armnetwork.SecurityGroupPropertiesFormat{}
	}
	priorities := map[string]bool{}
	for i, r := range m.Properties.SecurityRules {
		if r == nil || r.Name == nil || r.Properties == nil {
			return newError(http.StatusBadRequest, "InvalidRequestFormat", "Security rule %d of %s needs a name and properties.", i, id)
		}
		p := r.Properties
		if p.Access == nil || p.Direction == nil || p.Protocol == nil || p.Priority == nil {
			return newError(http.StatusBadRequest, "SecurityRuleInvalidFormat", "Security rule %s needs access, direction, protocol and priority.", *r.Name)
		}
		if *p.Priority < 100 || *p.Priority > 4096 {
			return newError(http.StatusBadRequest, "SecurityRuleInvalidPriority", "Security rule %s has priority %d; use 100 to 4096.", *r.Name, *p.Priority)
		}
		key := string(*p.Direction) + "/" + strconv.Itoa(int(*p.Priority))
		if priorities[key] {
			return newError(http.StatusBadRequest, "SecurityRulesInvalidPriorityAssignment",
				"Security rule %s has the same priority (%d) and direction (%s) as another rule of %s.", *r.Name, *p.Priority, *p.Direction, id)
		}
		priorities[key] = true
		r.ID = to.Ptr(id + "/securityRules/" + *r.Name)
	}
	return nil
}

// buildNSG makes the network object of a checked network security group body; s.mu is held.
func (s *Server) buildNSG(q *armRequest, m *armnetwork.SecurityGroup) (*netObject, *apiError) {
	id, loc := q.resourceID(), *m.Location
	return &netObject{id: id, typ: typeNSG, location: loc, model: m}, nil
}

// nsgView is a network security group as GET returns it, with the subnets it is associated with.
func nsgView(s *Server, o *netObject) any {
	out := *clone(as[*armnetwork.SecurityGroup](o.model))
	out.ID, out.Name, out.Type, out.Location = to.Ptr(o.id), to.Ptr(lastSegment(o.id)), to.Ptr(o.typ), to.Ptr(o.location)
	out.Properties.ProvisioningState = to.Ptr(o.state)
	out.Properties.Subnets = nil
	for _, u := range s.usersOf(o.id) {
		if strings.Contains(strings.ToLower(u), "/subnets/") {
			out.Properties.Subnets = append(out.Properties.Subnets, &armnetwork.Subnet{ID: to.Ptr(u)})
		}
	}
	return out
}
