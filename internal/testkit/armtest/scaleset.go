package armtest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
)

// Microsoft.Compute: Uniform virtual machine scale sets. Their instances are in instances.go, the
// OS profile rules in osprofile.go, the images they are created from in images.go.

// Compute provisioning states.
const (
	stateCreating  = "Creating"
	stateUpdating  = "Updating"
	stateSucceeded = "Succeeded"
	stateFailed    = "Failed"
	stateDeleting  = "Deleting"
)

type scaleSet struct {
	id       string
	location string
	model    armcompute.VirtualMachineScaleSet // as accepted, secrets included, read-only fields cleared
	state    string
	uniqueID string
	created  time.Time
	// modelGen counts changes of properties.virtualMachineProfile; an instance created with the
	// current generation has the latest model.
	modelGen  int
	nextID    int
	instances map[int]*vmInstance
}

func (ss *scaleSet) sortedInstances() []*vmInstance {
	out := make([]*vmInstance, 0, len(ss.instances))
	for _, in := range ss.instances {
		out = append(out, in)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// scaleSet returns the scale set a request addresses, or the error for a missing one; s.mu is held.
func (s *Server) scaleSet(q *armRequest) (*scaleSet, *apiError) {
	ss := s.scaleSets[strings.ToLower(q.id(8))]
	if ss == nil {
		return nil, errResourceNotFound(typeScaleSet, q.name(2), q.group)
	}
	return ss, nil
}

// view is the scale set as GET returns it: adminPassword and customData are never returned,
// userData only on request.
func (ss *scaleSet) view(withUserData bool) armcompute.VirtualMachineScaleSet {
	out := clone(&ss.model)
	out.ID, out.Name, out.Type, out.Location = to.Ptr(ss.id), to.Ptr(lastSegment(ss.id)), to.Ptr(typeScaleSet), to.Ptr(ss.location)
	p := out.Properties
	p.ProvisioningState, p.UniqueID, p.TimeCreated = to.Ptr(ss.state), to.Ptr(ss.uniqueID), to.Ptr(ss.created)
	if os := p.VirtualMachineProfile.OSProfile; os != nil {
		os.AdminPassword, os.CustomData = nil, nil
	}
	if !withUserData {
		p.VirtualMachineProfile.UserData = nil
	}
	return *out
}

// scaleSetKind: a PUT or PATCH is checked as Compute checks it (checkScaleSet) and grows or shrinks
// the instances; a DELETE deletes the instances with the scale set.
var scaleSetKind = kind{
	typ: typeScaleSet, path: scaleSetPath, version: ComputeAPIVersion, list: true, expand: []string{"userData"}, noun: "a scale set",
	model:   func() json.Unmarshaler { return &armcompute.VirtualMachineScaleSet{} },
	patch:   func() json.Unmarshaler { return &armcompute.VirtualMachineScaleSetUpdate{} },
	current: func(r any) any { return &as[*scaleSet](r).model },
	find:    func(s *Server, id string) any { return found(s.scaleSets[strings.ToLower(id)]) },
	write: func(s *Server, q *armRequest, m, old any) (*change, *apiError) {
		o, _ := old.(*scaleSet)
		return s.writeScaleSet(q, *as[*armcompute.VirtualMachineScaleSet](m), o)
	},
	remove: func(s *Server, _ *armRequest, r any) *change { return s.removeScaleSet(as[*scaleSet](r)) },
	view:   func(_ *Server, r any, exp string) any { return as[*scaleSet](r).view(exp == "userData") },
	items: func(s *Server, q *armRequest) []any {
		return topLevelItems(q, s.scaleSets, func(ss *scaleSet) any { return ss.view(false) })
	},
}

// scaleSetPlan is a checked scale set model: what its instances are made of.
type scaleSetPlan struct {
	identities []string
	capacity   int
	prefix     string
	linux      bool
	imageID    string
	customData []byte
	nics       []nicPlan
}

type nicPlan struct {
	name                               string
	primary, ipForwarding, accelerated bool
	ipConfigs                          []ipConfigPlan
}

type ipConfigPlan struct {
	name    string
	primary bool
	subnet  *subnet
}

// writeScaleSet creates or updates a scale set (old is nil on create) from a PUT body or a
// PATCH merged into the current model; s.mu is held.
func (s *Server) writeScaleSet(q *armRequest, m armcompute.VirtualMachineScaleSet, old *scaleSet) (*change, *apiError) {
	id := q.resourceID()
	plan, e := s.checkScaleSet(id, &m, old)
	if e != nil {
		return nil, e
	}
	if e := s.checkLinkedImage(q, id, plan.imageID); e != nil {
		return nil, e
	}
	if e := s.checkLinkedIdentities(q, plan.identities); e != nil {
		return nil, e
	}
	ss, status := old, http.StatusOK
	if ss == nil {
		status = http.StatusCreated
		ss = &scaleSet{id: id, location: *m.Location, uniqueID: newUUID(), created: time.Now().UTC(), instances: map[int]*vmInstance{}}
	}
	newModel := old == nil || !sameJSON(old.model.Properties.VirtualMachineProfile, m.Properties.VirtualMachineProfile)
	if old != nil && newModel {
		if n := old.liveModels(); n >= maxModels {
			return nil, errModelLimit(id, n)
		}
	}
	if e := s.checkCores(deref(m.SKU.Name), plan.capacity-ss.liveInstances()); e != nil {
		return nil, e
	}
	var prev *armcompute.VirtualMachineScaleSet
	if old != nil {
		prev = clone(&old.model)
	}
	prevGen := ss.modelGen
	added, e := s.createInstances(ss, plan, &m)
	if e != nil {
		return nil, e
	}
	if newModel {
		ss.modelGen++
	}
	for _, in := range added {
		in.modelGen = ss.modelGen
	}
	s.scaleSets[strings.ToLower(id)] = ss
	ss.model = m
	ss.state = stateUpdating
	if old == nil {
		ss.state = stateCreating
	}
	removed := ss.scaleIn(plan.capacity)
	commit := func(failure *apiError) func() {
		switch {
		case failure != nil && failure.effect == effectPreempted:
			// A more recent operation replaced this one's goal: the scale set is as before it.
			s.removeInstances(ss, added)
			for _, in := range removed {
				in.state = stateSucceeded
			}
			if prev == nil {
				delete(s.scaleSets, strings.ToLower(id))
				return nil
			}
			ss.model, ss.modelGen, ss.state = *prev, prevGen, stateSucceeded
			return nil
		case failure != nil && failure.effect == effectStarted && len(added) > 0:
			// One machine's guest did not report in time: it is Failed but runs; the rest succeeded.
			failure.Message = osProvisioningTimedOut(lastSegment(ss.id) + "_" + strconv.Itoa(added[0].id))
			ss.state = stateFailed
			for _, in := range added {
				in.state = stateSucceeded
			}
			added[0].state, added[0].failedWith = stateFailed, failure.Code
			s.removeInstances(ss, removed)
			return func() { s.bootAll(machinesOf(added)); s.shutdownAll(machinesOf(removed)) }
		case failure != nil:
			ss.state = stateFailed
			for _, in := range append(added, removed...) {
				in.state, in.failedWith = stateFailed, failure.Code
			}
			return nil
		}
		ss.state = stateSucceeded
		for _, in := range added {
			in.state = stateSucceeded
		}
		s.removeInstances(ss, removed)
		return func() { s.bootAll(machinesOf(added)); s.shutdownAll(machinesOf(removed)) }
	}
	return &change{status: status, view: func() any { return ss.view(false) }, commit: commit}, nil
}

// maxModels is how many models of a scale set its instances may reference: with the Manual
// upgrade policy every change of virtualMachineProfile (a new customData included) is a model the
// instances created before keep until they are upgraded (manualupgrade) or reimaged. Compute then
// refuses further model changes with the message of errModelLimit, quoted from
// kubernetes-sigs/cluster-api-provider-azure#4958, microsoft/onefuzz#2318 and
// MicrosoftDocs/azure-docs#103472 (which asks for the limit to be documented). Those sources
// quote the message only; the status and code here are Compute's for a refused operation.
const maxModels = 10

func errModelLimit(id string, n int) *apiError {
	return newError(http.StatusConflict, "OperationNotAllowed",
		"Virtual Machine Scale Set '%s' has reached its limit of %d models that may be referenced by one or more VMs belonging to the "+
			"Virtual Machine Scale Set (its instances reference %d). Upgrade the VMs to the latest model of the Virtual Machine Scale Set "+
			"before trying again.", lastSegment(id), maxModels, n)
}

// liveInstances counts the instances that are not being deleted.
func (ss *scaleSet) liveInstances() int {
	n := 0
	for _, in := range ss.instances {
		if in.state != stateDeleting {
			n++
		}
	}
	return n
}

// liveModels counts the models the instances that are not being deleted reference.
func (ss *scaleSet) liveModels() int {
	gens := map[int]bool{}
	for _, in := range ss.instances {
		if in.state != stateDeleting {
			gens[in.modelGen] = true
		}
	}
	return len(gens)
}

// removeScaleSet starts the deletion of a scale set and its instances; s.mu is held.
func (s *Server) removeScaleSet(ss *scaleSet) *change {
	gone := ss.sortedInstances()
	ss.state = stateDeleting
	for _, in := range gone {
		in.state = stateDeleting
	}
	return &change{commit: func(failure *apiError) func() {
		if failure != nil {
			ss.state = stateFailed
			for _, in := range gone {
				in.state = stateFailed
			}
			return nil
		}
		s.removeInstances(ss, gone)
		delete(s.scaleSets, strings.ToLower(ss.id))
		return func() { s.shutdownAll(machinesOf(gone)) }
	}}
}

// checkScaleSet checks and completes a scale set model as Compute does; s.mu is held.
func (s *Server) checkScaleSet(id string, m *armcompute.VirtualMachineScaleSet, old *scaleSet) (*scaleSetPlan, *apiError) {
	if m.Location == nil || *m.Location == "" {
		return nil, newError(http.StatusBadRequest, "LocationRequired", "The location property is required for this definition.")
	}
	if old != nil && !strings.EqualFold(*m.Location, old.location) {
		return nil, changeNotAllowed("location")
	}
	if m.SKU == nil || m.SKU.Name == nil || m.SKU.Capacity == nil {
		return nil, invalidParameter("sku",
			"Required parameters 'sku.name' and 'sku.capacity' are missing: give the VM size (e.g. Standard_D4s_v5) and the number of instances.")
	}
	capacity := *m.SKU.Capacity
	if capacity < 0 || capacity > maxCapacity {
		return nil, invalidParameter("sku.capacity", "sku.capacity is %d; it must be between 0 and %d.", capacity, maxCapacity)
	}
	p := m.Properties
	if p == nil || p.VirtualMachineProfile == nil {
		return nil, invalidParameter("properties.virtualMachineProfile", "Required parameter 'properties.virtualMachineProfile' is missing.")
	}
	var identities []string
	if i := m.Identity; i != nil {
		var e *apiError
		if identities, e = s.carriedIdentities(id, i.Type, i.UserAssignedIdentities); e != nil {
			return nil, e
		}
	}
	if e := checkPlacementGroup(p, old, capacity); e != nil {
		return nil, e
	}
	if old != nil {
		if e := checkFixed(m, &old.model); e != nil {
			return nil, e
		}
	}
	// Clear what only the server sets; a client may send back what it read.
	m.ID, m.Name, m.Type, m.Etag = nil, nil, nil, nil
	p.ProvisioningState, p.UniqueID, p.TimeCreated = nil, nil, nil

	if p.OrchestrationMode == nil {
		p.OrchestrationMode = to.Ptr(armcompute.OrchestrationModeUniform)
	}
	if *p.OrchestrationMode != armcompute.OrchestrationModeUniform {
		return nil, invalidParameter("properties.orchestrationMode",
			"orchestrationMode is %q: armtest serves Uniform scale sets only (instance IDs and computer names are Uniform's); set it to Uniform.",
			*p.OrchestrationMode)
	}
	if old != nil && *old.model.Properties.OrchestrationMode != *p.OrchestrationMode {
		return nil, changeNotAllowed("orchestrationMode")
	}
	if p.Overprovision == nil || *p.Overprovision {
		return nil, invalidParameter("properties.overprovision",
			"properties.overprovision is true or unset (Azure then overprovisions): overprovisioned VMs boot with the same custom data and could join "+
				"the cluster before Azure deletes them. Set properties.overprovision to false.")
	}
	if p.UpgradePolicy == nil || p.UpgradePolicy.Mode == nil {
		p.UpgradePolicy = &armcompute.UpgradePolicy{Mode: to.Ptr(armcompute.UpgradeModeManual)}
	}
	if *p.UpgradePolicy.Mode != armcompute.UpgradeModeManual {
		return nil, invalidParameter("properties.upgradePolicy.mode",
			"upgradePolicy.mode is %q: armtest implements the Manual upgrade policy only (existing instances keep their model); set it to Manual.",
			*p.UpgradePolicy.Mode)
	}
	plan := &scaleSetPlan{capacity: int(capacity), identities: identities}
	vmp := p.VirtualMachineProfile
	if e := s.checkOSProfile(vmp, old, plan); e != nil {
		return nil, e
	}
	if e := s.checkImage(vmp, plan); e != nil {
		return nil, e
	}
	if e := s.checkNetworkProfile(id, *m.Location, vmp, plan); e != nil {
		return nil, e
	}
	return plan, nil
}

// checkPlacementGroup applies singlePlacementGroup, true unless set (Uniform's default): "When
// true this limits the scale set to a single placement group, of max size 100 virtual machines.
// If singlePlacementGroup is true, it may be modified to false. However, if singlePlacementGroup is
// false, it may not be modified to true." (VirtualMachineScaleSetProperties.singlePlacementGroup in
// the Compute REST API; learn.microsoft.com/azure/virtual-machine-scale-sets/virtual-machine-scale-sets-placement-groups:
// a scale set of more than 100 VMs needs singlePlacementGroup=false).
const maxSinglePlacementGroup = 100

func checkPlacementGroup(p *armcompute.VirtualMachineScaleSetProperties, old *scaleSet, capacity int64) *apiError {
	if p.SinglePlacementGroup == nil {
		p.SinglePlacementGroup = to.Ptr(true)
	}
	if old != nil && !*old.model.Properties.SinglePlacementGroup && *p.SinglePlacementGroup {
		return changeNotAllowed("singlePlacementGroup")
	}
	if *p.SinglePlacementGroup && capacity > maxSinglePlacementGroup {
		return invalidParameter("sku.capacity", "sku.capacity is %d, but a scale set with singlePlacementGroup true (the default) holds at most %d "+
			"virtual machines: set properties.singlePlacementGroup to false for more.", capacity, maxSinglePlacementGroup)
	}
	return nil
}

// checkFixed refuses changes Compute refuses on an existing scale set:
//   - zones can be added, never removed or replaced, and a zonal scale set cannot become regional: "You
//     can't remove or replace zones, only add zones"; "You can't update from a zone spanning or zonal
//     scale set to a regional (nonzonal) scaleset" ("Update scale set to add availability zones" in
//     https://learn.microsoft.com/azure/virtual-machine-scale-sets/virtual-machine-scale-sets-use-availability-zones);
//   - priority and evictionPolicy are set at creation only: the Update operation's
//     VirtualMachineScaleSetUpdateVMProfile has neither
//     (https://learn.microsoft.com/rest/api/compute/virtual-machine-scale-sets/update);
//   - an IP configuration's subnet may change only within its virtual network: "The subnet of a scale
//     set may be modified as long as the original subnet and the new subnet are in the same virtual
//     network" (VirtualMachineScaleSetUpdateIPConfiguration, same reference).
//
// The sources name no error code; these answer with Compute's for a property that cannot change.
func checkFixed(m, old *armcompute.VirtualMachineScaleSet) *apiError {
	for _, z := range old.Zones {
		if !slices.ContainsFunc(m.Zones, func(n *string) bool { return deref(n) == deref(z) }) {
			return changeNotAllowed("zones")
		}
	}
	vp, ovp := m.Properties.VirtualMachineProfile, old.Properties.VirtualMachineProfile
	if !sameJSON(vp.Priority, ovp.Priority) {
		return changeNotAllowed("virtualMachineProfile.priority")
	}
	if !sameJSON(vp.EvictionPolicy, ovp.EvictionPolicy) {
		return changeNotAllowed("virtualMachineProfile.evictionPolicy")
	}
	oldSubnets := map[string]string{}
	for _, c := range nicConfigs(ovp) {
		for _, ipc := range c.Properties.IPConfigurations {
			oldSubnets[deref(c.Name)+"/"+deref(ipc.Name)] = vnetOf(*ipc.Properties.Subnet.ID)
		}
	}
	for _, c := range nicConfigs(vp) {
		if c == nil || c.Properties == nil {
			continue
		}
		for _, ipc := range c.Properties.IPConfigurations {
			if ipc == nil || ipc.Properties == nil || ipc.Properties.Subnet == nil || ipc.Properties.Subnet.ID == nil {
				continue // checkNetworkProfile refuses it
			}
			was, ok := oldSubnets[deref(c.Name)+"/"+deref(ipc.Name)]
			if ok && !strings.EqualFold(was, vnetOf(*ipc.Properties.Subnet.ID)) {
				return changeNotAllowed("networkInterfaceConfigurations.ipConfigurations.subnet")
			}
		}
	}
	return nil
}

func nicConfigs(vp *armcompute.VirtualMachineScaleSetVMProfile) []*armcompute.VirtualMachineScaleSetNetworkConfiguration {
	if vp == nil || vp.NetworkProfile == nil {
		return nil
	}
	return vp.NetworkProfile.NetworkInterfaceConfigurations
}

// vnetOf is the virtual network of a subnet's resource ID.
func vnetOf(subnetID string) string {
	i := strings.LastIndex(strings.ToLower(subnetID), "/subnets/")
	if i < 0 {
		return subnetID
	}
	return subnetID[:i]
}

// checkImage resolves the image reference to a seeded managed image or gallery image version.
func (s *Server) checkImage(vmp *armcompute.VirtualMachineScaleSetVMProfile, plan *scaleSetPlan) *apiError {
	sp := vmp.StorageProfile
	if sp == nil || sp.ImageReference == nil {
		return invalidParameter("imageReference", "Required parameter 'storageProfile.imageReference' is missing.")
	}
	id, e := s.imageOf(sp.ImageReference)
	if e != nil {
		return e
	}
	plan.imageID = id
	return nil
}

// checkNetworkProfile checks the NIC configurations and finds their subnets; s.mu is held.
func (s *Server) checkNetworkProfile(id, location string, vmp *armcompute.VirtualMachineScaleSetVMProfile, plan *scaleSetPlan) *apiError {
	np := vmp.NetworkProfile
	if np == nil || len(np.NetworkInterfaceConfigurations) == 0 {
		return invalidParameter("networkProfile.networkInterfaceConfigurations",
			"A scale set needs at least one networkProfile.networkInterfaceConfigurations entry.")
	}
	primaries := 0
	for i, c := range np.NetworkInterfaceConfigurations {
		if c == nil || c.Name == nil || c.Properties == nil || len(c.Properties.IPConfigurations) == 0 {
			return invalidParameter("networkInterfaceConfigurations", "Network interface configuration %d needs a name and at least one IP configuration.", i)
		}
		n := nicPlan{
			name:         *c.Name,
			primary:      len(np.NetworkInterfaceConfigurations) == 1 || (c.Properties.Primary != nil && *c.Properties.Primary),
			ipForwarding: c.Properties.EnableIPForwarding != nil && *c.Properties.EnableIPForwarding,
			accelerated:  c.Properties.EnableAcceleratedNetworking != nil && *c.Properties.EnableAcceleratedNetworking,
		}
		if n.primary {
			primaries++
		}
		primaryIPs := 0
		for j, ipc := range c.Properties.IPConfigurations {
			if ipc == nil || ipc.Name == nil || ipc.Properties == nil || ipc.Properties.Subnet == nil || ipc.Properties.Subnet.ID == nil {
				return invalidParameter("ipConfigurations",
					"IP configuration %d of network interface configuration %q needs a name and properties.subnet.id.", j, n.name)
			}
			sn := s.findSubnet(*ipc.Properties.Subnet.ID)
			if sn == nil || !strings.EqualFold(sn.vnet.location, location) {
				return errReference(*ipc.Properties.Subnet.ID, id)
			}
			for _, pool := range ipc.Properties.LoadBalancerBackendAddressPools {
				if pool == nil || pool.ID == nil || s.backendPool(*pool.ID) == "" {
					return newError(http.StatusBadRequest, "InvalidResourceReference", "A backend pool referenced by %s was not found.", id)
				}
			}
			cp := ipConfigPlan{
				name:    *ipc.Name,
				primary: len(c.Properties.IPConfigurations) == 1 || (ipc.Properties.Primary != nil && *ipc.Properties.Primary),
				subnet:  sn,
			}
			if cp.primary {
				primaryIPs++
			}
			n.ipConfigs = append(n.ipConfigs, cp)
		}
		if primaryIPs != 1 {
			return invalidParameter("ipConfigurations", "Exactly one IP configuration of network interface configuration %q must be primary; %d are.",
				n.name, primaryIPs)
		}
		plan.nics = append(plan.nics, n)
	}
	if primaries != 1 {
		return invalidParameter("networkInterfaceConfigurations", "Exactly one network interface configuration must be primary; %d are.", primaries)
	}
	return nil
}

// sameJSON reports whether two models encode to the same JSON.
func sameJSON(a, b any) bool {
	x, errA := json.Marshal(a)
	y, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(x, y)
}
