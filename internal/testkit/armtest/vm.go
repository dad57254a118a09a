package armtest

import (
	"context"
	"fmt"
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
// action.

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

func (s *Server) putVM(w http.ResponseWriter, q *armRequest) *apiError {
	var m armcompute.VirtualMachine
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
	if p == nil || p.HardwareProfile == nil || p.HardwareProfile.VMSize == nil || p.StorageProfile == nil || p.StorageProfile.ImageReference == nil ||
		p.OSProfile == nil || p.NetworkProfile == nil || len(p.NetworkProfile.NetworkInterfaces) == 0 {
		return invalidParameter("properties", "A virtual machine needs hardwareProfile.vmSize, storageProfile.imageReference, osProfile and networkProfile.networkInterfaces.")
	}
	p.ProvisioningState, p.VMID, p.TimeCreated, p.InstanceView = nil, nil, nil, nil

	s.mu.Lock()
	defer s.mu.Unlock()
	if op := s.busy(id); op != nil {
		return s.conflict(op, id)
	}
	if old := s.vms[strings.ToLower(id)]; old != nil {
		// Only tags change in place here: the machine is made of the rest.
		if !sameJSON(old.model.Properties.OSProfile.ComputerName, p.OSProfile.ComputerName) || !sameJSON(old.model.Properties.StorageProfile.ImageReference, p.StorageProfile.ImageReference) ||
			!sameJSON(old.model.Properties.NetworkProfile, p.NetworkProfile) || (p.OSProfile.CustomData != nil && !sameJSON(old.model.Properties.OSProfile.CustomData, p.OSProfile.CustomData)) {
			return changeNotAllowed("osProfile, storageProfile.imageReference or networkProfile")
		}
		old.model.Tags = m.Tags
		writeJSON(w, http.StatusOK, s.vmView(old, false))
		return nil
	}
	osp := p.OSProfile
	name := deref(osp.ComputerName)
	linux := osp.LinuxConfiguration != nil
	if !computerName.MatchString(name) || allDigits.MatchString(name) || (!linux && len(name) > 15) {
		return invalidParameter("osProfile.computerName", "The computer name %q must be 1 to 64 letters, digits and '-' (15 on Windows), not only digits.", name)
	}
	if e := checkAdmin(deref(osp.AdminUsername), osp.AdminPassword, osp.LinuxConfiguration); e != nil {
		return e
	}
	customData, e := decodeCustomData(osp.CustomData)
	if e != nil {
		return e
	}
	image, e := s.imageOf(p.StorageProfile.ImageReference)
	if e != nil {
		return e
	}
	vm := &virtualMachine{id: id, location: loc, model: m, state: stateCreating, vmID: newUUID(), created: time.Now().UTC()}
	var primary netip.Addr
	var forwarding bool
	for i, ref := range p.NetworkProfile.NetworkInterfaces {
		nic := s.object(deref(ref.ID), typeNIC)
		if nic == nil || !strings.EqualFold(nic.location, loc) {
			return errReference(deref(ref.ID), id)
		}
		if nic.vm != "" {
			return newError(http.StatusBadRequest, "NicInUse", "Network interface %s is attached to virtual machine %s.", nic.id, nic.vm)
		}
		if i == 0 || (ref.Properties != nil && ref.Properties.Primary != nil && *ref.Properties.Primary) {
			primary, forwarding = nicAddress(nic)
		}
		vm.nics = append(vm.nics, strings.ToLower(nic.id))
	}
	for _, n := range vm.nics {
		s.objects[n].vm = strings.ToLower(id)
	}
	vm.info = Instance{ID: id, ComputerName: name, Linux: linux, PrivateIP: primary, IPForwarding: forwarding, CustomData: customData, ImageID: image}
	s.vms[strings.ToLower(id)] = vm
	op := s.startOperation(q, id, func(failure *apiError) func() {
		if failure != nil {
			vm.state = stateFailed
			return nil
		}
		vm.state = stateSucceeded
		return func() { s.bootAll([]*machine{&vm.machine}) }
	})
	s.writeStarted(w, op, http.StatusCreated, s.vmView(vm, false))
	return nil
}

func (s *Server) getVM(w http.ResponseWriter, q *armRequest) *apiError {
	exp, e := expand(q, "instanceView", "userData")
	if e != nil {
		return e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	vm, e := s.vm(q)
	if e != nil {
		return e
	}
	writeJSON(w, http.StatusOK, s.vmView(vm, exp == "instanceView"))
	return nil
}

// vmView is a VM as GET returns it: never its password or custom data.
func (s *Server) vmView(vm *virtualMachine, withInstanceView bool) armcompute.VirtualMachine {
	out := *clone(&vm.model)
	out.ID, out.Name, out.Type, out.Location = to.Ptr(vm.id), to.Ptr(lastSegment(vm.id)), to.Ptr(typeVM), to.Ptr(vm.location)
	p := out.Properties
	p.ProvisioningState, p.VMID, p.TimeCreated = to.Ptr(vm.state), to.Ptr(vm.vmID), to.Ptr(vm.created)
	p.OSProfile.AdminPassword, p.OSProfile.CustomData = nil, nil
	if withInstanceView {
		p.InstanceView = &armcompute.VirtualMachineInstanceView{ComputerName: to.Ptr(vm.info.ComputerName), Statuses: instanceStatuses(vm.state)}
	}
	return out
}

func (s *Server) deleteVM(w http.ResponseWriter, q *armRequest) *apiError {
	id := q.resourceID()
	s.mu.Lock()
	defer s.mu.Unlock()
	vm := s.vms[strings.ToLower(id)]
	if vm == nil {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	if op := s.busy(id); op != nil {
		return s.conflict(op, id)
	}
	vm.state = stateDeleting
	op := s.startOperation(q, id, func(failure *apiError) func() {
		if failure != nil {
			vm.state = stateFailed
			return nil
		}
		for _, n := range vm.nics {
			if nic := s.objects[n]; nic != nil {
				nic.vm = ""
			}
		}
		delete(s.vms, strings.ToLower(id))
		return func() { s.shutdownAll([]*machine{&vm.machine}) }
	})
	s.writeStarted(w, op, http.StatusAccepted, nil)
	return nil
}

// maxRunCommandOutput is how much of a script's output and error a run command returns: the
// last 4096 bytes of each, as Azure's.
const maxRunCommandOutput = 4096

// runCommand runs a RunShellScript command on a Linux VM: the script is run by the machine
// (Booter.RunCommand) while the operation is in progress, and its result is the operation's.
func (s *Server) runCommand(w http.ResponseWriter, q *armRequest) *apiError {
	var in armcompute.RunCommandInput
	if e := decodeStrict(q.body, &in); e != nil {
		return e
	}
	if deref(in.CommandID) != "RunShellScript" {
		return invalidParameter("commandId", "commandId %q: armtest runs RunShellScript only.", deref(in.CommandID))
	}
	if len(in.Parameters) > 0 {
		return invalidParameter("parameters", "armtest passes no parameters to scripts: put the values in the script.")
	}
	var lines []string
	for _, l := range in.Script {
		lines = append(lines, deref(l))
	}
	script := strings.Join(lines, "\n")
	id := q.id(8)
	s.mu.Lock()
	defer s.mu.Unlock()
	vm, e := s.vm(q)
	if e != nil {
		return e
	}
	if !vm.info.Linux {
		return invalidParameter("commandId", "RunShellScript needs a Linux virtual machine.")
	}
	if vm.state != stateSucceeded || vm.bootDone == nil {
		return newError(http.StatusConflict, "OperationNotAllowed", "The operation requires the VM to be running (or set to run).")
	}
	if op := s.busy(id); op != nil {
		return s.conflict(op, id)
	}
	op := s.startOperation(q, id, func(*apiError) func() { return nil })
	op.working = make(chan struct{})
	m := vm.machine
	go func() {
		defer close(op.working)
		<-m.bootDone
		ctx, cancel := context.WithTimeout(s.ctx, 10*time.Minute)
		defer cancel()
		stdout, stderr, exit, err := s.opts.Booter.RunCommand(ctx, m.info, script)
		code, message := "ProvisioningState/succeeded", "Enable succeeded: \n"
		switch {
		case err != nil:
			code, message = "ProvisioningState/failed", fmt.Sprintf("Enable failed: %v\n", err)
		case exit != 0:
			code, message = fmt.Sprintf("ProvisioningState/failed/%d", exit), fmt.Sprintf("Enable failed: failed to execute command: command terminated with exit status=%d\n", exit)
		}
		message += "[stdout]\n" + lastBytes(stdout) + "\n[stderr]\n" + lastBytes(stderr) + "\n"
		s.mu.Lock()
		op.result = armcompute.RunCommandResult{Value: []*armcompute.InstanceViewStatus{{
			Code: to.Ptr(code), Level: to.Ptr(armcompute.StatusLevelTypesInfo), DisplayStatus: to.Ptr("Provisioning succeeded"), Message: to.Ptr(message),
		}}}
		s.mu.Unlock()
	}()
	s.writeStarted(w, op, http.StatusAccepted, nil)
	return nil
}

func lastBytes(b []byte) string {
	return string(b[max(0, len(b)-maxRunCommandOutput):])
}

func (s *Server) retrieveVMBootDiagnostics(w http.ResponseWriter, q *armRequest) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	vm, e := s.vm(q)
	if e != nil {
		return e
	}
	res, e := s.serialLogURI(q, blob{vm: strings.ToLower(vm.id)}, vm.info.ComputerName)
	if e != nil {
		return e
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}
