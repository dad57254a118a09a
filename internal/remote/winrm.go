package remote

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/masterzen/winrm"

	"github.com/kubewin/kubewin/internal/guest"
)

// WinRM authentication schemes.
const (
	// AuthNTLM is NTLM (Negotiate), WinRM's default for local accounts. It authenticates
	// without sending the password; the messages are protected by HTTPS only.
	AuthNTLM = "ntlm"
	// AuthBasic is HTTP Basic, which the server must allow (`winrm set winrm/config/service/auth
	// @{Basic="true"}`); it sends the password, so only over HTTPS.
	AuthBasic = "basic"
)

// WinRM is how to reach a server over WinRM with a user and password.
type WinRM struct {
	Host string
	Port int
	// HTTP makes the connection plain HTTP: nothing is encrypted or authenticated on the way.
	HTTP bool
	User string
	// Password is never logged or put in errors.
	Password string
	// Auth is AuthNTLM or AuthBasic.
	Auth string
	// CACertificates are the PEM certificates that may sign the server's; empty: the system's.
	CACertificates []byte
	// TLSServerName is the name the certificate must carry when it is not Host.
	TLSServerName string
	// InsecureSkipVerify accepts any certificate.
	InsecureSkipVerify bool
	// Timeout bounds each request's wait for an answer. Default 60s.
	Timeout time.Duration
}

// WinRMClient runs commands over WinRM.
type WinRMClient struct {
	c    *winrm.Client
	addr string
}

var _ guest.Runner = (*WinRMClient)(nil)

// Client returns a client; it connects with its first command.
func (w WinRM) Client() (*WinRMClient, error) {
	if len(w.CACertificates) > 0 {
		if !x509.NewCertPool().AppendCertsFromPEM(w.CACertificates) {
			return nil, fmt.Errorf("the CA certificates hold no PEM certificate")
		}
	}
	ep := winrm.NewEndpoint(w.Host, w.Port, !w.HTTP, w.InsecureSkipVerify, w.CACertificates, nil, nil, w.Timeout)
	ep.TLSServerName = w.TLSServerName
	params := *winrm.DefaultParameters
	switch w.Auth {
	case AuthNTLM:
		params.TransportDecorator = func() winrm.Transporter { return &winrm.ClientNTLM{} }
	case AuthBasic:
	default:
		return nil, fmt.Errorf("WinRM authentication %q: use %q or %q", w.Auth, AuthNTLM, AuthBasic)
	}
	c, err := winrm.NewClientWithParameters(ep, w.User, w.Password, &params)
	if err != nil {
		return nil, err
	}
	return &WinRMClient{c: c, addr: net.JoinHostPort(w.Host, strconv.Itoa(w.Port))}, nil
}

// Run runs a command line through cmd.exe, in a shell of its own. A cancelled context
// terminates the command on the server.
func (c *WinRMClient) Run(ctx context.Context, cmd guest.Command, stdout, stderr io.Writer) (int, error) {
	status, err := c.c.RunWithContextWithInput(ctx, cmd.Line, stdout, stderr, cmd.Stdin)
	if err != nil {
		return status, c.classify(err)
	}
	return status, nil
}

// classify names the failures a user can fix.
func (c *WinRMClient) classify(err error) error {
	var verify *tls.CertificateVerificationError
	var unknown x509.UnknownAuthorityError
	var hostname x509.HostnameError
	msg := err.Error()
	switch {
	case errors.As(err, &verify), errors.As(err, &unknown), errors.As(err, &hostname), strings.Contains(msg, "x509:"):
		return &Error{Kind: Untrusted, Addr: c.addr, Err: err}
	case strings.Contains(msg, "http error 401"), strings.Contains(msg, "http response error: 401"):
		return &Error{Kind: Unauthorized, Addr: c.addr, Err: errors.New("HTTP 401 Unauthorized")}
	case strings.Contains(msg, "http response error: 400"), strings.Contains(msg, "server gave HTTP response to HTTPS client"),
		strings.Contains(msg, "first record does not look like a TLS handshake"):
		return &Error{Kind: Unreachable, Addr: c.addr, Err: fmt.Errorf("%w (is this the WinRM port, and HTTPS?)", err)}
	case unreachable(err):
		return &Error{Kind: Unreachable, Addr: c.addr, Err: err}
	}
	return err
}
