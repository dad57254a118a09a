package armtest

import (
	"bytes"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
	"github.com/kubewin/kubewin/internal/winname"
)

// The instances of Uniform scale sets: created and named as the capacity grows, picked by the
// scale-in policy as it shrinks, deleted one by one or in batches.

type vmInstance struct {
	machine
	id       int
	profile  *armcompute.VirtualMachineScaleSetVMProfile // the model it was created with
	size     string                                      // the VM size it was created with
	zone     string                                      // its availability zone; "" in a regional scale set
	modelGen int
	vmID     string
	state    string
	created  time.Time
	nics     []instanceNIC
}

type instanceNIC struct {
	name                               string
	primary, ipForwarding, accelerated bool
	mac                                string
	ipConfigs                          []instanceIPConfig
}

type instanceIPConfig struct {
	name    string
	primary bool
	subnet  *subnet
	addr    netip.Addr
}

func (in *vmInstance) resourceID(ss *scaleSet) string {
	return ss.id + "/virtualMachines/" + strconv.Itoa(in.id)
}

// Instances returns the instances of a scale set (by ARM ID), in instance ID order, including
// those being created or deleted.
func (s *Server) Instances(scaleSetID string) []Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.scaleSets[strings.ToLower(scaleSetID)]
	if ss == nil {
		return nil
	}
	var out []Instance
	for _, in := range ss.sortedInstances() {
		out = append(out, in.info)
	}
	return out
}

// createInstances adds instances up to the plan's capacity with the model m, their NICs getting
// addresses; nothing changes when an address cannot be had. s.mu is held.
func (s *Server) createInstances(ss *scaleSet, plan *scaleSetPlan, m *armcompute.VirtualMachineScaleSet) ([]*vmInstance, *apiError) {
	live := ss.liveInstances()
	var added []*vmInstance
	undo := func() {
		for _, in := range added {
			releaseAddresses(in)
		}
	}
	for n := live; n < plan.capacity; n++ {
		id := ss.nextID + len(added)
		suffix, err := winname.Suffix(id)
		if err != nil {
			undo()
			return nil, invalidParameter("sku.capacity", "instance ID %d cannot be named: %v", id, err)
		}
		in := &vmInstance{
			id: id, profile: clone(m.Properties.VirtualMachineProfile), size: *m.SKU.Name, zone: ss.nextZone(m.Zones, added),
			vmID: newUUID(), state: stateCreating, created: time.Now().UTC(),
		}
		vmID := in.resourceID(ss)
		in.info = Instance{
			ID: vmID, ScaleSetID: ss.id, InstanceID: strconv.Itoa(id), ComputerName: plan.prefix + suffix, Linux: plan.linux,
			Location: ss.location, VMSize: in.size, Zone: in.zone, Identities: plan.identities,
			CustomData: bytes.Clone(plan.customData), ImageID: plan.imageID,
		}
		for _, np := range plan.nics {
			nic := instanceNIC{name: np.name, primary: np.primary, ipForwarding: np.ipForwarding, accelerated: np.accelerated, mac: macAddress()}
			for _, cp := range np.ipConfigs {
				owner := vmID + "/networkInterfaces/" + np.name + "/ipConfigurations/" + cp.name
				addr, e := allocateIP(cp.subnet, owner)
				if e != nil {
					releaseAddresses(in)
					undo()
					return nil, e
				}
				nic.ipConfigs = append(nic.ipConfigs, instanceIPConfig{name: cp.name, primary: cp.primary, subnet: cp.subnet, addr: addr})
				if np.primary && cp.primary {
					in.info.PrivateIP, in.info.IPForwarding = addr, np.ipForwarding
				}
			}
			in.nics = append(in.nics, nic)
		}
		added = append(added, in)
	}
	for _, in := range added {
		ss.instances[in.id] = in
	}
	ss.nextID += len(added)
	return added, nil
}

// nextZone is the zone of zones with the fewest live instances (the lowest of those tied), where a
// new instance goes: "By default, the scale set performs a best effort approach to evenly spread
// instances across selected zones"; an existing instance stays in its zone when zones are added
// (https://learn.microsoft.com/azure/virtual-machine-scale-sets/virtual-machine-scale-sets-use-availability-zones).
// "" for a regional scale set. s.mu is held.
func (ss *scaleSet) nextZone(zones []*string, added []*vmInstance) string {
	count := map[string]int{}
	for _, in := range append(ss.sortedInstances(), added...) {
		if in.state != stateDeleting {
			count[in.zone]++
		}
	}
	best := ""
	for _, z := range zones {
		if best == "" || count[*z] < count[best] || count[*z] == count[best] && *z < best {
			best = *z
		}
	}
	return best
}

