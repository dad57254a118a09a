package armtest

import (
	"encoding/json"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"
)

// Microsoft.Network Standard load balancers.

// loadBalancerKind: Standard only; rules reference the balancer's own children; a pool in use is
// not removed.
var loadBalancerKind = netObjectRules{
	typ: typeLoadBalancer, name: "loadBalancers", inUseCode: "LoadBalancerInUseByVirtualMachineScaleSet", updateTags: true,
	model: func() json.Unmarshaler { return &armnetwork.LoadBalancer{} },
	check: checkLoadBalancer,
	build: func(s *Server, q *armRequest, m any, old *netObject) (*netObject, *apiError) {
		return s.buildLoadBalancer(q, as[*armnetwork.LoadBalancer](m), old)
	},
	view: loadBalancerView,
}.kind()

// checkLoadBalancer checks a load balancer body before the store is read.
func checkLoadBalancer(_ *Server, q *armRequest, v any) *apiError {
	m := as[*armnetwork.LoadBalancer](v)
	id := q.resourceID()
	if e := checkLocation(m.Location); e != nil {
		return e
	}
	m.ID, m.Name, m.Type, m.Etag = nil, nil, nil, nil
	if m.SKU == nil || m.SKU.Name == nil || *m.SKU.Name != armnetwork.LoadBalancerSKUNameStandard {
		return newError(http.StatusBadRequest, "BasicSkuLoadBalancerRetired", "Basic SKU load balancers are retired: set sku.name to Standard.")
	}
	p := m.Properties
	if p == nil || len(p.FrontendIPConfigurations) == 0 {
		return newError(http.StatusBadRequest, "LoadBalancerMustHaveFrontendIPConfiguration",
			"Load balancer %s needs at least one frontend IP configuration.", id)
	}
	frontends, e := childNames(p.FrontendIPConfigurations, func(f *armnetwork.FrontendIPConfiguration) *string { return f.Name })
	if e != nil {
		return e
	}
	pools, e := childNames(p.BackendAddressPools, func(b *armnetwork.BackendAddressPool) *string { return b.Name })
	if e != nil {
		return e
	}
	if e := checkPoolMembers(id, p.BackendAddressPools); e != nil {
		return e
	}
	probes, e := childNames(p.Probes, func(b *armnetwork.Probe) *string { return b.Name })
	if e != nil {
		return e
	}
	for _, pr := range p.Probes {
		if pr.Properties == nil || pr.Properties.Port == nil || pr.Properties.Protocol == nil {
			return newError(http.StatusBadRequest, "InvalidRequestFormat", "Probe %s of %s needs a protocol and a port.", *pr.Name, id)
		}
		if *pr.Properties.Protocol != armnetwork.ProbeProtocolTCP && (pr.Properties.RequestPath == nil || *pr.Properties.RequestPath == "") {
			return newError(http.StatusBadRequest, "ProbeRequestPathRequired", "Probe %s uses %s and needs a requestPath.", *pr.Name, *pr.Properties.Protocol)
		}
	}
	if _, e := childNames(p.LoadBalancingRules, func(b *armnetwork.LoadBalancingRule) *string { return b.Name }); e != nil {
		return e
	}
	for _, r := range p.LoadBalancingRules {
		rp := r.Properties
		if rp == nil || rp.Protocol == nil || rp.FrontendPort == nil || rp.BackendPort == nil {
			return newError(http.StatusBadRequest, "InvalidRequestFormat",
				"Load balancing rule %s of %s needs a protocol, a frontend port and a backend port.", *r.Name, id)
		}
		if e := checkSubResourceRef(id, "frontendIPConfigurations", rp.FrontendIPConfiguration, frontends); e != nil {
			return e
		}
		if rp.BackendAddressPool != nil {
			if e := checkSubResourceRef(id, "backendAddressPools", rp.BackendAddressPool, pools); e != nil {
				return e
			}
		}
		if rp.Probe != nil {
			if e := checkSubResourceRef(id, "probes", rp.Probe, probes); e != nil {
				return e
			}
		}
	}
	if _, e := childNames(p.OutboundRules, func(b *armnetwork.OutboundRule) *string { return b.Name }); e != nil {
		return e
	}
	for _, r := range p.OutboundRules {
		rp := r.Properties
		if rp == nil || rp.Protocol == nil || len(rp.FrontendIPConfigurations) == 0 {
			return newError(http.StatusBadRequest, "InvalidRequestFormat", "Outbound rule %s of %s needs a protocol and frontend IP configurations.",
				*r.Name, id)
		}
		for _, f := range rp.FrontendIPConfigurations {
			if e := checkSubResourceRef(id, "frontendIPConfigurations", f, frontends); e != nil {
				return e
			}
		}
		if e := checkSubResourceRef(id, "backendAddressPools", rp.BackendAddressPool, pools); e != nil {
			return e
		}
	}
	return nil
}

