package armtest

import (
	"encoding/json"
	"net/http"
	"net/netip"
	"regexp"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
)

// Microsoft.Compute virtual machines: created from a marketplace, managed or gallery image with
// network interfaces made before, booted (Booter.Boot) once provisioned, shut down when deleted;
// their serial console through boot diagnostics, and shell scripts through the run command
// action (runcommand.go).

type virtualMachine struct {
	machine
	id, location string
	model        armcompute.VirtualMachine // as accepted, secrets included
	state        string
	vmID         string
	created      time.Time
	nics         []string // lower-case IDs
}

var computerName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,62}[A-Za-z0-9])?$`)

func (s *Server) vm(q *armRequest) (*virtualMachine, *apiError) {
	vm := s.vms[strings.ToLower(q.id(8))]
	if vm == nil {
		return nil, errResourceNotFound(typeVM, q.name(2), q.group)
	}
	return vm, nil
}

// vmKind: a PUT creates the machine (booted when the operation ends) or changes only its tags.
var vmKind = kind{
	typ: typeVM, path: vmPath, version: ComputeAPIVersion, expand: []string{"instanceView", "userData"},
	model: func() json.Unmarshaler { return &armcompute.VirtualMachine{} },
	check: checkVM,
	find:  func(s *Server, id string) any { return found(s.vms[strings.ToLower(id)]) },
	write: func(s *Server, q *armRequest, m, old any) (*change, *apiError) {
		vm, _ := old.(*virtualMachine)
		return s.writeVM(q, as[*armcompute.VirtualMachine](m), vm)
	},
	remove: func(s *Server, _ *armRequest, r any) *change { return s.removeVM(as[*virtualMachine](r)) },
	view:   func(s *Server, r any, exp string) any { return s.vmView(as[*virtualMachine](r), exp == "instanceView") },
}

// checkVM checks a virtual machine body before the store is read.
func checkVM(_ *Server, _ *armRequest, v any) *apiError {
	m := as[*armcompute.VirtualMachine](v)
	if e := checkLocation(m.Location); e != nil {
		return e
	}
	m.ID, m.Name, m.Type, m.Etag = nil, nil, nil, nil
	p := m.Properties
	if p == nil || p.HardwareProfile == nil || p.HardwareProfile.VMSize == nil || p.StorageProfile == nil || p.StorageProfile.ImageReference == nil ||
		p.OSProfile == nil || p.NetworkProfile == nil || len(p.NetworkProfile.NetworkInterfaces) == 0 {
		return invalidParameter("properties",
			"A virtual machine needs hardwareProfile.vmSize, storageProfile.imageReference, osProfile and networkProfile.networkInterfaces.")
	}
	p.ProvisioningState, p.VMID, p.TimeCreated, p.InstanceView = nil, nil, nil, nil
	return nil
}

// writeVM creates a virtual machine, or changes the tags of an existing one (old); s.mu is held.
func (s *Server) writeVM(q *armRequest, m *armcompute.VirtualMachine, old *virtualMachine) (*change, *apiError) {
	id, loc, p := q.resourceID(), *m.Location, m.Properties
	if old != nil {
		// Only tags change in place here: the machine is made of the rest.
		if !sameJSON(old.model.Properties.OSProfile.ComputerName,
			p.OSProfile.ComputerName) || !sameJSON(old.model.Properties.StorageProfile.ImageReference, p.StorageProfile.ImageReference) ||
			!sameJSON(old.model.Properties.NetworkProfile,
				p.NetworkProfile) || (p.OSProfile.CustomData != nil && !sameJSON(old.model.Properties.OSProfile.CustomData, p.OSProfile.CustomData)) {
			return nil, changeNotAllowed("osProfile, storageProfile.imageReference or networkProfile")
		}
		old.model.Tags = m.Tags
		return &change{status: http.StatusOK, view: func() any { return s.vmView(old, false) }}, nil
	}
	osp := p.OSProfile
	name := deref(osp.ComputerName)
	linux := osp.LinuxConfiguration != nil
	if !computerName.MatchString(name) || allDigits.MatchString(name) || (!linux && len(name) > 15) {
		return nil, invalidParameter("osProfile.computerName",
			"The computer name %q must be 1 to 64 letters, digits and '-' (15 on Windows), not only digits.", name)
	}
	if e := checkAdmin(deref(osp.AdminUsername), osp.AdminPassword, osp.LinuxConfiguration); e != nil {
		return nil, e
	}
	customData, e := decodeCustomData(osp.CustomData)
	if e != nil {
		return nil, e
	}
	var identities []string
	if i := m.Identity; i != nil {
		identities, e = s.carriedIdentities(id, i.Type, i.UserAssignedIdentities)
	}
	if e != nil {
		return nil, e
	}
	image, e := s.imageOf(p.StorageProfile.ImageReference)
	if e != nil {
		return nil, e
	}
	if e := s.checkLinkedImage(q, id, image); e != nil {
		return nil, e
	}
	if e := s.checkLinkedIdentities(q, identities); e != nil {
		return nil, e
	}
	if e := s.checkCores(string(*p.HardwareProfile.VMSize), 1); e != nil {
		return nil, e
	}
	vm := &virtualMachine{id: id, location: loc, model: *m, state: stateCreating, vmID: newUUID(), created: time.Now().UTC()}
	var primary netip.Addr
	var forwarding bool
	for i, ref := range p.NetworkProfile.NetworkInterfaces {
		nic := s.object(deref(ref.ID), typeNIC)
		if nic == nil || !strings.EqualFold(nic.location, loc) {
			return nil, errReference(deref(ref.ID), id)
		}
		if nic.vm != "" {
			return nil, newError(http.StatusBadRequest, "NicInUse", "Network interface %s is attached to virtual machine %s.", nic.id, nic.vm)
		}
		if e := nic.reserved(); e != nil {
			return nil, e
		}
		if i == 0 || (ref.Properties != nil && ref.Properties.Primary != nil && *ref.Properties.Primary) {
			primary, forwarding = nicAddress(nic)
		}
		vm.nics = append(vm.nics, strings.ToLower(nic.id))
	}
	for _, n := range vm.nics {
		s.objects[n].vm = strings.ToLower(id)
	}
	vm.info = Instance{ID: id, ComputerName: name, Linux: linux, PrivateIP: primary, IPForwarding: forwarding, CustomData: customData, ImageID: image,
		Location: loc, VMSize: string(*p.HardwareProfile.VMSize), Identities: identities}
	if len(m.Zones) > 0 {
		vm.info.Zone = deref(m.Zones[0])
	}
	s.vms[strings.ToLower(id)] = vm
	return &change{status: http.StatusCreated, view: func() any { return s.vmView(vm, false) }, commit: func(failure *apiError) func() {
		switch {
		case failure != nil && failure.effect == effectStarted:
			// Failed in ARM, but the machine runs (computefaults.go).
			failure.Message = osProvisioningTimedOut(lastSegment(id))
			vm.state, vm.failedWith = stateFailed, failure.Code
			return func() { s.bootAll([]*machine{&vm.machine}) }
		case failure != nil:
			vm.state, vm.failedWith = stateFailed, failure.Code
			return nil
		}
		vm.state = stateSucceeded
		return func() { s.bootAll([]*machine{&vm.machine}) }
	}}, nil
}

// vmView is a VM as GET returns it: never its password or custom data.
func (s *Server) vmView(vm *virtualMachine, withInstanceView bool) armcompute.VirtualMachine {
	out := *clone(&vm.model)
	out.ID, out.Name, out.Type, out.Location = to.Ptr(vm.id), to.Ptr(lastSegment(vm.id)), to.Ptr(typeVM), to.Ptr(vm.location)
	p := out.Properties
	p.ProvisioningState, p.VMID, p.TimeCreated = to.Ptr(vm.state), to.Ptr(vm.vmID), to.Ptr(vm.created)
	p.OSProfile.AdminPassword, p.OSProfile.CustomData = nil, nil
	if withInstanceView {
		p.InstanceView = &armcompute.VirtualMachineInstanceView{
			ComputerName: to.Ptr(vm.info.ComputerName), Statuses: instanceStatuses(vm.state, vm.failedWith, vm.bootDone != nil),
		}
	}
	return out
}

// removeVM starts the deletion of a virtual machine, which shuts the machine down and deletes its
// network interfaces referenced with deleteOption Delete, or detaches (and reserves, nic.go) the
// others; s.mu is held.
func (s *Server) removeVM(vm *virtualMachine) *change {
	vm.state = stateDeleting
	return &change{commit: func(failure *apiError) func() {
		if failure != nil {
			vm.state = stateFailed
			return nil
		}
		for i, n := range vm.nics {
			nic := s.objects[n]
			if nic == nil {
				continue
			}
			nic.vm = ""
			if ref := vm.model.Properties.NetworkProfile.NetworkInterfaces[i]; ref.Properties != nil && ref.Properties.DeleteOption != nil &&
				*ref.Properties.DeleteOption == armcompute.DeleteOptionsDelete {
				nic.release()
				delete(s.objects, n)
				continue
			}
			nic.reservedFor, nic.reservedUntil = vm.id, time.Now().Add(s.opts.NICReservation)
		}
		delete(s.vms, strings.ToLower(vm.id))
		return func() { s.shutdownAll([]*machine{&vm.machine}) }
	}}
}
