package armtest

import (
	"encoding/json"
	"net/http"
	"net/netip"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"
)

// Microsoft.Network virtual networks, whose subnets (subnet.go) scale-set NICs get addresses of.

type virtualNetwork struct {
	id       string
	location string
	model    armnetwork.VirtualNetwork // as accepted, subnets left out
	prefixes []netip.Prefix
	subnets  map[string]*subnet // by lower-case name
	state    armnetwork.ProvisioningState
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
	id := s.ResourceGroupID(s.groups[strings.ToLower(v.ResourceGroup)].name) + "/providers/Microsoft.Network/virtualNetworks/" + v.Name
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
		nat    string
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
		nat, e := s.subnetNAT(sid, *m.Location, sm.Properties)
		if e != nil {
			return nil, e
		}
		p := planned{name: name, model: *sm, prefix: prefix, table: table, nsg: nsg, nat: nat}
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
			sn.name, sn.model, sn.prefix, sn.table, sn.nsg, sn.nat, sn.state = p.name, p.model, p.prefix, p.table, p.nsg, p.nat, state
			subnets[strings.ToLower(p.name)] = sn
		}
		v.subnets = subnets
	}, nil
}

// vnetKind: a PUT replaces the subnets too; neither it nor a DELETE may drop or move a subnet in
// use.
var vnetKind = kind{
	typ: typeVNet, path: vnetPath, version: NetworkAPIVersion,
	model: func() json.Unmarshaler { return &armnetwork.VirtualNetwork{} },
	find:  func(s *Server, id string) any { return found(s.vnets[strings.ToLower(id)]) },
	write: func(s *Server, q *armRequest, m, old any) (*change, *apiError) {
		return s.writeVirtualNetwork(q, *as[*armnetwork.VirtualNetwork](m), old == nil)
	},
	inUse: func(_ *Server, _ *armRequest, r any) *apiError {
		for _, sn := range as[*virtualNetwork](r).subnets {
			if len(sn.used) > 0 {
				return errSubnetInUse(sn, "deleted")
			}
		}
		return nil
	},
	remove: func(s *Server, _ *armRequest, r any) *change {
		v := as[*virtualNetwork](r)
		v.state = armnetwork.ProvisioningStateDeleting
		return &change{commit: func(failure *apiError) func() {
			if failure != nil {
				v.state = armnetwork.ProvisioningStateFailed
			} else {
				delete(s.vnets, strings.ToLower(v.id))
			}
			return nil
		}}
	},
	view: func(s *Server, r any, _ string) any { return s.vnetView(as[*virtualNetwork](r)) },
}

// writeVirtualNetwork creates or replaces a virtual network and its subnets; s.mu is held.
func (s *Server) writeVirtualNetwork(q *armRequest, m armnetwork.VirtualNetwork, create bool) (*change, *apiError) {
	id := q.resourceID()
	apply, e := s.prepareVirtualNetwork(id, m)
	if e != nil {
		return nil, e
	}
	status := http.StatusOK
	if create {
		status = http.StatusCreated
	}
	apply(armnetwork.ProvisioningStateUpdating)
	v := s.vnets[strings.ToLower(id)]
	return &change{status: status, view: func() any { return s.vnetView(v) }, commit: func(failure *apiError) func() {
		v.state = settled(failure)
		for _, sn := range v.subnets {
			sn.state = v.state
		}
		return nil
	}}, nil
}

// settled is the provisioning state of a network resource whose operation ended.
func settled(failure *apiError) armnetwork.ProvisioningState {
	if failure != nil {
		return armnetwork.ProvisioningStateFailed
	}
	return armnetwork.ProvisioningStateSucceeded
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
