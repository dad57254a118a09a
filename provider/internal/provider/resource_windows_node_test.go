package provider

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"k8s.io/utils/ptr"

	"github.com/kubewin/kubewin/internal/api"
	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/proc"
	"github.com/kubewin/kubewin/internal/sim/simmachine"
	"github.com/kubewin/kubewin/internal/testkit/ociregistry"
	"github.com/kubewin/kubewin/internal/testkit/testenv"
	"github.com/kubewin/kubewin/provider/internal/local"
)

// adminClient returns a function that connects to a local cluster as its admin once the
// cluster exists (a test step creates it).
func adminClient(t testing.TB, b *local.Backend, cluster string) func() kubernetes.Interface {
	var admin kubernetes.Interface
	return func() kubernetes.Interface {
		if admin == nil {
			cp, err := b.Cluster(cluster)
			if err != nil {
				t.Fatal(err)
			}
			cfg, _ := cp.AdminRESTConfig()
			admin = kubernetes.NewForConfigOrDie(cfg)
		}
		return admin
	}
}

// testRelease serves a bake plan's files and pause image on 127.0.0.1 and returns the plan, in
// JSON: the payload of a Windows Server 2022 node of the Kubernetes version given.
func testRelease(t testing.TB, kubernetesVersion string) string {
	t.Helper()
	files := map[string][]byte{"k/kubelet.exe": []byte("simulated kubelet"), "k/kube-proxy.exe": []byte("simulated kube-proxy"),
		"k/kube-log-runner.exe": []byte("simulated kube-log-runner"), "k/nodeboot.exe": []byte("nodeboot.exe")}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, ok := files[strings.TrimPrefix(r.URL.Path, "/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(data)
	}))
	t.Cleanup(srv.Close)
	pause, digests := ociregistry.Serve(t).PushPause(t, "pause:3.10.2", uint32(v1alpha1.WindowsServer2022))
	plan := v1alpha1.ImageManifest{
		APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindImageManifest, WindowsBuild: v1alpha1.WindowsServer2022,
		KubernetesVersion: kubernetesVersion, Runtime: v1alpha1.RuntimeInfo{Name: v1alpha1.RuntimeContainerd, Version: "2.1.4"},
		PauseImage:      v1alpha1.PauseImage{Reference: pause, Digest: digests[uint32(v1alpha1.WindowsServer2022)]},
		NodebootVersion: "test",
	}
	for _, p := range slices.Sorted(maps.Keys(files)) {
		sum := sha256.Sum256(files[p])
		plan.Files = append(plan.Files, v1alpha1.File{Path: p, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(files[p])), Source: srv.URL + "/" + p})
	}
	doc, err := api.EncodeJSON(plan)
	if err != nil {
		t.Fatal(err)
	}
	return string(doc)
}

