//go:build !unix

package controlplane

import (
	"errors"
	"syscall"
)

// The control plane runs on Linux and other Unix systems only; these keep the package
// compiling elsewhere (it is vetted for windows/amd64 with the rest of the module).

var errUnsupported = errors.New("the local control plane runs only on Unix systems")

func sysProcAttr(bool) *syscall.SysProcAttr { return nil }

func processAlive(int) bool { return false }

func terminate(int) error { return errUnsupported }

func kill(int) error { return errUnsupported }
