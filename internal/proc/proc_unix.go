//go:build unix

package proc

import (
	"errors"
	"syscall"
)

// SysProcAttr puts a detached process in its own session, so that it outlives the caller and
// its terminal; an attached one in its own process group, so that a terminal's Ctrl-C reaches
// the caller first and the caller stops it in order.
func SysProcAttr(detach bool) *syscall.SysProcAttr {
	if detach {
		return &syscall.SysProcAttr{Setsid: true}
	}
	return &syscall.SysProcAttr{Setpgid: true}
}

// Alive reports whether a process runs.
func Alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Terminate asks a process to stop (SIGTERM).
func Terminate(pid int) error { return ignoreGone(syscall.Kill(pid, syscall.SIGTERM)) }

// Kill stops a process at once (SIGKILL).
func Kill(pid int) error { return ignoreGone(syscall.Kill(pid, syscall.SIGKILL)) }

func ignoreGone(err error) error {
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}
