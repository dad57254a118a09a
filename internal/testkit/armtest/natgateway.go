package armtest

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"
)

// Microsoft.Network NAT gateways: the outbound path of the subnets associated with them
// (netpath.go). https://learn.microsoft.com/azure/nat-gateway/nat-gateway-resource: Standard SKU
// only, Standard static public IP addresses of its region, each used by nothing else.

var natGatewayKind = netObjectRules{
	typ: typeNatGateway, name: "natGateways", inUseCode: "InUseNatGatewayCannotBeDeleted",
	model: func() json.Unmarshaler { return &armnetwork.NatGateway{} },
	check: checkNatGateway,
	build: func(s *Server, q *armRequest, m any, _ *netObject) (*netObject, *apiError) {
		return s.buildNatGateway(q, as[*armnetwork.NatGateway](m))
	},
	view: natGatewayView,
}.kind()

// checkNatGateway checks a NAT gateway body before the store is read.
func checkNatGateway(_ *Server, q *armRequest, v any) *apiError {
	m := as[*armnetwork.NatGateway](v)
	if e := checkLocation(m.Location); e != nil {
		return e
	}
	m.ID, m.Name, m.Type, m.Etag = nil, nil, nil, nil
	if m.SKU == nil || m.SKU.Name == nil || *m.SKU.Name != armnetwork.NatGatewaySKUNameStandard {
		return newError(http.StatusBadRequest, "InvalidNatGatewaySku", "NAT gateway %s needs sku.name Standard.", q.resourceID())
	}
	if m.Properties == nil {
		m.Properties = &armnetwork.NatGatewayPropertiesFormat{}
	}
	m.Properties.Subnets = nil // read-only: the subnets that name the gateway
	return nil
}

// buildNatGateway makes the network object of a checked NAT gateway body; s.mu is held.
func (s *Server) buildNatGateway(q *armRequest, m *armnetwork.NatGateway) (*netObject, *apiError) {
	id, loc := q.resourceID(), *m.Location
	o := &netObject{id: id, typ: typeNatGateway, location: loc, model: m}
	for _, ref := range m.Properties.PublicIPAddresses {
		pip := s.object(deref(ref.ID), typePublicIP)
		if pip == nil || !strings.EqualFold(pip.location, loc) {
			return nil, errReference(deref(ref.ID), id)
		}
		for _, u := range s.usersOf(pip.id) {
			if !strings.EqualFold(u, id) {
				return nil, newError(http.StatusBadRequest, "PublicIPAddressInUse", "Public IP address %s is already used by %s.", pip.id, u)
			}
		}
		o.refs = append(o.refs, strings.ToLower(pip.id))
	}
	return o, nil
}

// natGatewayView is a NAT gateway as GET returns it, with the subnets associated with it.
func natGatewayView(s *Server, o *netObject) any {
	out := *clone(as[*armnetwork.NatGateway](o.model))
	out.ID, out.Name, out.Type, out.Location = to.Ptr(o.id), to.Ptr(lastSegment(o.id)), to.Ptr(o.typ), to.Ptr(o.location)
	out.Properties.ProvisioningState = to.Ptr(o.state)
	for _, v := range s.vnets {
		for _, sn := range v.subnets {
			if strings.EqualFold(sn.nat, o.id) {
				out.Properties.Subnets = append(out.Properties.Subnets, &armnetwork.SubResource{ID: to.Ptr(sn.id)})
			}
		}
	}
	return out
}

// subnetNAT returns the ID of the NAT gateway a subnet names, which must exist in its region;
// s.mu is held.
func (s *Server) subnetNAT(id, location string, p *armnetwork.SubnetPropertiesFormat) (string, *apiError) {
	if p == nil || p.NatGateway == nil {
		return "", nil
	}
	nat := s.object(deref(p.NatGateway.ID), typeNatGateway)
	if nat == nil || !strings.EqualFold(nat.location, location) {
		return "", errReference(deref(p.NatGateway.ID), id)
	}
	return nat.id, nil
}
