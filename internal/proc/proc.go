// Package proc watches and stops the long-running processes of the local backend (control
// plane components, simulated machines' nodeboot) by PID.
package proc

import (
	"context"
	"time"
)

// WaitGone waits until the process has exited, and reports whether it did in time.
func WaitGone(ctx context.Context, pid int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for Alive(pid) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// Stop terminates a process and waits up to grace for it to exit, then kills it.
func Stop(ctx context.Context, pid int, grace time.Duration) error {
	if pid <= 0 || !Alive(pid) {
		return nil
	}
	if err := Terminate(pid); err != nil {
		return err
	}
	if WaitGone(ctx, pid, grace) {
		return nil
	}
	if err := Kill(pid); err != nil {
		return err
	}
	WaitGone(ctx, pid, 5*time.Second)
	return nil
}
