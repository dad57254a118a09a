package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/kubewin/kubewin/internal/api"
	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/sim/simmachine"
	"github.com/kubewin/kubewin/internal/testkit/testenv"
)

// TestBuildOverSSH drives the provisioner through Packer's real SSH communicator (the null
// builder to an sshd on 127.0.0.1) in host-cache mode: every artifact goes up by upload, the
// bake runs as a remote command, and the manifest comes back by download.
func TestBuildOverSSH(t *testing.T) {
	e, u, _, pause := serveRelease(t, 20348)
	dir := t.TempDir()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	testenv.WriteSSHKey(t, filepath.Join(dir, "id_ed25519"), priv)
	sshd := testenv.StartSSHD(t, dir, pub)
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}

	// The guest: a simulated Windows machine on the far side of SSH.
	root := filepath.Join(dir, "guest machine")
	desc, _ := json.Marshal(simmachine.Machine{Build: 20348, Adapter: "Ethernet", Address: netip.MustParseAddr("127.0.0.2"),
		Subnet: netip.MustParsePrefix("127.0.0.0/8"), Runtime: v1alpha1.RuntimeContainerd})
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
`, sshd.Port, me.Username, filepath.Join(dir, "id_ed25519"), filepath.Join(dir, "cache"), root, e.nodeboot, manifest)
	log, err := e.build(t, dir, tpl)
	if err != nil {
		sshdLog, _ := os.ReadFile(sshd.Log)
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
