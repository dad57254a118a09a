package armtest

import (
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"
)

// Microsoft.Network resources a cluster is made of: network security groups, public IP
// addresses, load balancers and network interfaces. Each is kept as its SDK model as accepted,
// with what it references, so that a delete of something in use is refused as Network refuses it.

// netObject is a network security group, public IP address, load balancer or network interface.
type netObject struct {
	id, typ, location string
	state             armnetwork.ProvisioningState
	// model is *armnetwork.SecurityGroup, *armnetwork.PublicIPAddress, *armnetwork.LoadBalancer
	// or *armnetwork.Interface, read-only members cleared.
	model any
	// refs are the lower-case IDs of the resources (or their children) it references.
	refs []string
	// held are the subnet addresses it holds (NIC IP configurations, internal frontends).
	held []heldAddress
	// address is a public IP address's.
	address netip.Addr
	// vm is the lower-case ID of the VM a NIC is attached to.
	vm string
}

type heldAddress struct {
	subnet *subnet
	addr   netip.Addr
}

func (o *netObject) release() { o.releaseExcept(nil) }

// releaseExcept frees the addresses o holds that keep (another version of the resource) does not.
func (o *netObject) releaseExcept(keep *netObject) {
	for _, h := range o.held {
		if keep == nil || !slices.Contains(keep.held, h) {
			delete(h.subnet.used, h.addr)
		}
	}
	o.held = nil
}

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
	return netip.Addr{}, newError(http.StatusBadRequest, "PublicIPCountLimitReached", "Cannot create more than 254 public IP addresses in this subscription in this region.")
}

// object returns the network object of an ID, or nil; s.mu is held.
func (s *Server) object(id, typ string) *netObject {
	o := s.objects[strings.ToLower(id)]
	if o == nil || !strings.EqualFold(o.typ, typ) {
		return nil
	}
	return o
}

// backendPool returns the ID of the load balancer holding the backend pool with this ID, or "";
// s.mu is held.
func (s *Server) backendPool(id string) string {
	i := strings.Index(strings.ToLower(id), "/backendaddresspools/")
	if i < 0 {
		return ""
	}
	lb := s.object(id[:i], typeLoadBalancer)
	if lb == nil {
		return ""
	}
	name := id[i+len("/backendaddresspools/"):]
	for _, p := range lb.model.(*armnetwork.LoadBalancer).Properties.BackendAddressPools {
		if strings.EqualFold(deref(p.Name), name) {
			return lb.id
		}
	}
	return ""
}

