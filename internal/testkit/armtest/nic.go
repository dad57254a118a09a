package armtest

import (
	"encoding/json"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"
)

// Microsoft.Network network interfaces, which virtual machines (vm.go) are attached to.

// nicKind: IP configurations hold subnet addresses; a NIC attached to a virtual machine is in use.
var nicKind = netObjectRules{
	typ: typeNIC, name: "networkInterfaces", inUseCode: "NicInUse",
	model: func() json.Unmarshaler { return &armnetwork.Interface{} },
	check: checkNIC,
	build: func(s *Server, q *armRequest, m any, old *netObject) (*netObject, *apiError) {
		return s.buildNIC(q, as[*armnetwork.Interface](m), old)
	},
	view: nicObjectView,
}.kind()

// checkNIC checks a network interface body before the store is read.
func checkNIC(_ *Server, q *armRequest, v any) *apiError {
	m := as[*armnetwork.Interface](v)
	id := q.resourceID()
	if e := checkLocation(m.Location); e != nil {
		return e
	}
	m.ID, m.Name, m.Type, m.Etag = nil, nil, nil, nil
	p := m.Properties
	if p == nil || len(p.IPConfigurations) == 0 {
		return newError(http.StatusBadRequest, "NetworkInterfaceMustHaveIPConfiguration", "Network interface %s needs at least one IP configuration.", id)
	}
	if _, e := childNames(p.IPConfigurations, func(c *armnetwork.InterfaceIPConfiguration) *string { return c.Name }); e != nil {
		return e
	}
	return nil
}

// buildNIC makes the network object of a checked network interface body (old: its current
// version, or nil); s.mu is held.
func (s *Server) buildNIC(q *armRequest, m *armnetwork.Interface, old *netObject) (*netObject, *apiError) {
	id, loc := q.resourceID(), *m.Location
	p := m.Properties
	o := &netObject{id: id, typ: typeNIC, location: loc, model: m}
	if old != nil {
		o.vm = old.vm
	}
	if p.NetworkSecurityGroup != nil {
		if s.object(deref(p.NetworkSecurityGroup.ID), typeNSG) == nil {
			return nil, errReference(deref(p.NetworkSecurityGroup.ID), id)
		}
		o.refs = append(o.refs, strings.ToLower(deref(p.NetworkSecurityGroup.ID)))
	}
	primaries := 0
	for _, c := range p.IPConfigurations {
		c.ID = to.Ptr(id + "/ipConfigurations/" + *c.Name)
		cp := c.Properties
		if cp == nil || cp.Subnet == nil {
			o.releaseExcept(old)
			return nil, newError(http.StatusBadRequest, "InvalidRequestFormat", "IP configuration %s needs properties.subnet.", *c.ID)
		}
		if len(p.IPConfigurations) == 1 || (cp.Primary != nil && *cp.Primary) {
			primaries++
			cp.Primary = to.Ptr(true)
		}
		sn := s.findSubnet(deref(cp.Subnet.ID))
		if sn == nil || !strings.EqualFold(sn.vnet.location, loc) {
			o.releaseExcept(old)
			return nil, errReference(deref(cp.Subnet.ID), id)
		}
		a, e := s.holdAddress(sn, cp.PrivateIPAllocationMethod, cp.PrivateIPAddress, *c.ID)
		if e != nil {
			o.releaseExcept(old)
			return nil, e
		}
		o.held = append(o.held, heldAddress{sn, a})
		cp.PrivateIPAddress = to.Ptr(a.String())
		cp.PrivateIPAddressVersion = to.Ptr(armnetwork.IPVersionIPv4)
		o.refs = append(o.refs, strings.ToLower(sn.id))
		for _, pool := range cp.LoadBalancerBackendAddressPools {
			if pool == nil || pool.ID == nil || s.backendPool(*pool.ID) == "" {
				o.releaseExcept(old)
				return nil, newError(http.StatusBadRequest, "InvalidResourceReference", "A backend pool referenced by %s was not found.", id)
			}
			o.refs = append(o.refs, strings.ToLower(*pool.ID))
		}
		if cp.PublicIPAddress != nil {
			if s.object(deref(cp.PublicIPAddress.ID), typePublicIP) == nil {
				o.releaseExcept(old)
				return nil, errReference(deref(cp.PublicIPAddress.ID), id)
			}
			o.refs = append(o.refs, strings.ToLower(*cp.PublicIPAddress.ID))
		}
	}
	if primaries != 1 {
		o.releaseExcept(old)
		return nil, newError(http.StatusBadRequest, "InvalidRequestFormat", "Exactly one IP configuration of %s must be primary; %d are.", id, primaries)
	}
	return o, nil
}

// nicAddress is the primary address of a NIC and whether it forwards IP; s.mu is held.
func nicAddress(o *netObject) (netip.Addr, bool) {
	m := as[*armnetwork.Interface](o.model)
	forward := m.Properties.EnableIPForwarding != nil && *m.Properties.EnableIPForwarding
	for _, c := range m.Properties.IPConfigurations {
		if c.Properties.Primary != nil && *c.Properties.Primary {
			a, _ := netip.ParseAddr(deref(c.Properties.PrivateIPAddress))
			return a, forward
		}
	}
	return netip.Addr{}, forward
}

// nicObjectView is a network interface as GET returns it, with the virtual machine it is attached to.
func nicObjectView(s *Server, o *netObject) any {
	out := *clone(as[*armnetwork.Interface](o.model))
	out.ID, out.Name, out.Type, out.Location = to.Ptr(o.id), to.Ptr(lastSegment(o.id)), to.Ptr(o.typ), to.Ptr(o.location)
	out.Properties.ProvisioningState = to.Ptr(o.state)
	out.Properties.VirtualMachine = nil
	if vm := s.vms[o.vm]; vm != nil {
		out.Properties.VirtualMachine = &armnetwork.SubResource{ID: to.Ptr(vm.id)}
	}
	return out
}

// A network interface stays reserved for the virtual machine it was attached to for 180 seconds
// after that machine is deleted: deleting it, or attaching it to another machine, is refused
// meanwhile with a 400 NicReservedForAnotherVm (message as Azure words it, quoted in
// microsoft/AzureTRE#4474 and gardenlinux/gardenlinux#4133), which is not retried by azcore. A
// NIC the machine references with deleteOption Delete goes with the machine instead (vm.go).
func (o *netObject) reserved() *apiError {
	if o.reservedFor == "" || !time.Now().Before(o.reservedUntil) {
		return nil
	}
	left := int((time.Until(o.reservedUntil) + time.Second - 1) / time.Second)
	return newError(http.StatusBadRequest, "NicReservedForAnotherVm",
		"Nic(s) in request is reserved for another Virtual Machine for %d seconds. Please provide another nic(s) or retry after %d seconds. Reserved "+
			"VM: %s",
		left, left, o.reservedFor)
}
