package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/kubewin/kubewin/internal/api"
	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/simmachine"
)

// sshd is Debian's OpenSSH server (make testenv installs it), run by the test on 127.0.0.1.
const sshdPath = "/usr/sbin/sshd"

// startSSHD runs sshd on a free loopback port accepting key for the current user and returns
// the port.
func startSSHD(t *testing.T, dir string, key ed25519.PublicKey) int {
	t.Helper()
	if _, err := os.Stat(sshdPath); err != nil {
		t.Fatalf("%s is missing: install Debian's openssh-server (make testenv does): %v", sshdPath, err)
	}
	_, hostKey, _ := ed25519.GenerateKey(rand.Reader)
	writeKey(t, filepath.Join(dir, "host_key"), hostKey)
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
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
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
	cmd := exec.Command(sshdPath, "-D", "-e", "-f", filepath.Join(dir, "sshd_config"))
	log, err := os.Create(filepath.Join(dir, "sshd.log"))
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
		log.Close()
	})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
			c.Close()
			return port
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(dir, "sshd.log"))
			t.Fatalf("sshd did not listen on 127.0.0.1:%d:\n%s", port, b)
		}
	}
}

func writeKey(t *testing.T, path string, key ed25519.PrivateKey) {
	t.Helper()
	block, err := ssh.MarshalPrivateKey(key, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestBuildOverSSH drives the provisioner through Packer's real SSH communicator (the null
// builder to an sshd on 127.0.0.1) in host-cache mode: every artifact goes up by upload, the
// bake runs as a remote command, and the manifest comes back by download.
func TestBuildOverSSH(t *testing.T) {
	e, u, _, pause := serveRelease(t, 20348)
	dir := t.TempDir()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	writeKey(t, filepath.Join(dir, "id_ed25519"), priv)
	port := startSSHD(t, dir, pub)
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}

	// The guest: a simulated Windows machine on the far side of SSH.
	root := filepath.Join(dir, "guest machine")
	desc, _ := json.Marshal(simmachine.Machine{Build: 20348, Adapter: "Ethernet", Address: netip.MustParseAddr("127.0.0.2"), Subnet: netip.MustParsePrefix("127.0.0.0/8"), Runtime: v1alpha1.RuntimeContainerd})
	if err := os.MkdirAll(filepath.Join(root, "sim"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(simmachine.File)), desc, 0o644); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(dir, "manifest.json")
	tpl := releaseBlock(u, pause) + fmt.Sprintf(`
source "null" "ssh" {
  communicator         = "ssh"
  ssh_host             = "127.0.0.1"
  ssh_port             = %d
  ssh_username         = %q
  ssh_private_key_file = %q
  ssh_timeout          = "30s"
}

build {
  sources = ["source.null.ssh"]
  provisioner "kubewin-node" {
    release         = data.kubewin-release.node.manifest
    transfer        = "host-cache"
    cache_dir       = %q
    sim_root        = %q
    sim_nodeboot    = %q
    manifest_output = %q
  }
}
`, port, me.Username, filepath.Join(dir, "id_ed25519"), filepath.Join(dir, "cache"), root, e.nodeboot, manifest)
	log, err := e.build(t, dir, tpl)
	if err != nil {
		sshdLog, _ := os.ReadFile(filepath.Join(dir, "sshd.log"))
		t.Fatalf("packer build over SSH: %v\n%s\nsshd:\n%s", err, log, sshdLog)
	}
	raw, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatalf("the manifest did not come back over SSH: %v", err)
	}
	m, err := api.LoadImageManifest(raw)
	if err != nil {
		t.Fatal(err)
	}
	if m.PauseImage.Archive == "" || len(m.Files) != 8 {
		t.Errorf("manifest: %d files, pause archive %q", len(m.Files), m.PauseImage.Archive)
	}
	checkFiles(t, m, filepath.Join(root, "C"))
	if !regexp.MustCompile(`\[bake\] payload: 8 files verified, 0 bytes downloaded`).MatchString(log) {
		t.Errorf("the guest downloaded what was uploaded:\n%s", log)
	}
	if th := regexp.MustCompile(`uploaded \d+ files, \d+ bytes in [0-9.]+s \([0-9.]+ MB/s\)`).FindString(log); th != "" {
		fmt.Println("host-cache over SSH: " + th)
	} else {
		t.Errorf("no upload figures in the output:\n%s", log)
	}
}