// scaleIn marks the instances beyond capacity for deletion, as the scale-in policy picks them
// (Default and NewestVM: highest instance IDs first; OldestVM: lowest first). s.mu is held.
func (ss *scaleSet) scaleIn(capacity int) []*vmInstance {
	var live []*vmInstance
	for _, in := range ss.sortedInstances() {
		if in.state != stateDeleting {
			live = append(live, in)
		}
	}
	if len(live) <= capacity {
		return nil
	}
	oldestFirst := false
	if sp := ss.model.Properties.ScaleInPolicy; sp != nil && len(sp.Rules) > 0 && sp.Rules[0] != nil {
		oldestFirst = *sp.Rules[0] == armcompute.VirtualMachineScaleSetScaleInRulesOldestVM
	}
	var removed []*vmInstance
	if oldestFirst {
		removed = live[:len(live)-capacity]
	} else {
		removed = live[capacity:]
	}
	for _, in := range removed {
		in.state = stateDeleting
	}
	return removed
}

// removeInstances deletes instances and frees their addresses; s.mu is held.
func (s *Server) removeInstances(ss *scaleSet, gone []*vmInstance) {
	for _, in := range gone {
		releaseAddresses(in)
		delete(ss.instances, in.id)
	}
}

func releaseAddresses(in *vmInstance) {
	for _, n := range in.nics {
		for _, c := range n.ipConfigs {
			delete(c.subnet.used, c.addr)
		}
	}
}

// instanceAction is the prologue of the scale-set actions on instances (deleteInstances,
// manualupgrade): the body's instance IDs, its scale set, no operation running on that, and every
// ID an active instance. verb names the action in the error for an empty list. s.mu is held.
func (s *Server) instanceAction(q *armRequest, verb string) (*scaleSet, []*vmInstance, *apiError) {
	var req armcompute.VirtualMachineScaleSetVMInstanceRequiredIDs
	if e := decodeStrict(q.body, &req); e != nil {
		return nil, nil, e
	}
	if len(req.InstanceIDs) == 0 {
		return nil, nil, invalidParameter("instanceIds", "Required parameter 'instanceIds' is missing or empty: list the instance IDs to %s.", verb)
	}
	ss, e := s.scaleSet(q)
	if e != nil {
		return nil, nil, e
	}
	if op := s.busy(ss.id); op != nil {
		return nil, nil, s.conflict(op, ss.id)
	}
	var ins []*vmInstance
	for _, v := range req.InstanceIDs {
		in := ss.activeInstance(v)
		if in == nil {
			return nil, nil, invalidParameter("instanceIds", "The provided instanceId %s is not an active Virtual Machine Scale Set VM instanceId.", deref(v))
		}
		ins = append(ins, in)
	}
	return ss, ins, nil
}

func (s *Server) deleteInstances(w http.ResponseWriter, q *armRequest) *apiError {
	if _, e := queryBool(q, "forceDeletion"); e != nil {
		return e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, gone, e := s.instanceAction(q, "delete")
	if e != nil {
		return e
	}
	s.markDeleted(ss, gone)
	op := s.startOperation(q, ss.id, s.commitDeletion(ss, gone))
	s.writeStarted(w, op, http.StatusAccepted, nil)
	return nil
}

// updateInstances is manualupgrade (VirtualMachineScaleSets_UpdateInstances): the instances take
// the scale set's current model. What armtest applies so is a model that differs from theirs in
// custom data (and tags, extensions) only: custom data is read at provisioning, so a running
// machine keeps the custom data it booted with; a changed model reaches an existing host only when
// it is reimaged (hashicorp/terraform-provider-azurerm#61). A changed image or network profile
// would reimage or reconfigure the machine, which armtest does not model: it refuses those.
func (s *Server) updateInstances(w http.ResponseWriter, q *armRequest) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, upgraded, e := s.instanceAction(q, "upgrade")
	if e != nil {
		return e
	}
	latest := ss.model.Properties.VirtualMachineProfile
	for _, in := range upgraded {
		if !sameJSON(in.profile.StorageProfile, latest.StorageProfile) || !sameJSON(in.profile.NetworkProfile, latest.NetworkProfile) ||
			!strings.EqualFold(in.size, *ss.model.SKU.Name) {
			return invalidParameter("instanceIds", "armtest upgrades instances whose model differs from the latest in custom data only; "+
				"instance %d has another storage or network profile or size, which Azure would reimage, reconfigure or resize.", in.id)
		}
	}
	op := s.startOperation(q, ss.id, func(failure *apiError) func() {
		if failure == nil {
			for _, in := range upgraded {
				in.modelGen, in.profile = ss.modelGen, clone(latest)
			}
		}
		return nil
	})
	s.writeStarted(w, op, http.StatusAccepted, nil)
	return nil
}

