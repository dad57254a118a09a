package armtest

import (
	"encoding/json"
	"net/http"
	"net/netip"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"
)

// Microsoft.Network public IP addresses.

// Public IP addresses come from a /24 of 127.0.0.0/8 chosen when the server starts, so that a
// simulated machine can bind the address a load balancer's frontend has: it stands in for the
// load balancer, whose rules are not simulated.
func (s *Server) allocatePublicIP() (netip.Addr, *apiError) {
	for n := 1; n < 255; n++ {
		a := netip.AddrFrom4([4]byte{127, s.publicNet[0], s.publicNet[1], byte(n)})
		if !s.publicUsed[a] {
			s.publicUsed[a] = true
			return a, nil
		}
	}
	return netip.Addr{}, newError(http.StatusBadRequest, "PublicIPCountLimitReached",
		"Cannot create more than 254 public IP addresses in this subscription in this region.")
}

// publicIPKind: Standard and static only; the address is allocated on create and kept.
var publicIPKind = netObjectRules{
	typ: typePublicIP, name: "publicIPAddresses", inUseCode: "PublicIPAddressCannotBeDeleted",
	model: func() json.Unmarshaler { return &armnetwork.PublicIPAddress{} },
	check: checkPublicIP,
	build: func(s *Server, q *armRequest, m any, old *netObject) (*netObject, *apiError) {
		return s.buildPublicIP(q, as[*armnetwork.PublicIPAddress](m), old)
	},
	view: publicIPView,
}.kind()

// checkPublicIP checks a public IP address body before the store is read.
func checkPublicIP(_ *Server, _ *armRequest, v any) *apiError {
	m := as[*armnetwork.PublicIPAddress](v)
	if e := checkLocation(m.Location); e != nil {
		return e
	}
	m.ID, m.Name, m.Type, m.Etag = nil, nil, nil, nil
	if m.Properties == nil {
		m.Properties = &armnetwork.PublicIPAddressPropertiesFormat{}
	}
	p := m.Properties
	standard := m.SKU != nil && m.SKU.Name != nil && *m.SKU.Name == armnetwork.PublicIPAddressSKUNameStandard
	if !standard {
		return newError(http.StatusBadRequest, "BasicSkuPublicIPRetired", "Basic SKU public IP addresses are retired: set sku.name to Standard.")
	}
	if p.PublicIPAllocationMethod == nil || *p.PublicIPAllocationMethod != armnetwork.IPAllocationMethodStatic {
		return newError(http.StatusBadRequest, "StandardSkuPublicIPAddressesCanOnlyUseStaticAllocation",
			"Standard SKU public IP addresses need publicIPAllocationMethod Static.")
	}
	return nil
}

// buildPublicIP makes the network object of a checked public IP address body (old: its current
// version, or nil); s.mu is held.
func (s *Server) buildPublicIP(q *armRequest, m *armnetwork.PublicIPAddress, old *netObject) (*netObject, *apiError) {
	id, loc := q.resourceID(), *m.Location
	p := m.Properties
	if dns := p.DNSSettings; dns != nil && dns.DomainNameLabel != nil {
		fqdn := strings.ToLower(*dns.DomainNameLabel + "." + loc + ".cloudapp.azure.com")
		for _, other := range s.objects {
			if other != old && other.typ == typePublicIP {
				if od := as[*armnetwork.PublicIPAddress](other.model).Properties.DNSSettings; od != nil && strings.EqualFold(deref(od.Fqdn), fqdn) {
					return nil, newError(http.StatusBadRequest, "DnsRecordInUse", "DNS record %s is already used by another public IP.", fqdn)
				}
			}
		}
		dns.Fqdn = to.Ptr(fqdn)
	}
	o := &netObject{id: id, typ: typePublicIP, location: loc, model: m}
	if old != nil {
		if oldSKU := as[*armnetwork.PublicIPAddress](old.model).SKU.Name; oldSKU == nil || *oldSKU != *m.SKU.Name {
			return nil, changeNotAllowed("sku")
		}
		o.address = old.address
	} else {
		a, e := s.allocatePublicIP()
		if e != nil {
			return nil, e
		}
		o.address = a
	}
	p.IPAddress = to.Ptr(o.address.String())
	p.PublicIPAddressVersion = to.Ptr(armnetwork.IPVersionIPv4)
	p.IPConfiguration = nil
	return o, nil
}

// publicIPView is a public IP address as GET returns it, with the configuration using it.
func publicIPView(s *Server, o *netObject) any {
	out := *clone(as[*armnetwork.PublicIPAddress](o.model))
	out.ID, out.Name, out.Type, out.Location = to.Ptr(o.id), to.Ptr(lastSegment(o.id)), to.Ptr(o.typ), to.Ptr(o.location)
	out.Properties.ProvisioningState = to.Ptr(o.state)
	for _, u := range s.usersOf(o.id) {
		out.Properties.IPConfiguration = &armnetwork.IPConfiguration{ID: to.Ptr(u)}
	}
	return out
}
