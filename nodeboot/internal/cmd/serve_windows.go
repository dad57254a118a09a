package cmd

import (
	"context"
	"fmt"
	"os"

	"golang.org/x/sys/windows/svc"
)

// ServiceName is nodeboot's own Windows service, registered by `nodeboot bake`.
const ServiceName = "nodeboot"

// serve runs f as the nodeboot Windows service when the Service Control Manager started the
// process, and until Ctrl-C otherwise.
func serve(f func(context.Context) error) error {
	inService, err := svc.IsWindowsService()
	if err != nil || !inService {
		ctx, stop := signalContext()
		defer stop()
		return f(ctx)
	}
	h := &handler{run: f}
	if err := svc.Run(ServiceName, h); err != nil {
		return err
	}
	return h.err
}

type handler struct {
	run func(context.Context) error
	err error
}

func (h *handler) Execute(_ []string, req <-chan svc.ChangeRequest, status chan<- svc.Status) (bool, uint32) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- h.run(ctx) }()
	status <- svc.Status{State: svc.Running, Accepts: svc.AcceptStop | svc.AcceptShutdown}
	for {
		select {
		case err := <-done:
			if err != nil {
				crash(err)
			}
			return false, 0
		case c := <-req:
			switch c.Cmd {
			case svc.Interrogate:
				status <- c.CurrentStatus
			case svc.Stop, svc.Shutdown:
				status <- svc.Status{State: svc.StopPending}
				cancel()
				h.err = <-done
				return false, 0
			}
		}
	}
}

// crash ends the process after a failure without reporting SERVICE_STOPPED, which the Service
// Control Manager counts as a crash and answers with the service's recovery (a restart after
// 10 s, platform/windows restartAlways) whatever the service's failure actions flag. A stop with
// an error would be recovered only with that flag, and a change of the flag "takes effect the
// next time the system is started" (SERVICE_FAILURE_ACTIONS_FLAG, Remarks,
// https://learn.microsoft.com/en-us/windows/win32/api/winsvc/ns-winsvc-service_failure_actions_flag):
// a service created after the last boot — cri-dockerd under service-host on a node's first boot,
// nodeboot installed on an existing server — would stay stopped until a reboot. The error goes
// to the Application event log first, as the service's other failures do.
func crash(err error) {
	_, _ = fmt.Fprintf(withEventLog(os.Stderr), "Error: %v\n", err)
	os.Exit(1)
}
