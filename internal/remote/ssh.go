package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/kubewin/kubewin/internal/guest"
)

// SSH is how to reach a server over SSH with a private key.
type SSH struct {
	Host string
	Port int
	User string
	// PrivateKey is the user's key (PEM or OpenSSH format).
	PrivateKey []byte
	// HostKey is the server's public host key, in authorized_keys format; the connection
	// fails when the server presents another. Empty only with InsecureIgnoreHostKey.
	HostKey               string
	InsecureIgnoreHostKey bool
	// Timeout bounds connecting. Default 30s.
	Timeout time.Duration
}

// SSHClient is a connection to a server over SSH.
type SSHClient struct{ c *ssh.Client }

var _ guest.Runner = (*SSHClient)(nil)

// errHostKey is a host key that is not the expected one.
var errHostKey = errors.New("host key mismatch")

// Dial connects and authenticates.
func (s SSH) Dial(ctx context.Context) (*SSHClient, error) {
	addr := net.JoinHostPort(s.Host, strconv.Itoa(s.Port))
	signer, err := ssh.ParsePrivateKey(s.PrivateKey)
	if err != nil {
		return nil, fmt.Errorf("the SSH private key: %w", err)
	}
	timeout := s.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	cfg := &ssh.ClientConfig{User: s.User, Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)}, Timeout: timeout,
		HostKeyCallback: ssh.InsecureIgnoreHostKey()} //nolint:gosec // replaced below unless the user opted in
	if !s.InsecureIgnoreHostKey {
		want, _, _, _, err := ssh.ParseAuthorizedKey([]byte(s.HostKey))
		if err != nil {
			return nil, fmt.Errorf("the SSH host key %q is not a public key in authorized_keys format (such as `ssh-ed25519 AAAA...`): %w", s.HostKey, err)
		}
		cfg.HostKeyCallback = func(_ string, _ net.Addr, got ssh.PublicKey) error {
			if !bytes.Equal(got.Marshal(), want.Marshal()) {
				return fmt.Errorf("%w: the server presented %s %s, host_key is %s %s", errHostKey,
					got.Type(), ssh.FingerprintSHA256(got), want.Type(), ssh.FingerprintSHA256(want))
			}
			return nil
		}
		// Ask for the key of host_key's type; RSA keys sign with SHA-2.
		cfg.HostKeyAlgorithms = []string{want.Type()}
		if want.Type() == ssh.KeyAlgoRSA {
			cfg.HostKeyAlgorithms = []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256}
		}
	}
	conn, err := (&net.Dialer{Timeout: timeout}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, &Error{Kind: Unreachable, Addr: addr, Err: err}
	}
	c, chans, reqs, err := ssh.NewClientConn(conn, addr, cfg)
	if err != nil {
		_ = conn.Close()
		switch {
		case errors.Is(err, errHostKey):
			return nil, &Error{Kind: Untrusted, Addr: addr, Err: err}
		case strings.Contains(err.Error(), "unable to authenticate"):
			return nil, &Error{Kind: Unauthorized, Addr: addr, Err: fmt.Errorf("user %s with the key %s: %w", s.User,
				ssh.FingerprintSHA256(signer.PublicKey()), err)}
		}
		return nil, &Error{Kind: Unreachable, Addr: addr, Err: err}
	}
	return &SSHClient{c: ssh.NewClient(c, chans, reqs)}, nil
}

// Run runs a command line in the user's shell (cmd.exe on Windows, unless the server's
// DefaultShell says otherwise). A cancelled context ends the session.
func (c *SSHClient) Run(ctx context.Context, cmd guest.Command, stdout, stderr io.Writer) (int, error) {
	s, err := c.c.NewSession()
	if err != nil {
		return 0, err
	}
	defer func() { _ = s.Close() }()
	s.Stdin, s.Stdout, s.Stderr = cmd.Stdin, stdout, stderr
	if err := s.Start(cmd.Line); err != nil {
		return 0, err
	}
	done := make(chan error, 1)
	go func() { done <- s.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = s.Signal(ssh.SIGTERM)
		_ = s.Close()
		return 0, ctx.Err()
	}
	var exit *ssh.ExitError
	if errors.As(err, &exit) {
		return exit.ExitStatus(), nil
	}
	return 0, err
}

// Close closes the connection.
func (c *SSHClient) Close() error { return c.c.Close() }