// buildLoadBalancer makes the network object of a checked load balancer body (old: its current
// version, or nil); s.mu is held.
func (s *Server) buildLoadBalancer(q *armRequest, m *armnetwork.LoadBalancer, old *netObject) (*netObject, *apiError) {
	id, loc := q.resourceID(), *m.Location
	p := m.Properties
	o := &netObject{id: id, typ: typeLoadBalancer, location: loc, model: m}
	undo := func() { o.releaseExcept(old) }
	pools, _ := childNames(p.BackendAddressPools, func(b *armnetwork.BackendAddressPool) *string { return b.Name })
	for _, f := range p.FrontendIPConfigurations {
		fp := f.Properties
		f.ID = to.Ptr(id + "/frontendIPConfigurations/" + *f.Name)
		switch {
		case fp == nil || (fp.PublicIPAddress == nil) == (fp.Subnet == nil):
			undo()
			return nil, newError(http.StatusBadRequest, "InvalidRequestFormat", "Frontend %s of %s needs either a public IP address or a subnet.", *f.Name, id)
		case fp.PublicIPAddress != nil:
			pip := s.object(deref(fp.PublicIPAddress.ID), typePublicIP)
			if pip == nil || !strings.EqualFold(pip.location, loc) {
				undo()
				return nil, errReference(deref(fp.PublicIPAddress.ID), id)
			}
			for _, u := range s.usersOf(pip.id) {
				if !strings.EqualFold(u, id) {
					undo()
					return nil, newError(http.StatusBadRequest, "PublicIPAddressInUse", "Public IP address %s is already used by %s.", pip.id, u)
				}
			}
			o.refs = append(o.refs, strings.ToLower(pip.id))
		default:
			sn := s.findSubnet(deref(fp.Subnet.ID))
			if sn == nil || !strings.EqualFold(sn.vnet.location, loc) {
				undo()
				return nil, errReference(deref(fp.Subnet.ID), id)
			}
			a, e := s.holdAddress(sn, fp.PrivateIPAllocationMethod, fp.PrivateIPAddress, *f.ID)
			if e != nil {
				undo()
				return nil, e
			}
			o.held = append(o.held, heldAddress{sn, a})
			fp.PrivateIPAddress = to.Ptr(a.String())
			o.refs = append(o.refs, strings.ToLower(sn.id))
		}
	}
	for _, b := range p.BackendAddressPools {
		b.ID = to.Ptr(id + "/backendAddressPools/" + *b.Name)
	}
	for _, pr := range p.Probes {
		pr.ID = to.Ptr(id + "/probes/" + *pr.Name)
	}
	for _, r := range p.LoadBalancingRules {
		r.ID = to.Ptr(id + "/loadBalancingRules/" + *r.Name)
	}
	for _, r := range p.OutboundRules {
		r.ID = to.Ptr(id + "/outboundRules/" + *r.Name)
	}
	if old != nil {
		for _, pool := range s.poolsInUse(old) {
			if !pools[strings.ToLower(lastSegment(pool))] {
				undo()
				return nil, newError(http.StatusBadRequest, "CannotRemoveBackendAddressPoolInUse", "Backend pool %s is in use and cannot be removed.", pool)
			}
		}
	}
	return o, nil
}

// poolsInUse lists the backend pools of a load balancer some NIC or scale set is in; s.mu is held.
func (s *Server) poolsInUse(lb *netObject) []string {
	var out []string
	for _, b := range as[*armnetwork.LoadBalancer](lb.model).Properties.BackendAddressPools {
		if len(s.usersOf(deref(b.ID))) > 0 {
			out = append(out, deref(b.ID))
		}
	}
	return out
}

