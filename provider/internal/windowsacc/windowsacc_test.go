package windowsacc

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
)

// setEnv clears the track's environment and sets kv.
func setEnv(t *testing.T, kv map[string]string) {
	t.Helper()
	for _, k := range []string{EnvHost, EnvTransport, EnvPort, EnvUser, EnvPassword, EnvWinRMAuth, EnvWinRMCAFile, EnvTLSServerName,
		EnvSSHPrivateKey, EnvSSHHostKey, EnvKubeconfig, EnvKubeContext, EnvClusterCIDR, EnvServiceCIDR, EnvRelease, EnvTransfer,
		EnvInterface, EnvNetworkModes} {
		t.Setenv(k, kv[k])
	}
}

// Without a host the environment names no server; a host without what reaching and joining it
// takes is an error naming each missing variable.
func TestFromEnv(t *testing.T) {
	setEnv(t, nil)
	if tg, err := FromEnv(); tg != nil || err != nil {
		t.Fatalf("no host: %+v, %v", tg, err)
	}
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{EnvHost: "win"}, EnvTransport + " to ssh or winrm"},
		{map[string]string{EnvHost: "win", EnvTransport: "winrm"}, "also set " + EnvUser + " (an administrator of the server), " + EnvKubeconfig +
			" (the kubeconfig of the cluster to join), " + EnvPassword},
		{map[string]string{EnvHost: "win", EnvTransport: "ssh", EnvUser: "a", EnvKubeconfig: "k"}, EnvSSHPrivateKey + " (the user's private key), " +
			EnvSSHHostKey},
		{map[string]string{EnvHost: "win", EnvTransport: "winrm", EnvUser: "a", EnvKubeconfig: "k", EnvPassword: "p", EnvPort: "0"},
			EnvPort + ` = "0" is not a port`},
		{map[string]string{EnvHost: "win", EnvTransport: "winrm", EnvUser: "a", EnvKubeconfig: "k", EnvPassword: "p", EnvClusterCIDR: "10.244.0.0/16"},
			"set both " + EnvClusterCIDR + " and " + EnvServiceCIDR},
		{map[string]string{EnvHost: "win", EnvTransport: "winrm", EnvUser: "a", EnvKubeconfig: "k", EnvPassword: "p", EnvNetworkModes: "overlay,vxlan"},
			`"vxlan" is not a network mode`},
		{map[string]string{EnvHost: "win", EnvTransport: "winrm", EnvUser: "a", EnvKubeconfig: "k", EnvPassword: "p", EnvRelease: "/nonexistent/plan.json"},
			EnvRelease + ": open /nonexistent/plan.json"},
	} {
		setEnv(t, c.env)
		if _, err := FromEnv(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error with %q", c.env, err, c.want)
		}
	}
	setEnv(t, map[string]string{EnvHost: "win", EnvTransport: "winrm", EnvUser: "a", EnvKubeconfig: "k", EnvPassword: "p"})
	tg, err := FromEnv()
	if err != nil || !slices.Equal(tg.NetworkModes, v1alpha1.NetworkModes) || tg.Simulated != nil {
		t.Fatalf("%+v, %v: want every network mode and a real server", tg, err)
	}
	t.Setenv(EnvNetworkModes, " overlay, l2bridge,overlay")
	want := []v1alpha1.NetworkMode{v1alpha1.NetworkModeOverlay, v1alpha1.NetworkModeL2Bridge}
	if tg, err = FromEnv(); err != nil || !slices.Equal(tg.NetworkModes, want) {
		t.Errorf("modes %v, %v", tg.NetworkModes, err)
	}
}

// The configuration joins the named server to the kubeconfig's cluster and holds no secret:
// the resource reads them from the track's variables. Values are literals.
func TestConfig(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\n${not a template}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	setEnv(t, map[string]string{EnvHost: "win.example", EnvTransport: "winrm", EnvUser: `LAB\admin`, EnvKubeconfig: "/k/config",
		EnvPassword: "s3cret-password", EnvWinRMCAFile: ca, EnvPort: "5987"})
	tg, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	got := tg.Config(v1alpha1.NetworkModeOverlay)
	for _, want := range []string{`config_path = "/k/config"`, `host = "win.example"`, `network_mode = "overlay"`, "winrm {", "port = 5987",
		`user = "LAB\\admin"`, `password_env = "` + EnvPassword + `"`, `$${not a template}`} {
		if !strings.Contains(got, want) {
			t.Errorf("configuration lacks %s:\n%s", want, got)
		}
	}
	for _, never := range []string{"s3cret-password", "simulated", "install"} {
		if strings.Contains(got, never) {
			t.Errorf("configuration has %s:\n%s", never, got)
		}
	}
	tg.Transport, tg.HostKey = SSH, "ssh-ed25519 AAAA\n"
	tg.Simulated = &Simulated{Root: "/m", Nodeboot: "/bin/nodeboot"}
	got = tg.Config(v1alpha1.NetworkModeL2Bridge)
	for _, want := range []string{"ssh {", `private_key_env = "` + EnvSSHPrivateKey + `"`, `host_key = "ssh-ed25519 AAAA"`,
		"join_simulated_nodes_to_existing_cluster = true"} {
		if !strings.Contains(got, want) {
			t.Errorf("configuration lacks %s:\n%s", want, got)
		}
	}
}

// The phases are read from nodeboot's lines as the provider logs them.
func TestPhases(t *testing.T) {
	log := `2026-11-26T05:00:00.000Z [INFO]  provider.terraform-provider-kubewin: [preflight] checking the machine: host=win
2026-11-26T05:00:00.000Z [INFO]  provider.terraform-provider-kubewin: [preflight] done in 3ms: host=win tf_req_id=1
2026-11-26T05:00:01.000Z [INFO]  provider.terraform-provider-kubewin: [discovery] already done: host=win
2026-11-26T05:00:02.000Z [INFO]  provider.terraform-provider-kubewin: [services] failed after 1.5s: ServiceFailed: start service kubelet: host=win
`
	want := []Phase{{"preflight", "done in 3ms"}, {"discovery", "already done"},
		{"services", "failed after 1.5s: ServiceFailed: start service kubelet: host=win"}}
	if got := Phases(log); !slices.Equal(got, want) {
		t.Errorf("phases %v, want %v", got, want)
	}
}
