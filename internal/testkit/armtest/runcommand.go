package armtest

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
)

// Actions of virtual machines: the run command and boot diagnostics.

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
		if op.working != nil {
			// A VM runs one action run command at a time; Compute refuses another while one runs
			// (https://learn.microsoft.com/azure/virtual-machines/linux/run-command#restrictions: "Only one
			// script can run at a time"), with 409 Conflict, not AnotherOperationInProgress (the answer as
			// Azure/azure-cli#32305 and #19137 show it).
			return newError(http.StatusConflict, "Conflict", "Run command extension execution is in progress. Please wait for completion before "+
				"invoking a run command.")
		}
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
			code, message = fmt.Sprintf("ProvisioningState/failed/%d",
				exit), fmt.Sprintf("Enable failed: failed to execute command: command terminated with exit status=%d\n", exit)
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
