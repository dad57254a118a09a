package servers

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/kubewin/kubewin/internal/guest"
	"github.com/kubewin/kubewin/internal/remote"
	"github.com/kubewin/kubewin/internal/testkit/serverstest"
)

const (
	testUser     = "Administrator"
	testPassword = "c0rrect-h0rse!'\"$"
)

// winrmShell connects to the test server with masterzen/winrm: HTTPS, its certificate checked
// against its CA, Basic authentication.
func winrmShell(t *testing.T, srv *serverstest.WinRM, password string, ca string) guest.Shell {
	t.Helper()
	c, err := remote.WinRM{Host: srv.Host, Port: srv.Port, User: testUser, Password: password, Auth: remote.AuthBasic,
		CACertificates: []byte(ca)}.Client()
	if err != nil {
		t.Fatal(err)
	}
	return guest.Shell{Runner: c, Lang: guest.Windows{}}
}

// Over WinRM, the server's facts come back, a secret goes in through standard input (never on a
// command line) and is verified, a file comes back, and a failing command's exit code and
// output reach the error. The test server's limits (no stderr, no NTLM) are in its package.
func TestWinRMShell(t *testing.T) {
	srv := serverstest.NewWinRM(t, testUser, testPassword)
	m := &serverstest.Machine{Facts: guest.Facts{ComputerName: "WIN-7", Build: 20348, ContainersFeature: true,
		Files: []string{`C:\ProgramData\kubewin\image-manifest.json`}},
		Fail: map[string]serverstest.Failure{"'reset'": {Exit: 7, Output: "[reset] node win-7: remove service kubelet: access denied\r\n"}}}
	srv.Answer = m.Answer
	s := winrmShell(t, srv, testPassword, srv.CA)
	ctx := context.Background()

	f, err := Inspect(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if f.ComputerName != "WIN-7" || f.Build != 20348 || len(f.Files) != 1 {
		t.Errorf("facts %+v", f)
	}
	secret := []byte(`{"bootstrapToken": "abcdef.0123456789abcdef"}` + strings.Repeat("x", 100<<10))
	if err := s.Write(ctx, `C:\AzureData\CustomData.bin`, bytes.NewReader(secret), true); err != nil {
		t.Fatal(err)
	}
	if got, _ := m.File(`C:\AzureData\CustomData.bin`); !bytes.Equal(got, secret) {
		t.Errorf("the server received %d bytes, %d sent", len(got), len(secret))
	}
	var back bytes.Buffer
	if err := s.Download(ctx, `C:\AzureData\CustomData.bin`, &back); err != nil || !bytes.Equal(back.Bytes(), secret) {
		t.Errorf("download: %d bytes, %v", back.Len(), err)
	}
	for _, c := range srv.Commands() {
		if strings.Contains(c.Script, "abcdef.0123456789abcdef") {
			t.Errorf("a command line carries the secret:\n%s", c.Script)
		}
	}
	cmds := srv.Commands()
	if w := cmds[1]; !strings.Contains(w.Script, "SetAccessRuleProtection") || !strings.Contains(w.Script, `'C:\AzureData\CustomData.bin'`) {
		t.Errorf("the secret was not written owner-only:\n%s", w.Script)
	}

	_, err = guest.Run(ctx, s, guest.Command{What: "nodeboot reset", Line: s.Lang.Nodeboot("reset")}, nil)
	var exit *guest.ExitError
	if !errors.As(err, &exit) || exit.Status != 7 || !strings.Contains(err.Error(), "remove service kubelet: access denied") {
		t.Errorf("failing command: %v", err)
	}
	if srv.Refused() != 0 {
		t.Errorf("%d requests refused", srv.Refused())
	}
}

// A wrong password, an untrusted certificate and an address nothing answers at are each a
// connection failure of their own kind, and no command reaches the server.
func TestWinRMConnectionFailures(t *testing.T) {
	srv := serverstest.NewWinRM(t, testUser, testPassword)
	ctx := context.Background()
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
		name string
		conn remote.WinRM
		want remote.Kind
	}{
		{"wrong password", remote.WinRM{Host: srv.Host, Port: srv.Port, User: testUser, Password: "wrong", Auth: remote.AuthBasic,
			CACertificates: []byte(srv.CA)}, remote.Unauthorized},
		{"untrusted certificate", remote.WinRM{Host: srv.Host, Port: srv.Port, User: testUser, Password: testPassword, Auth: remote.AuthBasic},
			remote.Untrusted},
		{"unreachable", remote.WinRM{Host: "127.0.0.1", Port: closed, User: testUser, Password: testPassword, Auth: remote.AuthBasic}, remote.Unreachable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.conn.Client()
			if err != nil {
				t.Fatal(err)
			}
			_, err = Inspect(ctx, guest.Shell{Runner: c, Lang: guest.Windows{}})
			if remote.KindOf(err) != tc.want {
				t.Errorf("error %v: kind %d, want %d", err, remote.KindOf(err), tc.want)
			}
			if err != nil && strings.Contains(err.Error(), testPassword) {
				t.Errorf("the error carries the password: %v", err)
			}
		})
	}
	if n := len(srv.Commands()); n != 0 {
		t.Errorf("%d commands reached the server", n)
	}
}
