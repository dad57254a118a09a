package remote

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"net"
	"os/user"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/kubewin/kubewin/internal/guest"
	"github.com/kubewin/kubewin/internal/testkit/testenv"
)

// Against Debian's OpenSSH on 127.0.0.1: a command runs with its standard input and exit
// status, and a host key that is not the server's, a key the server does not know and an
// address nothing answers at are each a failure of their own kind.
func TestSSH(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	sshd := testenv.StartSSHD(t, t.TempDir(), pub)
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	good := SSH{Host: "127.0.0.1", Port: sshd.Port, User: me.Username, PrivateKey: testenv.SSHKeyPEM(t, priv), HostKey: sshd.HostKey}
	ctx := context.Background()
	c, err := good.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	var out, errOut bytes.Buffer
	status, err := c.Run(ctx, guest.Command{Line: "echo out; echo err >&2; cat; exit 3", Stdin: strings.NewReader("on stdin")}, &out, &errOut)
	if err != nil || status != 3 || out.String() != "out\non stdin" || errOut.String() != "err\n" {
		t.Errorf("run: status %d, output %q, error output %q, %v", status, out.String(), errOut.String(), err)
	}

	otherPub, otherPriv, _ := ed25519.GenerateKey(rand.Reader)
	otherHost, _ := ssh.NewPublicKey(otherPub)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		t.Fatalf("a TCP listener at %v", l.Addr())
	}
	closed := addr.Port
	_ = l.Close()
	for _, tc := range []struct {
		name   string
		change func(*SSH)
		want   Kind
	}{
		{"another host key", func(s *SSH) { s.HostKey = string(ssh.MarshalAuthorizedKey(otherHost)) }, Untrusted},
		{"unknown user key", func(s *SSH) { s.PrivateKey = testenv.SSHKeyPEM(t, otherPriv) }, Unauthorized},
		{"nothing listening", func(s *SSH) { s.Port = closed }, Unreachable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := good
			tc.change(&s)
			_, err := s.Dial(ctx)
			if KindOf(err) != tc.want {
				t.Errorf("error %v: kind %d, want %d", err, KindOf(err), tc.want)
			}
		})
	}
	// Without the explicit opt-in, a missing host key is refused before any connection.
	s := good
	s.HostKey = ""
	if _, err := s.Dial(ctx); err == nil || KindOf(err) != 0 || !strings.Contains(err.Error(), "authorized_keys format") {
		t.Errorf("no host key: %v", err)
	}
	s.InsecureIgnoreHostKey = true
	if c, err := s.Dial(ctx); err != nil {
		t.Errorf("insecure_ignore_host_key: %v", err)
	} else {
		_ = c.Close()
	}
}