// checkPoolMembers refuses backend pool members given by a network interface IP configuration in
// a load balancer's body. Such members join a pool through their NIC or scale set, never through
// the load balancer: Network answers ModificationOfNICIpConfigBackendPoolNotSupported to a write
// that "adds/modifies/deletes backend address pool members that are specified with a network
// interface IP configuration" (hashicorp/terraform-provider-azurerm#10496). GET returns those
// members, so a read-modify-write of a load balancer whose pool has NIC or scale set members
// fails (hashicorp/terraform-provider-azurerm#7691, Azure/azure-rest-api-specs#10104): tags change
// through UpdateTags (PATCH), which the server serves for load balancers.
func checkPoolMembers(id string, pools []*armnetwork.BackendAddressPool) *apiError {
	for _, b := range pools {
		if b.Properties == nil {
			continue
		}
		for _, a := range b.Properties.LoadBalancerBackendAddresses {
			if a != nil && a.Properties != nil && a.Properties.NetworkInterfaceIPConfiguration != nil {
				return newError(http.StatusBadRequest, "ModificationOfNICIpConfigBackendPoolNotSupported",
					"Operation on backend pool %s/backendAddressPools/%s not allowed since it adds/modifies/deletes backend address pool "+
						"members that are specified with a network interface IP configuration.", id, deref(b.Name))
			}
		}
	}
	return nil
}

// poolMembers lists the IDs of the IP configurations in a backend pool: those of network
// interfaces (.../networkInterfaces/{nic}/ipConfigurations/{name}) and of scale set instances
// (.../virtualMachineScaleSets/{ss}/virtualMachines/{id}/networkInterfaces/{nic}/ipConfigurations/{name}),
// as backendIPConfigurations holds "references to IP addresses defined in network interfaces"
// (BackendAddressPoolPropertiesFormat in the Network REST API); s.mu is held.
func (s *Server) poolMembers(pool string) []string {
	in := func(refs []*armnetwork.BackendAddressPool) bool {
		return slices.ContainsFunc(refs, func(r *armnetwork.BackendAddressPool) bool { return r != nil && strings.EqualFold(deref(r.ID), pool) })
	}
	var out []string
	for _, o := range s.objects {
		if nic, ok := o.model.(*armnetwork.Interface); ok {
			for _, c := range nic.Properties.IPConfigurations {
				if c.Properties != nil && in(c.Properties.LoadBalancerBackendAddressPools) {
					out = append(out, o.id+"/ipConfigurations/"+deref(c.Name))
				}
			}
		}
	}
	for _, ss := range s.scaleSets {
		for _, vm := range ss.sortedInstances() {
			for _, n := range vm.profile.NetworkProfile.NetworkInterfaceConfigurations {
				for _, c := range n.Properties.IPConfigurations {
					refs := make([]*armnetwork.BackendAddressPool, 0, len(c.Properties.LoadBalancerBackendAddressPools))
					for _, r := range c.Properties.LoadBalancerBackendAddressPools {
						refs = append(refs, &armnetwork.BackendAddressPool{ID: r.ID})
					}
					if in(refs) {
						out = append(out, vm.resourceID(ss)+"/networkInterfaces/"+deref(n.Name)+"/ipConfigurations/"+deref(c.Name))
					}
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// loadBalancerView is a load balancer as GET returns it, with the members of its backend pools
// both as backendIPConfigurations and as loadBalancerBackendAddresses naming their IP
// configuration.
func loadBalancerView(s *Server, o *netObject) any {
	out := *clone(as[*armnetwork.LoadBalancer](o.model))
	out.ID, out.Name, out.Type, out.Location = to.Ptr(o.id), to.Ptr(lastSegment(o.id)), to.Ptr(o.typ), to.Ptr(o.location)
	out.Properties.ProvisioningState = to.Ptr(o.state)
	for _, b := range out.Properties.BackendAddressPools {
		b.Properties = &armnetwork.BackendAddressPoolPropertiesFormat{}
		for _, m := range s.poolMembers(deref(b.ID)) {
			b.Properties.BackendIPConfigurations = append(b.Properties.BackendIPConfigurations, &armnetwork.InterfaceIPConfiguration{ID: to.Ptr(m)})
			b.Properties.LoadBalancerBackendAddresses = append(b.Properties.LoadBalancerBackendAddresses, &armnetwork.LoadBalancerBackendAddress{
				Name:       to.Ptr(lastSegment(strings.TrimSuffix(m, "/ipConfigurations/"+lastSegment(m))) + "_" + lastSegment(m)),
				Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{NetworkInterfaceIPConfiguration: &armnetwork.SubResource{ID: to.Ptr(m)}},
			})
		}
	}
	return out
}
