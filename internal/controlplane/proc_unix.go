//go:build unix

package controlplane

import (
	"errors"
	"syscall"
)

// sysProcAttr puts a detached component in its own session, so that it outlives the caller and
// its terminal; an attached one in its own process group, so that a terminal's Ctrl-C reaches
// the caller first and the caller stops it in order.
func sysProcAttr(detach bool) *syscall.SysProcAttr {
	if detach {
		return &syscall.SysProcAttr{Setsid: true}
	}
	return &syscall.SysProcAttr{Setpgid: true}
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func terminate(pid int) error { return ignoreGone(syscall.Kill(pid, syscall.SIGTERM)) }

func kill(pid int) error { return ignoreGone(syscall.Kill(pid, syscall.SIGKILL)) }

func ignoreGone(err error) error {
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}