// activeInstance returns the instance with the decimal ID v unless it is missing or being deleted.
func (ss *scaleSet) activeInstance(v *string) *vmInstance {
	if v == nil {
		return nil
	}
	n, err := strconv.Atoi(*v)
	if err != nil {
		return nil
	}
	in := ss.instances[n]
	if in == nil || in.state == stateDeleting {
		return nil
	}
	return in
}

// markDeleted marks instances for deletion and lowers the capacity by their number; s.mu is held.
func (s *Server) markDeleted(ss *scaleSet, gone []*vmInstance) {
	for _, in := range gone {
		in.state = stateDeleting
	}
	ss.model.SKU.Capacity = to.Ptr(*ss.model.SKU.Capacity - int64(len(gone)))
}

func (s *Server) commitDeletion(ss *scaleSet, gone []*vmInstance) func(*apiError) func() {
	return func(failure *apiError) func() {
		if failure != nil && failure.effect == effectPreempted {
			// Preempted: the instances stay, and the capacity with them.
			for _, in := range gone {
				in.state = stateSucceeded
			}
			ss.model.SKU.Capacity = to.Ptr(*ss.model.SKU.Capacity + int64(len(gone)))
			return nil
		}
		if failure != nil {
			for _, in := range gone {
				in.state = stateFailed
			}
			return nil
		}
		s.removeInstances(ss, gone)
		return func() { s.shutdownAll(machinesOf(gone)) }
	}
}

// instance returns the instance a request addresses; s.mu is held.
func (s *Server) instance(q *armRequest) (*scaleSet, *vmInstance, *apiError) {
	ss, e := s.scaleSet(q)
	if e != nil {
		return nil, nil, e
	}
	n, err := strconv.Atoi(q.name(3))
	in := ss.instances[n]
	if err != nil || in == nil {
		return ss, nil, newError(http.StatusNotFound, "NotFound", "The entity was not found in this Azure location: instance %s of scale set %s.",
			q.name(3), ss.id)
	}
	return ss, in, nil
}

