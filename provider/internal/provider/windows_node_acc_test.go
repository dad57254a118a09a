package provider

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/controlplane"
	"github.com/kubewin/kubewin/internal/testkit/testenv"
	"github.com/kubewin/kubewin/provider/internal/windowsacc"
)

// TestAccWindowsNodeReal joins the Windows Server the environment names (windowsacc.FromEnv)
// to the cluster of the kubeconfig it names, once for each network mode: the node is Ready,
// the join's phases are reported, and the destroy drains and resets the server, whose next
// join checks it again from scratch. Without the environment it skips, saying what it needs.
func TestAccWindowsNodeReal(t *testing.T) {
	tg, err := windowsacc.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if tg == nil {
		t.Skip(windowsacc.Needs)
	}
	testAccWindowsNodeOn(t, tg)
}

// testAccWindowsNodeOn runs the windows node suite against a target, one subtest a network mode.
func testAccWindowsNodeOn(t *testing.T, tg *windowsacc.Target) {
	loading := &clientcmd.ClientConfigLoadingRules{ExplicitPath: tg.Kubeconfig}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: tg.KubeContext}
	rest, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(loading, overrides).ClientConfig()
	if err != nil {
		t.Fatalf("%s: %v", windowsacc.EnvKubeconfig, err)
	}
	client := kubernetes.NewForConfigOrDie(rest)
	for _, mode := range tg.NetworkModes {
		t.Run(string(mode), func(t *testing.T) {
			logFile := filepath.Join(t.TempDir(), "terraform.log")
			t.Setenv("TF_LOG", "DEBUG")
			t.Setenv("TF_ACC_LOG_PATH", logFile)
			// The join's phases are reported also when the apply failed (resource.Test stops the
			// test), after the destroy.
			t.Cleanup(func() {
				logs, err := os.ReadFile(logFile)
				if err != nil {
					t.Error(err)
					return
				}
				phases := windowsacc.Phases(string(logs))
				for _, p := range phases {
					t.Logf("%s [%s] %s", mode, p.Name, p.Result)
				}
				if len(phases) == 0 {
					t.Errorf("no phase of nodeboot join in the provider's log")
				}
			})
			var node string
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
				CheckDestroy: func(*terraform.State) error {
					if _, err := client.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
						return fmt.Errorf("Node %s is left in the cluster after the destroy (%v)", node, err)
					}
					return nil
				},
				Steps: []resource.TestStep{{
					Config: tg.Config(mode),
					ConfigStateChecks: []statecheck.StateCheck{
						statecheck.ExpectKnownValue("kubewin_windows_node.acc", tfjsonpath.New("ready"), knownvalue.Bool(true)),
						statecheck.ExpectKnownValue("kubewin_windows_node.acc", tfjsonpath.New("network_mode"), knownvalue.StringExact(string(mode))),
					},
					Check: func(s *terraform.State) error {
						node = s.RootModule().Resources["kubewin_windows_node.acc"].Primary.ID
						n, err := client.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
						if err != nil {
							return err
						}
						if !readySchedulable(n) || n.Labels["kubernetes.io/os"] != "windows" {
							return fmt.Errorf("node %s: Ready and schedulable %v, labels %v", node, readySchedulable(n), n.Labels)
						}
						return nil
					},
				}},
			})
		})
	}
}

// The real-Windows track, shown without Windows: the environment a maintainer sets
// (KUBEWIN_ACC_WINDOWS_*) names a simulated machine reached over real OpenSSH on 127.0.0.1, the
// cluster this test makes and a bake plan, and the suite runs through windowsacc.FromEnv (for
// each network mode under make acc-windows); the machine holds afterwards exactly what it held before.
func TestAccWindowsTargetFromEnvironment(t *testing.T) {
	state, _ := testAccLocal(t)
	version, err := testBackend(t, state).ControlPlaneVersion()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	cp, err := controlplane.Start(context.Background(), controlplane.Config{Dir: t.TempDir(), BinDir: bin, ClusterName: "accwin"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Destroy(context.Background()); err != nil {
			t.Error(err)
		}
	})
	dir := t.TempDir()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	sshd := testenv.StartSSHD(t, dir, pub)
	root := simServer(t, dir)
	before := contents(t, root)
	t.Cleanup(func() { stopServer(t, filepath.Join(root, "sim", "nodeboot-run.pid")) })
	release := filepath.Join(dir, "release.json")
	if err := os.WriteFile(release, []byte(testRelease(t, version)), 0o600); err != nil {
		t.Fatal(err)
	}
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		windowsacc.EnvHost: "127.0.0.1", windowsacc.EnvTransport: windowsacc.SSH, windowsacc.EnvPort: fmt.Sprint(sshd.Port),
		windowsacc.EnvUser: me.Username, windowsacc.EnvSSHPrivateKey: string(testenv.SSHKeyPEM(t, priv)), windowsacc.EnvSSHHostKey: sshd.HostKey,
		windowsacc.EnvKubeconfig: cp.AdminKubeconfig(), windowsacc.EnvRelease: release, windowsacc.EnvTransfer: "host-cache",
		windowsacc.EnvInterface: "Ethernet 2", windowsacc.EnvNetworkModes: "",
		// The host cache of the install, in the test's directory.
		"XDG_CACHE_HOME": filepath.Join(dir, "cache"),
	} {
		t.Setenv(k, v)
	}
	tg, err := windowsacc.FromEnv()
	if err != nil || tg == nil {
		t.Fatalf("target %+v, %v: the environment names a server", tg, err)
	}
	if !slices.Equal(tg.NetworkModes, v1alpha1.NetworkModes) {
		t.Fatalf("network modes %v, want every mode", tg.NetworkModes)
	}
	// Each mode costs an apply and a destroy (about two minutes on two cores): make test runs the
	// first, make acc-windows (KUBEWIN_ACC_WINDOWS_SELFTEST_ALL_MODES=1) every one.
	if os.Getenv("KUBEWIN_ACC_WINDOWS_SELFTEST_ALL_MODES") == "" {
		tg.NetworkModes = tg.NetworkModes[:1]
	}
	// The machine is simulated: only this test, which made the cluster, says so.
	tg.Simulated = &windowsacc.Simulated{Root: root, Nodeboot: filepath.Join(nodebootDir, "nodeboot")}
	testAccWindowsNodeOn(t, tg)
	if after := contents(t, root); !slices.Equal(after, before) {
		t.Errorf("the server is not as it was before the joins:\n%s", diffLines(before, after))
	}
}
