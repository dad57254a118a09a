//go:build !unix

package proc

import (
	"errors"
	"syscall"
)

// The local backend runs on Linux and other Unix systems only; these keep the package
// compiling elsewhere (it is vetted for windows/amd64 with the rest of the module).

var errUnsupported = errors.New("the local backend runs only on Unix systems")

// SysProcAttr is only relevant on Unix.
func SysProcAttr(bool) *syscall.SysProcAttr { return nil }

// Alive is only relevant on Unix.
func Alive(int) bool { return false }

// Terminate is only relevant on Unix.
func Terminate(int) error { return errUnsupported }

// Kill is only relevant on Unix.
func Kill(int) error { return errUnsupported }

// TryLock is only relevant on Unix.
func TryLock(string) (func(), bool, error) { return nil, false, errUnsupported }