func (s *Server) listInstances(w http.ResponseWriter, q *armRequest) *apiError {
	if e := rejectFilter(q); e != nil {
		return e
	}
	exp, e := expand(q, "instanceView")
	if e != nil {
		return e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, e := s.scaleSet(q)
	if e != nil {
		return e
	}
	ins := ss.sortedInstances()
	start, end, next, e := s.page(q, len(ins))
	if e != nil {
		return e
	}
	res := armcompute.VirtualMachineScaleSetVMListResult{NextLink: next, Value: []*armcompute.VirtualMachineScaleSetVM{}}
	for _, in := range ins[start:end] {
		v := instanceView(ss, in, exp != "")
		res.Value = append(res.Value, &v)
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) getInstance(w http.ResponseWriter, q *armRequest) *apiError {
	exp, e := expand(q, "instanceView")
	if e != nil {
		return e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, in, e := s.instance(q)
	if e != nil {
		return e
	}
	writeJSON(w, http.StatusOK, instanceView(ss, in, exp != ""))
	return nil
}

func (s *Server) deleteInstance(w http.ResponseWriter, q *armRequest) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, in, e := s.instance(q)
	if ss != nil && in == nil {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	if e != nil {
		return e
	}
	id := in.resourceID(ss)
	if op := s.busy(id); op != nil {
		return s.conflict(op, id)
	}
	gone := []*vmInstance{in}
	s.markDeleted(ss, gone)
	op := s.startOperation(q, id, s.commitDeletion(ss, gone))
	s.writeStarted(w, op, http.StatusAccepted, nil)
	return nil
}

// instanceView is an instance as the VMs API returns it: its own model (not the scale set's
// current one), without secrets, and the instance view on request.
func instanceView(ss *scaleSet, in *vmInstance, withInstanceView bool) armcompute.VirtualMachineScaleSetVM {
	id := in.resourceID(ss)
	p := in.profile
	osType := armcompute.OperatingSystemTypesWindows
	osp := &armcompute.OSProfile{ComputerName: to.Ptr(in.info.ComputerName)}
	if p.OSProfile != nil {
		osp.AdminUsername, osp.WindowsConfiguration, osp.LinuxConfiguration = p.OSProfile.AdminUsername, p.OSProfile.WindowsConfiguration,
			p.OSProfile.LinuxConfiguration
		osp.Secrets, osp.AllowExtensionOperations = p.OSProfile.Secrets, p.OSProfile.AllowExtensionOperations
		if p.OSProfile.LinuxConfiguration != nil {
			osType = armcompute.OperatingSystemTypesLinux
		}
	}
	props := &armcompute.VirtualMachineScaleSetVMProperties{
		LatestModelApplied: to.Ptr(in.modelGen == ss.modelGen),
		ProvisioningState:  to.Ptr(in.state),
		VMID:               to.Ptr(in.vmID),
		TimeCreated:        to.Ptr(in.created),
		OSProfile:          osp,
		StorageProfile: &armcompute.StorageProfile{
			ImageReference: p.StorageProfile.ImageReference,
			OSDisk:         instanceOSDisk(p.StorageProfile.OSDisk, osType),
		},
		NetworkProfile: &armcompute.NetworkProfile{},
		NetworkProfileConfiguration: &armcompute.VirtualMachineScaleSetVMNetworkProfileConfiguration{
			NetworkInterfaceConfigurations: p.NetworkProfile.NetworkInterfaceConfigurations,
		},
		DiagnosticsProfile: p.DiagnosticsProfile,
	}
	for _, n := range in.nics {
		props.NetworkProfile.NetworkInterfaces = append(props.NetworkProfile.NetworkInterfaces, &armcompute.NetworkInterfaceReference{
			ID: to.Ptr(id + "/networkInterfaces/" + n.name), Properties: &armcompute.NetworkInterfaceReferenceProperties{Primary: to.Ptr(n.primary)},
		})
	}
	if withInstanceView {
		props.InstanceView = &armcompute.VirtualMachineScaleSetVMInstanceView{
			ComputerName: to.Ptr(in.info.ComputerName), Statuses: instanceStatuses(in.state, in.failedWith, in.bootDone != nil),
		}
	}
	vm := armcompute.VirtualMachineScaleSetVM{
		ID: to.Ptr(id), Name: to.Ptr(lastSegment(ss.id) + "_" + strconv.Itoa(in.id)), InstanceID: to.Ptr(strconv.Itoa(in.id)),
		Type: to.Ptr(typeScaleSetVM), Location: to.Ptr(ss.location), Properties: props,
	}
	vm.SKU = &armcompute.SKU{Name: to.Ptr(in.size), Tier: to.Ptr("Standard")}
	if in.zone != "" {
		vm.Zones = []*string{to.Ptr(in.zone)}
	}
	return vm
}

// instanceOSDisk is an instance's OS disk as its model made it.
func instanceOSDisk(d *armcompute.VirtualMachineScaleSetOSDisk, osType armcompute.OperatingSystemTypes) *armcompute.OSDisk {
	out := &armcompute.OSDisk{OSType: to.Ptr(osType), CreateOption: to.Ptr(armcompute.DiskCreateOptionTypesFromImage)}
	if d != nil {
		out.Caching, out.DiskSizeGB = d.Caching, d.DiskSizeGB
		if d.ManagedDisk != nil {
			out.ManagedDisk = &armcompute.ManagedDiskParameters{StorageAccountType: d.ManagedDisk.StorageAccountType}
		}
	}
	return out
}

// instanceStatuses are a machine's instance view statuses: its provisioning state (with the error
// code when it failed, as ProvisioningState/failed/<code>) and its power state. A machine whose
// provisioning failed after it started (OSProvisioningTimedOut) runs.
func instanceStatuses(state, failedWith string, started bool) []*armcompute.InstanceViewStatus {
	status := func(code, display string) *armcompute.InstanceViewStatus {
		return &armcompute.InstanceViewStatus{Code: to.Ptr(code), DisplayStatus: to.Ptr(display), Level: to.Ptr(armcompute.StatusLevelTypesInfo)}
	}
	provisioning := status("ProvisioningState/"+strings.ToLower(state), "Provisioning "+strings.ToLower(state))
	if state == stateFailed && failedWith != "" {
		provisioning.Code, provisioning.Level = to.Ptr(*provisioning.Code+"/"+failedWith), to.Ptr(armcompute.StatusLevelTypesError)
	}
	out := []*armcompute.InstanceViewStatus{provisioning}
	switch {
	case state == stateFailed && started:
		out = append(out, status("PowerState/running", "VM running"))
	case state == stateSucceeded:
		out = append(out, status("PowerState/running", "VM running"))
	case state == stateCreating:
		out = append(out, status("PowerState/starting", "VM starting"))
	case state == stateDeleting:
		out = append(out, status("PowerState/stopping", "VM stopping"))
	}
	return out
}

// macAddress returns a random MAC address in Azure's 00-0D-3A range.
func macAddress() string {
	u := newUUID()
	return strings.ToUpper(fmt.Sprintf("00-0D-3A-%s-%s-%s", u[0:2], u[2:4], u[4:6]))
}