// usersOf lists the resources that reference id or one of its children; s.mu is held.
func (s *Server) usersOf(id string) []string {
	key := strings.ToLower(id)
	refers := func(ref string) bool { return ref == key || strings.HasPrefix(ref, key+"/") }
	var out []string
	for _, o := range s.objects {
		for _, r := range o.refs {
			if refers(r) {
				out = append(out, o.id)
				break
			}
		}
	}
	for _, vm := range s.vms {
		for _, n := range vm.nics {
			if refers(n) {
				out = append(out, vm.id)
			}
		}
	}
	for _, v := range s.vnets {
		for _, sn := range v.subnets {
			if refers(strings.ToLower(sn.nsg)) || refers(strings.ToLower(sn.table)) {
				out = append(out, sn.id)
			}
		}
	}
	for _, ss := range s.scaleSets {
		for _, r := range scaleSetRefs(ss) {
			if refers(r) {
				out = append(out, ss.id)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// scaleSetRefs are the load balancer pools a scale set's NICs are in (lower-case IDs).
func scaleSetRefs(ss *scaleSet) []string {
	var out []string
	np := ss.model.Properties.VirtualMachineProfile.NetworkProfile
	for _, c := range np.NetworkInterfaceConfigurations {
		for _, ipc := range c.Properties.IPConfigurations {
			for _, p := range ipc.Properties.LoadBalancerBackendAddressPools {
				out = append(out, strings.ToLower(deref(p.ID)))
			}
		}
	}
	return out
}

// subResourceRef checks that a reference inside a resource names one of its children of kind
// (e.g. "probes") and returns that child's name.
func subResourceRef(owner, kind string, ref *armnetwork.SubResource, names map[string]bool) (string, *apiError) {
	if ref == nil || ref.ID == nil {
		return "", newError(http.StatusBadRequest, "InvalidRequestFormat", "%s: a reference to %s has no id.", owner, kind)
	}
	prefix := strings.ToLower(owner + "/" + kind + "/")
	if !strings.HasPrefix(strings.ToLower(*ref.ID), prefix) || !names[strings.ToLower((*ref.ID)[len(prefix):])] {
		return "", errReference(*ref.ID, owner)
	}
	return (*ref.ID)[len(prefix):], nil
}

func childNames[T any](items []*T, name func(*T) *string) (map[string]bool, *apiError) {
	out := map[string]bool{}
	for i, it := range items {
		if it == nil || name(it) == nil || *name(it) == "" {
			return nil, newError(http.StatusBadRequest, "InvalidRequestFormat", "Item %d has no name.", i)
		}
		n := strings.ToLower(*name(it))
		if out[n] {
			return nil, newError(http.StatusBadRequest, "InvalidRequestFormat", "The name %q is used twice.", *name(it))
		}
		out[n] = true
	}
	return out, nil
}

func locationOf(loc *string) (string, *apiError) {
	if loc == nil || *loc == "" {
		return "", newError(http.StatusBadRequest, "LocationRequired", "The location property is required for this definition.")
	}
	return *loc, nil
}

// putObject stores a new or updated object after its checks, under an operation; s.mu is held.
func (s *Server) putObject(w http.ResponseWriter, q *armRequest, o *netObject, old *netObject) {
	status := http.StatusCreated
	if old != nil {
		status = http.StatusOK
		old.releaseExcept(o)
	}
	o.state = armnetwork.ProvisioningStateUpdating
	s.objects[strings.ToLower(o.id)] = o
	op := s.startOperation(q, o.id, func(failure *apiError) func() {
		o.state = settled(failure)
		return nil
	})
	s.writeStarted(w, op, status, s.objectView(o))
}

func (s *Server) getObject(w http.ResponseWriter, q *armRequest) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.object(q.resourceID(), q.route.typ)
	if o == nil {
		return errResourceNotFound(q.route.typ, q.name(2), q.group)
	}
	writeJSON(w, http.StatusOK, s.objectView(o))
	return nil
}

// inUseCodes are Network's error codes for deleting a resource still in use.
var inUseCodes = map[string]string{
	typeNSG:          "InUseNetworkSecurityGroupCannotBeDeleted",
	typePublicIP:     "PublicIPAddressCannotBeDeleted",
	typeLoadBalancer: "LoadBalancerInUseByVirtualMachineScaleSet",
	typeNIC:          "NicInUse",
}

func (s *Server) deleteObject(w http.ResponseWriter, q *armRequest) *apiError {
	id := q.resourceID()
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.object(id, q.route.typ)
	if o == nil {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	users := s.usersOf(id)
	if o.vm != "" {
		users = append(users, o.vm)
	}
	if len(users) > 0 {
		return newError(http.StatusBadRequest, inUseCodes[o.typ], "%s %s is in use by %s and cannot be deleted.", lastSegment(o.typ), id, strings.Join(users, ", "))
	}
	if op := s.busy(id); op != nil {
		return s.conflict(op, id)
	}
	o.state = armnetwork.ProvisioningStateDeleting
	op := s.startOperation(q, id, func(failure *apiError) func() {
		if failure != nil {
			o.state = armnetwork.ProvisioningStateFailed
			return nil
		}
		o.release()
		if o.address.IsValid() {
			delete(s.publicUsed, o.address)
		}
		delete(s.objects, strings.ToLower(id))
		return nil
	})
	s.writeStarted(w, op, http.StatusAccepted, nil)
	return nil
}

// Network security groups.

func (s *Server) putNSG(w http.ResponseWriter, q *armRequest) *apiError {
	var m armnetwork.SecurityGroup
	if e := s.decodeBody(q, &m); e != nil {
		return e
	}
	id := q.resourceID()
	loc, e := locationOf(m.Location)
	if e != nil {
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
	s.mu.Lock()
	defer s.mu.Unlock()
	if op := s.busy(id); op != nil {
		return s.conflict(op, id)
	}
	old := s.object(id, typeNSG)
	s.putObject(w, q, &netObject{id: id, typ: typeNSG, location: loc, model: &m}, old)
	return nil
}

// Public IP addresses.

func (s *Server) putPublicIP(w http.ResponseWriter, q *armRequest) *apiError {
	var m armnetwork.PublicIPAddress
	if e := s.decodeBody(q, &m); e != nil {
		return e
	}
	id := q.resourceID()
	loc, e := locationOf(m.Location)
	if e != nil {
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
		return newError(http.StatusBadRequest, "StandardSkuPublicIPAddressesCanOnlyUseStaticAllocation", "Standard SKU public IP addresses need publicIPAllocationMethod Static.")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if op := s.busy(id); op != nil {
		return s.conflict(op, id)
	}
	old := s.object(id, typePublicIP)
	if dns := p.DNSSettings; dns != nil && dns.DomainNameLabel != nil {
		fqdn := strings.ToLower(*dns.DomainNameLabel + "." + loc + ".cloudapp.azure.com")
		for _, other := range s.objects {
			if other != old && other.typ == typePublicIP {
				if od := other.model.(*armnetwork.PublicIPAddress).Properties.DNSSettings; od != nil && strings.EqualFold(deref(od.Fqdn), fqdn) {
					return newError(http.StatusBadRequest, "DnsRecordInUse", "DNS record %s is already used by another public IP.", fqdn)
				}
			}
		}
		dns.Fqdn = to.Ptr(fqdn)
	}
	o := &netObject{id: id, typ: typePublicIP, location: loc, model: &m}
	if old != nil {
		if oldSKU := old.model.(*armnetwork.PublicIPAddress).SKU.Name; oldSKU == nil || *oldSKU != *m.SKU.Name {
			return changeNotAllowed("sku")
		}
		o.address = old.address
	} else {
		a, e := s.allocatePublicIP()
		if e != nil {
			return e
		}
		o.address = a
	}
	p.IPAddress = to.Ptr(o.address.String())
	p.PublicIPAddressVersion = to.Ptr(armnetwork.IPVersionIPv4)
	p.IPConfiguration = nil
	s.putObject(w, q, o, old)
	return nil
}

// Load balancers.

func (s *Server) putLoadBalancer(w http.ResponseWriter, q *armRequest) *apiError {
	var m armnetwork.LoadBalancer
	if e := s.decodeBody(q, &m); e != nil {
		return e
	}
	id := q.resourceID()
	loc, e := locationOf(m.Location)
	if e != nil {
		return e
	}
	m.ID, m.Name, m.Type, m.Etag = nil, nil, nil, nil
	if m.SKU == nil || m.SKU.Name == nil || *m.SKU.Name != armnetwork.LoadBalancerSKUNameStandard {
		return newError(http.StatusBadRequest, "BasicSkuLoadBalancerRetired", "Basic SKU load balancers are retired: set sku.name to Standard.")
	}
	p := m.Properties
	if p == nil || len(p.FrontendIPConfigurations) == 0 {
		return newError(http.StatusBadRequest, "LoadBalancerMustHaveFrontendIPConfiguration", "Load balancer %s needs at least one frontend IP configuration.", id)
	}
	frontends, e := childNames(p.FrontendIPConfigurations, func(f *armnetwork.FrontendIPConfiguration) *string { return f.Name })
	if e != nil {
		return e
	}
	pools, e := childNames(p.BackendAddressPools, func(b *armnetwork.BackendAddressPool) *string { return b.Name })
	if e != nil {
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
			return newError(http.StatusBadRequest, "InvalidRequestFormat", "Load balancing rule %s of %s needs a protocol, a frontend port and a backend port.", *r.Name, id)
		}
		if _, e := subResourceRef(id, "frontendIPConfigurations", rp.FrontendIPConfiguration, frontends); e != nil {
			return e
		}
		if rp.BackendAddressPool != nil {
			if _, e := subResourceRef(id, "backendAddressPools", rp.BackendAddressPool, pools); e != nil {
				return e
			}
		}
		if rp.Probe != nil {
			if _, e := subResourceRef(id, "probes", rp.Probe, probes); e != nil {
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
			return newError(http.StatusBadRequest, "InvalidRequestFormat", "Outbound rule %s of %s needs a protocol and frontend IP configurations.", *r.Name, id)
		}
		for _, f := range rp.FrontendIPConfigurations {
			if _, e := subResourceRef(id, "frontendIPConfigurations", f, frontends); e != nil {
				return e
			}
		}
		if _, e := subResourceRef(id, "backendAddressPools", rp.BackendAddressPool, pools); e != nil {
			return e
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if op := s.busy(id); op != nil {
		return s.conflict(op, id)
	}
	old := s.object(id, typeLoadBalancer)
	o := &netObject{id: id, typ: typeLoadBalancer, location: loc, model: &m}
	undo := func() { o.releaseExcept(old) }
	for _, f := range p.FrontendIPConfigurations {
		fp := f.Properties
		f.ID = to.Ptr(id + "/frontendIPConfigurations/" + *f.Name)
		switch {
		case fp == nil || (fp.PublicIPAddress == nil) == (fp.Subnet == nil):
			undo()
			return newError(http.StatusBadRequest, "InvalidRequestFormat", "Frontend %s of %s needs either a public IP address or a subnet.", *f.Name, id)
		case fp.PublicIPAddress != nil:
			pip := s.object(deref(fp.PublicIPAddress.ID), typePublicIP)
			if pip == nil || !strings.EqualFold(pip.location, loc) {
				undo()
				return errReference(deref(fp.PublicIPAddress.ID), id)
			}
			for _, u := range s.usersOf(pip.id) {
				if !strings.EqualFold(u, id) {
					undo()
					return newError(http.StatusBadRequest, "PublicIPAddressInUse", "Public IP address %s is already used by %s.", pip.id, u)
				}
			}
			o.refs = append(o.refs, strings.ToLower(pip.id))
		default:
			sn := s.findSubnet(deref(fp.Subnet.ID))
			if sn == nil || !strings.EqualFold(sn.vnet.location, loc) {
				undo()
				return errReference(deref(fp.Subnet.ID), id)
			}
			a, e := s.holdAddress(sn, fp.PrivateIPAllocationMethod, fp.PrivateIPAddress, *f.ID)
			if e != nil {
				undo()
				return e
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
				return newError(http.StatusBadRequest, "CannotRemoveBackendAddressPoolInUse", "Backend pool %s is in use and cannot be removed.", pool)
			}
		}
	}
	s.putObject(w, q, o, old)
	return nil
}

// poolsInUse lists the backend pools of a load balancer some NIC or scale set is in; s.mu is held.
func (s *Server) poolsInUse(lb *netObject) []string {
	var out []string
	for _, b := range lb.model.(*armnetwork.LoadBalancer).Properties.BackendAddressPools {
		if len(s.usersOf(deref(b.ID))) > 0 {
			out = append(out, deref(b.ID))
		}
	}
	return out
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
		return netip.Addr{}, newError(http.StatusBadRequest, "PrivateIPAddressRequired", "%s has static allocation and needs privateIPAddress (an address of %s), not %q.", owner, sn.prefix, deref(addr))
	}
	if !sn.prefix.Contains(a) {
		return netip.Addr{}, newError(http.StatusBadRequest, "PrivateIPAddressNotInSubnet", "Private static IP address %s does not belong to the range of subnet prefix %s.", a, sn.prefix)
	}
	if holder, taken := sn.used[a]; taken && holder != owner {
		return netip.Addr{}, newError(http.StatusBadRequest, "PrivateIPAddressInUse", "IP configuration %s is using the private IP address %s which is already allocated to resource %s.", owner, a, holder)
	}
	sn.used[a] = owner
	return a, nil
}

// Network interfaces.

func (s *Server) putNIC(w http.ResponseWriter, q *armRequest) *apiError {
	var m armnetwork.Interface
	if e := s.decodeBody(q, &m); e != nil {
		return e
	}
	id := q.resourceID()
	loc, e := locationOf(m.Location)
	if e != nil {
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
	s.mu.Lock()
	defer s.mu.Unlock()
	if op := s.busy(id); op != nil {
		return s.conflict(op, id)
	}
	old := s.object(id, typeNIC)
	o := &netObject{id: id, typ: typeNIC, location: loc, model: &m}
	if old != nil {
		o.vm = old.vm
	}
	if p.NetworkSecurityGroup != nil {
		if s.object(deref(p.NetworkSecurityGroup.ID), typeNSG) == nil {
			return errReference(deref(p.NetworkSecurityGroup.ID), id)
		}
		o.refs = append(o.refs, strings.ToLower(deref(p.NetworkSecurityGroup.ID)))
	}
	primaries := 0
	for _, c := range p.IPConfigurations {
		c.ID = to.Ptr(id + "/ipConfigurations/" + *c.Name)
		cp := c.Properties
		if cp == nil || cp.Subnet == nil {
			o.releaseExcept(old)
			return newError(http.StatusBadRequest, "InvalidRequestFormat", "IP configuration %s needs properties.subnet.", *c.ID)
		}
		if len(p.IPConfigurations) == 1 || (cp.Primary != nil && *cp.Primary) {
			primaries++
			cp.Primary = to.Ptr(true)
		}
		sn := s.findSubnet(deref(cp.Subnet.ID))
		if sn == nil || !strings.EqualFold(sn.vnet.location, loc) {
			o.releaseExcept(old)
			return errReference(deref(cp.Subnet.ID), id)
		}
		a, e := s.holdAddress(sn, cp.PrivateIPAllocationMethod, cp.PrivateIPAddress, *c.ID)
		if e != nil {
			o.releaseExcept(old)
			return e
		}
		o.held = append(o.held, heldAddress{sn, a})
		cp.PrivateIPAddress = to.Ptr(a.String())
		cp.PrivateIPAddressVersion = to.Ptr(armnetwork.IPVersionIPv4)
		o.refs = append(o.refs, strings.ToLower(sn.id))
		for _, pool := range cp.LoadBalancerBackendAddressPools {
			if pool == nil || pool.ID == nil || s.backendPool(*pool.ID) == "" {
				o.releaseExcept(old)
				return newError(http.StatusBadRequest, "InvalidResourceReference", "A backend pool referenced by %s was not found.", id)
			}
			o.refs = append(o.refs, strings.ToLower(*pool.ID))
		}
		if cp.PublicIPAddress != nil {
			if s.object(deref(cp.PublicIPAddress.ID), typePublicIP) == nil {
				o.releaseExcept(old)
				return errReference(deref(cp.PublicIPAddress.ID), id)
			}
			o.refs = append(o.refs, strings.ToLower(*cp.PublicIPAddress.ID))
		}
	}
	if primaries != 1 {
		o.releaseExcept(old)
		return newError(http.StatusBadRequest, "InvalidRequestFormat", "Exactly one IP configuration of %s must be primary; %d are.", id, primaries)
	}
	s.putObject(w, q, o, old)
	return nil
}

// nicAddress is the primary address of a NIC and whether it forwards IP; s.mu is held.
func nicAddress(o *netObject) (netip.Addr, bool) {
	m := o.model.(*armnetwork.Interface)
	forward := m.Properties.EnableIPForwarding != nil && *m.Properties.EnableIPForwarding
	for _, c := range m.Properties.IPConfigurations {
		if c.Properties.Primary != nil && *c.Properties.Primary {
			a, _ := netip.ParseAddr(deref(c.Properties.PrivateIPAddress))
			return a, forward
		}
	}
	return netip.Addr{}, forward
}

// objectView is an object as GET returns it.
func (s *Server) objectView(o *netObject) any {
	name, state := lastSegment(o.id), to.Ptr(o.state)
	switch m := o.model.(type) {
	case *armnetwork.SecurityGroup:
		out := *clone(m)
		out.ID, out.Name, out.Type, out.Location = to.Ptr(o.id), to.Ptr(name), to.Ptr(o.typ), to.Ptr(o.location)
		out.Properties.ProvisioningState = state
		out.Properties.Subnets = nil
		for _, u := range s.usersOf(o.id) {
			if strings.Contains(strings.ToLower(u), "/subnets/") {
				out.Properties.Subnets = append(out.Properties.Subnets, &armnetwork.Subnet{ID: to.Ptr(u)})
			}
		}
		return out
	case *armnetwork.PublicIPAddress:
		out := *clone(m)
		out.ID, out.Name, out.Type, out.Location = to.Ptr(o.id), to.Ptr(name), to.Ptr(o.typ), to.Ptr(o.location)
		out.Properties.ProvisioningState = state
		for _, u := range s.usersOf(o.id) {
			out.Properties.IPConfiguration = &armnetwork.IPConfiguration{ID: to.Ptr(u)}
		}
		return out
	case *armnetwork.LoadBalancer:
		out := *clone(m)
		out.ID, out.Name, out.Type, out.Location = to.Ptr(o.id), to.Ptr(name), to.Ptr(o.typ), to.Ptr(o.location)
		out.Properties.ProvisioningState = state
		for _, b := range out.Properties.BackendAddressPools {
			b.Properties = &armnetwork.BackendAddressPoolPropertiesFormat{}
			for _, u := range s.usersOf(deref(b.ID)) {
				b.Properties.BackendIPConfigurations = append(b.Properties.BackendIPConfigurations, &armnetwork.InterfaceIPConfiguration{ID: to.Ptr(u)})
			}
		}
		return out
	case *armnetwork.Interface:
		out := *clone(m)
		out.ID, out.Name, out.Type, out.Location = to.Ptr(o.id), to.Ptr(name), to.Ptr(o.typ), to.Ptr(o.location)
		out.Properties.ProvisioningState = state
		out.Properties.VirtualMachine = nil
		if vm := s.vms[o.vm]; vm != nil {
			out.Properties.VirtualMachine = &armnetwork.SubResource{ID: to.Ptr(vm.id)}
		}
		return out
	}
	panic(fmt.Sprintf("armtest: no view of %T", o.model))
}

// Virtual networks.

func (s *Server) deleteVirtualNetwork(w http.ResponseWriter, q *armRequest) *apiError {
	id := q.resourceID()
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.vnets[strings.ToLower(id)]
	if v == nil {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	for _, sn := range v.subnets {
		if len(sn.used) > 0 {
			return errSubnetInUse(sn, "deleted")
		}
	}
	if op := s.busy(id); op != nil {
		return s.conflict(op, id)
	}
	v.state = armnetwork.ProvisioningStateDeleting
	op := s.startOperation(q, id, func(failure *apiError) func() {
		if failure != nil {
			v.state = armnetwork.ProvisioningStateFailed
		} else {
			delete(s.vnets, strings.ToLower(id))
		}
		return nil
	})
	s.writeStarted(w, op, http.StatusAccepted, nil)
	return nil
}

// ResourceIDs lists the resources of a resource group (virtual networks, route tables, network
// security groups, public IP addresses, load balancers, network interfaces, virtual machines,
// scale sets and images), sorted: what a test checks a destroy left behind.
func (s *Server) ResourceIDs(group string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	prefix := strings.ToLower(s.ResourceGroupID(group)) + "/"
	var out []string
	add := func(id string) {
		if strings.HasPrefix(strings.ToLower(id), prefix) {
			out = append(out, id)
		}
	}
	for _, v := range s.vnets {
		add(v.id)
	}
	for _, t := range s.tables {
		add(t.id)
		for _, r := range t.routes {
			add(r.id)
		}
	}
	for _, o := range s.objects {
		add(o.id)
	}
	for _, vm := range s.vms {
		add(vm.id)
	}
	for _, ss := range s.scaleSets {
		add(ss.id)
	}
	for _, im := range s.images {
		add(im.id)
	}
	sort.Strings(out)
	return out
}
