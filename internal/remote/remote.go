// Package remote runs commands on an existing Windows server over SSH (Windows Server's
// OpenSSH) or WinRM (github.com/masterzen/winrm), for the guest package. Both check who they
// talk to by default — the SSH host key, the WinRM server's TLS certificate — and turn the
// failures a user can fix (an unreachable host, a refused credential, a certificate or host key
// that does not match) into an *Error that says which.
package remote

import (
	"errors"
	"fmt"
	"net"
)

// Kind is a class of connection failure.
type Kind int

// Kinds of connection failure.
const (
	// Unreachable: nothing answered at the address (refused, timed out, no route, no such host).
	Unreachable Kind = iota + 1
	// Unauthorized: the server refused the credentials.
	Unauthorized
	// Untrusted: the server's TLS certificate or SSH host key is not the one expected.
	Untrusted
)

// Error is a connection failure of a known kind.
type Error struct {
	Kind Kind
	// Addr is the server's address; Err what the transport said.
	Addr string
	Err  error
}

func (e *Error) Error() string {
	switch e.Kind {
	case Unreachable:
		return fmt.Sprintf("cannot reach %s: %v", e.Addr, e.Err)
	case Unauthorized:
		return fmt.Sprintf("%s refused the credentials: %v", e.Addr, e.Err)
	case Untrusted:
		return fmt.Sprintf("%s is not the server expected: %v", e.Addr, e.Err)
	}
	return e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// KindOf returns the kind of a connection failure, or 0.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return 0
}

// unreachable reports whether err is a failure to reach an address at all.
func unreachable(err error) bool {
	var op *net.OpError
	var dns *net.DNSError
	return errors.As(err, &op) || errors.As(err, &dns)
}
