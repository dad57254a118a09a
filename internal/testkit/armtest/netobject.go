package armtest

import (
	"encoding/json"
	"net/http"
	"net/netip"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

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
	// reservedFor is the VM a NIC was attached to, deleted before reservedUntil (nic.go).
	reservedFor   string
	reservedUntil time.Time
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
	for _, p := range as[*armnetwork.LoadBalancer](lb.model).Properties.BackendAddressPools {
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
			if refers(strings.ToLower(sn.nsg)) || refers(strings.ToLower(sn.table)) || refers(strings.ToLower(sn.nat)) {
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

// checkSubResourceRef checks that a reference inside a resource names one of its children of kind
// (e.g. "probes").
func checkSubResourceRef(owner, kind string, ref *armnetwork.SubResource, names map[string]bool) *apiError {
	if ref == nil || ref.ID == nil {
		return newError(http.StatusBadRequest, "InvalidRequestFormat", "%s: a reference to %s has no id.", owner, kind)
	}
	prefix := strings.ToLower(owner + "/" + kind + "/")
	if !strings.HasPrefix(strings.ToLower(*ref.ID), prefix) || !names[strings.ToLower((*ref.ID)[len(prefix):])] {
		return errReference(*ref.ID, owner)
	}
	return nil
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

// checkLocation checks that a resource body has a location.
func checkLocation(loc *string) *apiError {
	if loc == nil || *loc == "" {
		return newError(http.StatusBadRequest, "LocationRequired", "The location property is required for this definition.")
	}
	return nil
}

// netObjectRules are the rules of a network object type, from which its kind is made.
type netObjectRules struct {
	typ, name string // resource type; its path segment below Microsoft.Network
	inUseCode string // Network's error code for deleting the resource while it is in use
	model     func() json.Unmarshaler
	check     func(s *Server, q *armRequest, m any) *apiError
	build     func(s *Server, q *armRequest, m any, old *netObject) (*netObject, *apiError)
	view      func(s *Server, o *netObject) any

	// updateTags serves PATCH as UpdateTags: a body of tags only, which replace the resource's
	// tags at once (no long-running operation), as the Network REST API's "Update Tags" operations do.
	updateTags bool
}

func (r netObjectRules) kind() kind {
	k := kind{
		typ: r.typ, path: networkPath + r.name + "/{}", version: NetworkAPIVersion, model: r.model, check: r.check,
		find: func(s *Server, id string) any { return found(s.object(id, r.typ)) },
		write: func(s *Server, q *armRequest, m, old any) (*change, *apiError) {
			prev, _ := old.(*netObject)
			if q.r.Method == http.MethodPatch {
				return r.replaceTags(s, q, prev), nil
			}
			o, e := r.build(s, q, m, prev)
			if e != nil {
				return nil, e
			}
			return s.storeObject(o, prev, r.view), nil
		},
		inUse: func(s *Server, q *armRequest, v any) *apiError {
			o := as[*netObject](v)
			if e := o.reserved(); e != nil {
				return e
			}
			users := s.usersOf(o.id)
			if o.vm != "" {
				users = append(users, o.vm)
			}
			if len(users) > 0 {
				return newError(http.StatusBadRequest, r.inUseCode, "%s %s is in use by %s and cannot be deleted.",
					lastSegment(o.typ), q.resourceID(), strings.Join(users, ", "))
			}
			return nil
		},
		remove: func(s *Server, _ *armRequest, v any) *change { return s.removeObject(as[*netObject](v)) },
		view:   func(s *Server, v any, _ string) any { return r.view(s, as[*netObject](v)) },
		// The Network REST API lists each type per resource group ("List" operations).
		list: true,
		items: func(s *Server, q *armRequest) []any {
			return topLevelItems(q, s.objects, func(o *netObject) any { return r.view(s, o) })
		},
	}
	if r.updateTags {
		k.noun = "a " + lastSegment(r.typ) + " tags body"
		k.patch = func() json.Unmarshaler { return &armnetwork.TagsObject{} }
		k.current = func(v any) any { return as[*netObject](v).model }
	}
	return k
}

// replaceTags applies an UpdateTags body (decoded and checked by the store) to o; s.mu is held.
func (r netObjectRules) replaceTags(s *Server, q *armRequest, o *netObject) *change {
	var t armnetwork.TagsObject
	_ = json.Unmarshal(q.body, &t)
	reflect.ValueOf(o.model).Elem().FieldByName("Tags").Set(reflect.ValueOf(t.Tags))
	return &change{status: http.StatusOK, view: func() any { return r.view(s, o) }}
}

// storeObject stores a new or updated object (old is nil on create), its state committed by an
// operation, answered with its view; s.mu is held.
func (s *Server) storeObject(o, old *netObject, view func(*Server, *netObject) any) *change {
	status := http.StatusCreated
	if old != nil {
		status = http.StatusOK
		old.releaseExcept(o)
	}
	o.state = armnetwork.ProvisioningStateUpdating
	s.objects[strings.ToLower(o.id)] = o
	return &change{status: status, view: func() any { return view(s, o) }, commit: func(failure *apiError) func() {
		o.state = settled(failure)
		return nil
	}}
}

// removeObject starts the deletion of an object; s.mu is held.
func (s *Server) removeObject(o *netObject) *change {
	o.state = armnetwork.ProvisioningStateDeleting
	return &change{commit: func(failure *apiError) func() {
		if failure != nil {
			o.state = armnetwork.ProvisioningStateFailed
			return nil
		}
		o.release()
		if o.address.IsValid() {
			delete(s.publicUsed, o.address)
		}
		delete(s.objects, strings.ToLower(o.id))
		return nil
	}}
}
