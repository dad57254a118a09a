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

// Actions of virtual machines and scale set instances: the run command and boot diagnostics.

// maxRunCommandOutput is how much of a script's output and error a run command returns: the
// last 4,096 bytes of each, as Azure's ("Output is limited to the last 4,096 bytes",
// https://learn.microsoft.com/en-us/azure/virtual-machines/windows/run-command#restrictions and
// https://learn.microsoft.com/en-us/azure/virtual-machines/linux/run-command#restrictions).
const maxRunCommandOutput = 4096

// runCommand runs a command on a virtual machine (POST .../virtualMachines/{vm}/runCommand).
func (s *Server) runCommand(w http.ResponseWriter, q *armRequest) *apiError {
	commandID, script, e := decodeRunCommand(q)
	if e != nil {
		return e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	vm, e := s.vm(q)
	if e != nil {
		return e
	}
	return s.startRunCommand(w, q, q.id(8), &vm.machine, vm.state, commandID, script)
}

// runInstanceCommand runs a command on a scale set instance (POST
// .../virtualMachineScaleSets/{ss}/virtualMachines/{instanceId}/runCommand,
// https://learn.microsoft.com/en-us/rest/api/compute/virtual-machine-scale-set-vms/run-command).
func (s *Server) runInstanceCommand(w http.ResponseWriter, q *armRequest) *apiError {
	commandID, script, e := decodeRunCommand(q)
	if e != nil {
		return e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, in, e := s.instance(q)
	if e != nil {
		return e
	}
	return s.startRunCommand(w, q, q.id(10), &in.machine, in.state, commandID, script)
}

func decodeRunCommand(q *armRequest) (string, string, *apiError) {
	var in armcompute.RunCommandInput
	if e := decodeStrict(q.body, &in); e != nil {
		return "", "", e
	}
	if len(in.Parameters) > 0 {
		return "", "", invalidParameter("parameters", "armtest passes no parameters to scripts: put the values in the script.")
	}
	var lines []string
	for _, l := range in.Script {
		lines = append(lines, deref(l))
	}
	return deref(in.CommandID), strings.Join(lines, "\n"), nil
}

// startRunCommand runs the script on the machine (Booter.RunCommand) while the operation is
// in progress; its result is the operation's. s.mu is held.
func (s *Server) startRunCommand(w http.ResponseWriter, q *armRequest, id string, m *machine, state, commandID, script string) *apiError {
	// The run commands of each OS: RunShellScript on Linux, RunPowerShellScript on Windows
	// (https://learn.microsoft.com/en-us/azure/virtual-machines/linux/run-command#available-commands,
	// https://learn.microsoft.com/en-us/azure/virtual-machines/windows/run-command#available-commands).
	switch want := map[bool]string{true: "RunShellScript", false: "RunPowerShellScript"}[m.info.Linux]; {
	case commandID != "RunShellScript" && commandID != "RunPowerShellScript":
		return invalidParameter("commandId", "commandId %q: armtest runs RunShellScript and RunPowerShellScript only.", commandID)
	case commandID != want:
		return invalidParameter("commandId", "%s cannot run on this virtual machine's operating system: use %s.", commandID, want)
	}
	if state != stateSucceeded || m.bootDone == nil {
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
	info, done := m.info, m.bootDone
	go func() {
		defer close(op.working)
		<-done
		ctx, cancel := context.WithTimeout(s.ctx, 10*time.Minute)
		defer cancel()
		stdout, stderr, exit, err := s.opts.Booter.RunCommand(ctx, info, script)
		result := runCommandResult(info.Linux, stdout, stderr, exit, err)
		s.mu.Lock()
		op.result = result
		s.mu.Unlock()
	}()
	s.writeStarted(w, op, http.StatusAccepted, nil)
	return nil
}

// runCommandResult is a run command's result as Azure gives it. On Linux one status holds both
// streams; its code names a non-zero exit. On Windows one status per stream, succeeded
// whatever the script's exit code (MicrosoftDocs/azure-docs-cli#4542: a RunPowerShellScript
// that ends with Exit 1 answers ComponentStatus/StdOut/succeeded and
// ComponentStatus/StdErr/succeeded).
func runCommandResult(linux bool, stdout, stderr []byte, exit int, err error) armcompute.RunCommandResult {
	status := func(code, message string) *armcompute.InstanceViewStatus {
		return &armcompute.InstanceViewStatus{Code: to.Ptr(code), Level: to.Ptr(armcompute.StatusLevelTypesInfo),
			DisplayStatus: to.Ptr("Provisioning succeeded"), Message: to.Ptr(message)}
	}
	if !linux {
		if err != nil {
			return armcompute.RunCommandResult{Value: []*armcompute.InstanceViewStatus{status("ComponentStatus/StdOut/failed", ""),
				status("ComponentStatus/StdErr/failed", err.Error())}}
		}
		return armcompute.RunCommandResult{Value: []*armcompute.InstanceViewStatus{status("ComponentStatus/StdOut/succeeded", lastBytes(stdout)),
			status("ComponentStatus/StdErr/succeeded", lastBytes(stderr))}}
	}
	code, message := "ProvisioningState/succeeded", "Enable succeeded: \n"
	switch {
	case err != nil:
		code, message = "ProvisioningState/failed", fmt.Sprintf("Enable failed: %v\n", err)
	case exit != 0:
		code, message = fmt.Sprintf("ProvisioningState/failed/%d",
			exit), fmt.Sprintf("Enable failed: failed to execute command: command terminated with exit status=%d\n", exit)
	}
	message += "[stdout]\n" + lastBytes(stdout) + "\n[stderr]\n" + lastBytes(stderr) + "\n"
	return armcompute.RunCommandResult{Value: []*armcompute.InstanceViewStatus{status(code, message)}}
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