// simServer is an existing server for the tests: a simulated Windows Server 2022 machine
// named WINSRV01 in a directory, which already holds a file of its own.
func simServer(t testing.TB, dir string) string {
	t.Helper()
	root := filepath.Join(dir, "winsrv01")
	desc, _ := json.Marshal(simmachine.Machine{ComputerName: "WINSRV01", Build: uint32(v1alpha1.WindowsServer2022), Adapter: "Ethernet 2",
		Address: netip.MustParseAddr("127.100.0.5"), Subnet: netip.MustParsePrefix("127.100.0.0/16"), Runtime: v1alpha1.RuntimeContainerd})
	for path, data := range map[string][]byte{
		filepath.Join(root, filepath.FromSlash(simmachine.File)):  desc,
		simmachine.Path(root, `C:\Users\Administrator\notes.txt`): []byte("the server's own file"),
		simmachine.Path(root, `C:\etc\hosts`):                     []byte("127.0.0.1 localhost"),
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// contents lists every file and directory under root with the sha256 of each file.
func contents(t testing.TB, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			out = append(out, rel+"/")
			return nil
		}
		data, err := os.ReadFile(p)
		sum := sha256.Sum256(data)
		out = append(out, rel+" "+hex.EncodeToString(sum[:8]))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func windowsNodeSSHConfig(provider, poolImage, root, nodeboot, plan, cache string, sshd *testenv.SSHD, key []byte, withNode bool) string {
	me, _ := user.Current()
	config := provider + fmt.Sprintf(`
resource "kubewin_cluster" "test" {
  name = "hosttest"
  local {}
}

resource "kubewin_windows_node_pool" "other" {
  name       = "other"
  cluster_id = kubewin_cluster.test.id
  node_count = 1
  local {
    image = %q
  }
}
`, poolImage)
	if withNode {
		config += fmt.Sprintf(`
resource "kubewin_windows_node" "srv" {
  host           = "127.0.0.1"
  cluster_id     = kubewin_cluster.test.id
  interface_name = "Ethernet 2"
  labels         = { "example.com/site" = "lab" }
  drain          = { timeout = "1m" }

  ssh {
    port           = %d
    user           = %q
    private_key_wo = %q
    host_key       = %q
  }
  simulated {
    root     = %q
    nodeboot = %q
  }
  install {
    release   = %q
    transfer  = "host-cache"
    cache_dir = %q
  }
}
`, sshd.Port, me.Username, key, strings.TrimSpace(sshd.HostKey), root, nodeboot, plan, cache)
	}
	return config
}

// TestAccWindowsNode joins an existing server, reached over real OpenSSH on 127.0.0.1, to a
// local cluster: the resource checks it, installs the payload from its host cache, joins it
// (real discovery, TLS bootstrap and registration against the control plane; the server is a
// simulated machine whose simulated kubelet keeps the node Ready). When the server stops and
// its Node is deleted, the next plan replaces the node, which joins again. Removing the node
// drains it — a pod held by a PodDisruptionBudget is evicted through the Eviction API — and
// leaves the server exactly as it was before.
func TestAccWindowsNode(t *testing.T) {
	state, provider := testAccLocal(t)
	b := testBackend(t, state)
	version, err := b.ControlPlaneVersion()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	key := testenv.SSHKeyPEM(t, priv)
	sshd := testenv.StartSSHD(t, filepath.Join(dir), pub)
	root := simServer(t, dir)
	before := contents(t, root)
	pidFile := filepath.Join(root, "sim", "nodeboot-run.pid")
	t.Cleanup(func() { stopServer(t, pidFile) }) // a failed test may leave the server's nodeboot running
	plan := testRelease(t, version)
	// Terraform gives a destroy no configuration: its key comes from the environment.
	t.Setenv(defaultPrivateKeyEnv, string(key))
	nodeboot := filepath.Join(nodebootDir, "nodeboot")
	cache := filepath.Join(dir, "cache")
	image := testImage(t, b, "pool")
	withNode := windowsNodeSSHConfig(provider, image, root, nodeboot, plan, cache, sshd, key, true)
	without := windowsNodeSSHConfig(provider, image, root, nodeboot, plan, cache, sshd, key, false)

	client := adminClient(t, b, "hosttest")
	ctx := context.Background()
	var stopImpostor func()
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: without}, // the cluster first
			{
				// Another live machine's Ready Node has the server's name: the join stops at
				// registration, and the error ends with the server's diagnostics, fetched over SSH.
				PreConfig: func() { stopImpostor = impostorNode(t, client(), "winsrv01") },
				Config:    withNode,
				ExpectError: wrapped(`(?s)Node Failed to Join.*node winsrv01 failed in phase register with code NodeNameTaken.*` +
					`Diagnostics of winsrv01 \(nodeboot diagnose\):.*The full diagnostics bundle was saved to \S+/kubewin/diagnostics/winsrv01-\S+\.tar\.gz`),
			},
			{
				// The bundle came from the server over SSH; without the impostor the tainted node is
				// replaced and joins.
				PreConfig: func() {
					stopImpostor()
					checkSavedBundle(t, "winsrv01", bundleHolds("summary.txt", "failed in phase register with code NodeNameTaken"))
				},
				Config: withNode,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("kubewin_windows_node.srv", tfjsonpath.New("id"), knownvalue.StringExact("winsrv01")),
					statecheck.ExpectKnownValue("kubewin_windows_node.srv", tfjsonpath.New("ready"), knownvalue.Bool(true)),
					statecheck.ExpectKnownValue("kubewin_windows_node.srv", tfjsonpath.New("windows_build"), knownvalue.Int64Exact(20348)),
					statecheck.ExpectKnownValue("kubewin_windows_node.srv", tfjsonpath.New("runtime"), knownvalue.StringExact("containerd")),
					statecheck.ExpectKnownValue("kubewin_windows_node.srv", tfjsonpath.New("ssh").AtMapKey("private_key_wo"), knownvalue.Null()),
					checkFunc(func() error {
						node, err := client().CoreV1().Nodes().Get(ctx, "winsrv01", metav1.GetOptions{})
						if err != nil {
							return err
						}
						if !readySchedulable(node) {
							return fmt.Errorf("node winsrv01 is not Ready: %v", node.Status.Conditions)
						}
						for k, v := range map[string]string{"kubernetes.io/os": "windows", "node.kubernetes.io/windows-build": "10.0.20348",
							"example.com/site": "lab", "kubewin.io/host": "winsrv01"} {
							if node.Labels[k] != v {
								return fmt.Errorf("label %s = %q, want %q (labels %v)", k, node.Labels[k], v, node.Labels)
							}
						}
						if ip := nodeIP(node); ip != "127.100.0.5" {
							return fmt.Errorf("node address %q, want the address of adapter \"Ethernet 2\"", ip)
						}
						tokens, err := client().CoreV1().Secrets(metav1.NamespaceSystem).List(ctx,
							metav1.ListOptions{FieldSelector: "type=" + string(bootstrapapi.SecretTypeBootstrapToken)})
						if err != nil || len(tokens.Items) != 0 {
							return fmt.Errorf("bootstrap tokens left after the apply: %d (%v)", len(tokens.Items), err)
						}
						// The payload went on from the host cache, and the NodeConfig lost its token.
						if _, err := os.Stat(simmachine.Path(root, `C:\ProgramData\kubewin\image-manifest.json`)); err != nil {
							return fmt.Errorf("no image manifest on the server: %v", err)
						}
						raw, err := os.ReadFile(simmachine.Path(root, `C:\AzureData\CustomData.bin`))
						if err != nil {
							return err
						}
						if cfg, err := api.DecodeNodeConfig(raw); err != nil || cfg.Cluster.BootstrapToken != "" {
							return fmt.Errorf("the NodeConfig on the server (%v) still holds the token:\n%s", err, raw)
						}
						return nil
					}),
				},
				Check: func(s *terraform.State) error {
					raw, _ := json.Marshal(s)
					if strings.Contains(string(raw), strings.TrimSpace(strings.Split(string(key), "\n")[1])) {
						return fmt.Errorf("the private key is in the state")
					}
					return nil
				},
			},
			{
				// Drift: the server stops (its nodeboot is killed) and its Node is deleted. The next
				// plan replaces the node: the server is reset and restored, and joins again.
				PreConfig: func() {
					stopServer(t, pidFile)
					if err := client().CoreV1().Nodes().Delete(ctx, "winsrv01", metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config: withNode,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("kubewin_windows_node.srv", plancheck.ResourceActionReplace),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("kubewin_windows_node.srv", tfjsonpath.New("ready"), knownvalue.Bool(true)),
					checkFunc(func() error {
						node, err := client().CoreV1().Nodes().Get(ctx, "winsrv01", metav1.GetOptions{})
						if err != nil || !readySchedulable(node) {
							return fmt.Errorf("node winsrv01 did not join again: %v", err)
						}
						return nil
					}),
				},
			},
			{
				// The node goes: a pod on it, held by a PodDisruptionBudget that allows one of
				// its two pods to be evicted, is evicted; the server is left as it was.
				PreConfig: func() { budgetedPods(t, client(), "winsrv01", "other000000") },
				Config:    without,
				ConfigStateChecks: []statecheck.StateCheck{checkFunc(func() error {
					if _, err := client().CoreV1().Pods("default").Get(ctx, "iis-0", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
						return fmt.Errorf("pod iis-0 of the removed node still exists (%v)", err)
					}
					if _, err := client().CoreV1().Pods("default").Get(ctx, "iis-1", metav1.GetOptions{}); err != nil {
						return fmt.Errorf("pod iis-1 on the other node: %v", err)
					}
					if _, err := client().CoreV1().Nodes().Get(ctx, "winsrv01", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
						return fmt.Errorf("Node winsrv01 still exists (%v)", err)
					}
					if after := contents(t, root); !slices.Equal(after, before) {
						return fmt.Errorf("the server is not as it was before the join:\n%s", diffLines(before, after))
					}
					roles, err := client().RbacV1().Roles("kubewin-system").List(ctx, metav1.ListOptions{LabelSelector: "kubewin.io/pool=0-winsrv01"})
					if err != nil || len(roles.Items) != 0 {
						return fmt.Errorf("the node's report access is left: %d roles (%v)", len(roles.Items), err)
					}
					return nil
				})},
			},
			{
				// The budget goes first, or the pool's node could not be drained either.
				PreConfig: func() {
					if err := client().PolicyV1().PodDisruptionBudgets("default").Delete(ctx, "iis", metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config: without,
			},
		},
	})
}

