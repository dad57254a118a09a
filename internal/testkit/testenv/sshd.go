package testenv

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// SSHDPath is Debian's OpenSSH server (make testenv installs it).
const SSHDPath = "/usr/sbin/sshd"

// SSHD is an OpenSSH server on 127.0.0.1 that lets the current user in with a key.
type SSHD struct {
	Port int
	// HostKey is the server's public host key in authorized_keys format.
	HostKey string
	// Log is the server's log file.
	Log string
}

// StartSSHD runs sshd with a configuration of its own in dir, on a free loopback port,
// accepting key for the current user; the test's cleanup stops it.
func StartSSHD(t testing.TB, dir string, key ed25519.PublicKey) *SSHD {
	t.Helper()
	if _, err := os.Stat(SSHDPath); err != nil {
		t.Fatalf("%s is missing: install Debian's openssh-server (make testenv does): %v", SSHDPath, err)
	}
	hostPub, hostKey, _ := ed25519.GenerateKey(rand.Reader)
	WriteSSHKey(t, filepath.Join(dir, "host_key"), hostKey)
	pub, err := ssh.NewPublicKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "authorized_keys"), ssh.MarshalAuthorizedKey(pub), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		t.Fatalf("a TCP listener at %v", l.Addr())
	}
	port := addr.Port
	_ = l.Close()
	conf := fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %[2]s/host_key
PidFile %[2]s/sshd.pid
AuthorizedKeysFile %[2]s/authorized_keys
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
StrictModes no
UsePAM no
Subsystem sftp internal-sftp
`, port, dir)
	if err := os.WriteFile(filepath.Join(dir, "sshd_config"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = os.MkdirAll("/run/sshd", 0o755) // the privilege separation directory, when run as root
	s := &SSHD{Port: port, Log: filepath.Join(dir, "sshd.log")}
	hp, _ := ssh.NewPublicKey(hostPub)
	s.HostKey = string(ssh.MarshalAuthorizedKey(hp))
	cmd := exec.Command(SSHDPath, "-D", "-e", "-f", filepath.Join(dir, "sshd_config"))
	log, err := os.Create(s.Log)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = log.Close()
	})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
			_ = c.Close()
			return s
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(s.Log)
			t.Fatalf("sshd did not listen on 127.0.0.1:%d:\n%s", port, b)
		}
	}
}

// WriteSSHKey writes a private key in OpenSSH format, owner-only.
func WriteSSHKey(t testing.TB, path string, key ed25519.PrivateKey) {
	t.Helper()
	if err := os.WriteFile(path, SSHKeyPEM(t, key), 0o600); err != nil {
		t.Fatal(err)
	}
}

// SSHKeyPEM is a private key in OpenSSH format.
func SSHKeyPEM(t testing.TB, key ed25519.PrivateKey) []byte {
	t.Helper()
	block, err := ssh.MarshalPrivateKey(key, "")
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(block)
}
