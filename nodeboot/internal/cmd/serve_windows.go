package cmd

import (
	"context"

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
			h.err = err
			// A stop with a non-zero exit code: the service's recovery restarts it, as its
			// failure actions flag is set (platform/windows restartAlways).
			if err != nil {
				return true, 1
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