// impostorNode registers a Ready Node of that name and renews its Lease, as another live
// machine's kubelet would, until the returned function deletes both.
func impostorNode(t *testing.T, c kubernetes.Interface, name string) func() {
	readyNode(t, c, name)
	var once sync.Once
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		leases := c.CoordinationV1().Leases(corev1.NamespaceNodeLease)
		for {
			now := metav1.NewMicroTime(time.Now())
			l, err := leases.Get(ctx, name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				_, _ = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: corev1.NamespaceNodeLease},
					Spec: coordinationv1.LeaseSpec{HolderIdentity: &name, LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &now}}, metav1.CreateOptions{})
			case err == nil:
				l.Spec.RenewTime = &now
				_, _ = leases.Update(ctx, l, metav1.UpdateOptions{})
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(2 * time.Second):
			}
		}
	}()
	stop := func() {
		once.Do(func() {
			cancel()
			<-done
			for _, err := range []error{c.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}),
				c.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(context.Background(), name, metav1.DeleteOptions{})} {
				if err != nil && !apierrors.IsNotFound(err) {
					t.Error(err)
				}
			}
		})
	}
	t.Cleanup(stop) // when the test ends before its step stops it
	return stop
}

// stopServer stops the simulated server's nodeboot service, as a power cut would.
func stopServer(t testing.TB, pidFile string) {
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return
	}
	var pid int
	if _, err := fmt.Sscan(string(b), &pid); err != nil {
		return // no pid written yet: nothing runs
	}
	if err := proc.Stop(context.Background(), pid, 5*time.Second); err != nil {
		t.Error(err)
	}
}

func nodeIP(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}

// budgetedPods runs a pod iis-<i> on each node (tolerating os=windows:NoSchedule) under a
// PodDisruptionBudget "iis" that keeps all but one of them, and waits until they all count as
// healthy.
func budgetedPods(t testing.TB, c kubernetes.Interface, nodes ...string) {
	t.Helper()
	ctx := context.Background()
	for i, node := range nodes {
		_, err := c.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("iis-%d", i), Labels: map[string]string{"app": "iis"}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "iis", Image: "mcr.microsoft.com/windows/servercore/iis"}},
				Tolerations: []corev1.Toleration{{Key: "os", Operator: corev1.TolerationOpEqual, Value: "windows", Effect: corev1.TaintEffectNoSchedule}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	minAvailable := intstr.FromInt32(int32(len(nodes) - 1))
	if _, err := c.PolicyV1().PodDisruptionBudgets("default").Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "iis"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &minAvailable,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "iis"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if b, err := c.PolicyV1().PodDisruptionBudgets("default").Get(ctx, "iis",
			metav1.GetOptions{}); err == nil && int(b.Status.CurrentHealthy) == len(nodes) {
			return
		}
	}
	t.Fatalf("the pods never ran on nodes %v", nodes)
}

// diffLines lists the lines only one side has.
func diffLines(before, after []string) string {
	var out []string
	for _, l := range after {
		if !slices.Contains(before, l) {
			out = append(out, "+ "+l)
		}
	}
	for _, l := range before {
		if !slices.Contains(after, l) {
			out = append(out, "- "+l)
		}
	}
	return strings.Join(out, "\n")
}
