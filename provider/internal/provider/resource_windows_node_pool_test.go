package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/controlplane"
	"github.com/kubewin/kubewin/internal/sim/simmachine"
	"github.com/kubewin/kubewin/internal/testkit/testenv"
	"github.com/kubewin/kubewin/provider/internal/local"
	"github.com/kubewin/kubewin/provider/internal/pool"
)

func testBackend(t testing.TB, state string) *local.Backend {
	t.Helper()
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	b, err := local.New(state, []string{nodebootDir, bin})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// testImage writes a kubewin-local image directory for the control plane's Kubernetes version,
// baked for the isolation modes given (none: process only).
func testImage(t testing.TB, b *local.Backend, tag string, isolation ...v1alpha1.Isolation) string {
	t.Helper()
	return testImageOf(t, b, tag, func(m *v1alpha1.ImageManifest, _ map[string][]byte) { m.Isolation = isolation })
}

// testImageOf writes a simulated image of the control plane's version, as edit changes it.
func testImageOf(t testing.TB, b *local.Backend, tag string, edit func(*v1alpha1.ImageManifest, map[string][]byte)) string {
	t.Helper()
	version, err := b.ControlPlaneVersion()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "image-"+tag)
	m := v1alpha1.ImageManifest{
		APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindImageManifest, WindowsBuild: v1alpha1.WindowsServer2022,
		KubernetesVersion: version, Runtime: v1alpha1.RuntimeInfo{Name: v1alpha1.RuntimeContainerd, Version: "2.1.4"},
		PauseImage:      v1alpha1.PauseImage{Reference: "registry.k8s.io/pause:3.10", Digest: "sha256:" + strings.Repeat("3", 64)},
		NodebootVersion: "test-" + tag,
	}
	payload := map[string][]byte{"k/kubelet.exe": []byte("simulated kubelet " + tag), "k/kube-proxy.exe": []byte("simulated kube-proxy"),
		"k/kube-log-runner.exe": []byte("simulated kube-log-runner")}
	edit(&m, payload)
	if err := simmachine.WriteImage(dir, m, payload); err != nil {
		t.Fatal(err)
	}
	return dir
}

// poolBackend is where the pool acceptance test's machines run.
type poolBackend struct {
	// block is the pool's backend block for an image.
	block func(image string) string
	// imageA and imageB are two images of the control plane's version.
	imageA, imageB string
	// machines lists the pool's machines at the backend.
	machines func() ([]string, error)
	// importID imports the pool.
	importID string
	// writes counts the backend's writes for the pool so far; nil when it counts none.
	writes func() int
	// upgradeWrites is what a scale-out adds to bring the machines before it, of the same image, to
	// the backend's latest model (azure: one manualupgrade); 0 for backends without models.
	upgradeWrites int
}

func poolConfig(provider string, be poolBackend, image string, count int) string {
	return poolConfigWith(provider, be, image, count, "")
}

// poolConfigWith is poolConfig with extra, a block of the pool's (or ""), after its backend block.
func poolConfigWith(provider string, be poolBackend, image string, count int, extra string) string {
	return provider + fmt.Sprintf(`
resource "kubewin_cluster" "test" {
  name = "pooltest"
  local {}
}

resource "kubewin_windows_node_pool" "win" {
  name       = "win"
  cluster_id = kubewin_cluster.test.id
  node_count = %d
  labels     = { "example.com/team" = "windows" }
  taints     = [{ key = "os", value = "windows", effect = "NoSchedule" }]
  drain      = { timeout = "1m" }
%s
%s}
`, count, be.block(image), extra)
}

func TestAccWindowsNodePool(t *testing.T) {
	t.Parallel()
	state, provider := testAccLocal(t)
	b := testBackend(t, state)
	testAccWindowsNodePool(t, state, provider, poolBackend{
		block:  func(image string) string { return fmt.Sprintf("  local {\n    image = %q\n  }", image) },
		imageA: testImage(t, b, "a"), imageB: testImage(t, b, "b"),
		machines: func() ([]string, error) {
			ms, err := b.Machines("win")
			var names []string
			for _, m := range ms {
				names = append(names, m.Name)
			}
			return names, err
		},
		importID: "win",
	})
}

// testAccWindowsNodePool creates a pool of 3, scales it to 5, then to 2 with a pod evicted
// through a PodDisruptionBudget, replaces its nodes surge-first for a new image (watched), imports
// it, scales it out across a control plane patch upgrade (no node replaced), and destroys it.
func testAccWindowsNodePool(t *testing.T, state, provider string, be poolBackend) {
	b := testBackend(t, state)
	imageA, imageB := be.imageA, be.imageB
	client := adminClient(t, b, "pooltest")
	readyNodes := func() int {
		nodes, err := client().CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: "kubewin.io/pool=win"})
		if err != nil {
			return -1
		}
		n := 0
		for _, node := range nodes.Items {
			if readySchedulable(&node) {
				n++
			}
		}
		return n
	}
	// Backend writes per step: each change of the pool costs a constant number, whatever its size.
	// The count starts from what the backend counted before (other tests of this binary).
	lastWrites := 0
	if be.writes != nil {
		lastWrites = be.writes()
	}
	writes := func(want int) statecheck.StateCheck {
		return checkFunc(func() error {
			if be.writes == nil {
				return nil
			}
			n := be.writes()
			got := n - lastWrites
			lastWrites = n
			if got != want {
				return fmt.Errorf("the step made %d backend writes for the pool, want %d", got, want)
			}
			return nil
		})
	}
	poolChecks := func(count int) []statecheck.StateCheck {
		return []statecheck.StateCheck{
			statecheck.ExpectKnownValue("kubewin_windows_node_pool.win", tfjsonpath.New("nodes"), knownvalue.ListSizeExact(count)),
			statecheck.ExpectKnownValue("kubewin_windows_node_pool.win", tfjsonpath.New("nodes").AtSliceIndex(0).AtMapKey("ready"), knownvalue.Bool(true)),
			statecheck.ExpectKnownValue("kubewin_windows_node_pool.win", tfjsonpath.New("nodes").AtSliceIndex(0).AtMapKey("pod_cidr"),
				knownvalue.StringRegexp(regexp.MustCompile(`^10\.244\.\d+\.0/24$`))),
			checkFunc(func() error {
				if n := readyNodes(); n != count {
					return fmt.Errorf("%d Ready pool nodes, want %d", n, count)
				}
				if ms, err := be.machines(); err != nil || len(ms) != count {
					return fmt.Errorf("%d machines at the backend (%v), want %d: %v", len(ms), err, count, ms)
				}
				tokens, err := client().CoreV1().Secrets(metav1.NamespaceSystem).List(context.Background(),
					metav1.ListOptions{FieldSelector: "type=" + string(bootstrapapi.SecretTypeBootstrapToken)})
				if err != nil || len(tokens.Items) != 0 {
					return fmt.Errorf("bootstrap tokens left after the apply: %d (%v)", len(tokens.Items), err)
				}
				return nil
			}),
		}
	}
	var replacement *readyWatch
	var kept []string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			if ms, err := be.machines(); len(ms) != 0 || err != nil {
				return fmt.Errorf("%d machines left (%v)", len(ms), err)
			}
			if _, err := os.Stat(filepath.Join(state, "pools", "win")); !os.IsNotExist(err) {
				return fmt.Errorf("pool directory left: %v", err)
			}
			if _, err := os.Stat(b.ClusterDir("pooltest")); !os.IsNotExist(err) {
				return fmt.Errorf("cluster directory left: %v", err)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: poolConfig(provider, be, imageA, 3),
				ConfigStateChecks: append(poolChecks(3), writes(1), checkFunc(func() error {
					node, err := client().CoreV1().Nodes().Get(context.Background(), "win000000", metav1.GetOptions{})
					if err != nil {
						return err
					}
					if node.Labels["kubernetes.io/os"] != "windows" || node.Labels["example.com/team"] != "windows" ||
						node.Labels["node.kubernetes.io/windows-build"] != "10.0.20348" {
						return fmt.Errorf("labels %v", node.Labels)
					}
					for _, tn := range node.Spec.Taints {
						if tn.Key == "os" && tn.Value == "windows" && tn.Effect == corev1.TaintEffectNoSchedule {
							return nil
						}
					}
					return fmt.Errorf("taints %v", node.Spec.Taints)
				})),
			},
			{
				Config:            poolConfig(provider, be, imageA, 5),
				ConfigStateChecks: append(poolChecks(5), writes(1+be.upgradeWrites)),
			},
			{
				// Scale in to 2: a pod on a removed node is evicted, through the Eviction API, while a
				// PodDisruptionBudget keeps one of its two pods.
				PreConfig: func() { budgetedPods(t, client(), "win000000", "win000004") },
				Config:    poolConfig(provider, be, imageA, 2),
				ConfigStateChecks: append(poolChecks(2), writes(1), checkFunc(func() error {
					ctx := context.Background()
					if _, err := client().CoreV1().Pods("default").Get(ctx, "iis-1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
						return fmt.Errorf("pod iis-1 of removed node win000004 still exists (%v)", err)
					}
					if _, err := client().CoreV1().Pods("default").Get(ctx, "iis-0", metav1.GetOptions{}); err != nil {
						return fmt.Errorf("pod iis-0 on a kept node: %v", err)
					}
					return nil
				})),
			},
			{
				// A new image replaces the nodes surge-first: never fewer than 2 Ready nodes. (The
				// budget goes first: it protects a bare pod nothing would recreate elsewhere.)
				PreConfig: func() {
					ctx := context.Background()
					if err := client().PolicyV1().PodDisruptionBudgets("default").Delete(ctx, "iis", metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
					replacement = watchReady(t, client(), "kubewin.io/pool=win")
				},
				Config: poolConfig(provider, be, imageB, 2),
				// Surge-first, one node at a time: two writes (add one, delete one) per node; the adds of
				// one change share its token, so the first new node keeps the latest model.
				ConfigStateChecks: append(poolChecks(2), writes(4), checkFunc(func() error {
					least, err := replacement.stop()
					if err != nil {
						return err
					}
					if least < 2 {
						return fmt.Errorf("the replacement left only %d Ready nodes", least)
					}
					ms, _ := be.machines()
					for _, m := range ms {
						if m == "win000000" || m == "win000001" {
							return fmt.Errorf("old machine %s survived the image change", m)
						}
					}
					return nil
				})),
			},
			{
				ResourceName:            "kubewin_windows_node_pool.win",
				ImportState:             true,
				ImportStateId:           be.importID,
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"timeouts", "nodes"},
				Config:                  poolConfig(provider, be, imageB, 2),
			},
			{
				// The control plane is upgraded to a new patch version: scaling out adds a node and
				// replaces none (the cluster's version is not baked into nodes).
				PreConfig: func() {
					kept = poolNodeNames(t, client())
					bumpPatchVersion(t, b.ClusterDir("pooltest"))
				},
				Config: poolConfig(provider, be, imageB, 3),
				ConfigStateChecks: append(poolChecks(3), writes(1+be.upgradeWrites), checkFunc(func() error {
					now := poolNodeNames(t, client())
					for _, name := range kept {
						if !slices.Contains(now, name) {
							return fmt.Errorf("node %s was replaced by a control plane patch upgrade (nodes before %v, after %v)", name, kept, now)
						}
					}
					return nil
				})),
			},
			{
				// A new name replaces the pool (the table in the pool's page says so).
				Config:             strings.Replace(poolConfig(provider, be, imageB, 3), `name       = "win"`, `name       = "win2"`, 1),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPreRefresh: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("kubewin_windows_node_pool.win", plancheck.ResourceActionReplace),
				}},
			},
			{
				// So does another cluster.
				Config: strings.Replace(poolConfig(provider, be, imageB, 3), "cluster_id = kubewin_cluster.test.id",
					"cluster_id = kubewin_cluster.other.id", 1) + "resource \"kubewin_cluster\" \"other\" {\n  name = \"pooltest2\"\n  local {}\n}\n",
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPreRefresh: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("kubewin_windows_node_pool.win", plancheck.ResourceActionReplace),
				}},
			},
		},
	})
}

// poolNodeNames lists the names of the test pool's nodes.
func poolNodeNames(t *testing.T, c kubernetes.Interface) []string {
	t.Helper()
	nodes, err := c.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: "kubewin.io/pool=win"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range nodes.Items {
		names = append(names, n.Name)
	}
	return names
}

// bumpPatchVersion makes a local cluster report the next patch version of its control plane
// (in its state file), as an in-place upgrade of its programs would.
func bumpPatchVersion(t *testing.T, dir string) {
	t.Helper()
	cp, err := controlplane.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	v, err := version.ParseSemantic(cp.Version)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "controlplane.json")
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var state map[string]any
	if err := json.Unmarshal(raw, &state); err != nil {
		t.Fatal(err)
	}
	state["version"] = fmt.Sprintf("v%d.%d.%d", v.Major(), v.Minor(), v.Patch()+1)
	if raw, err = json.Marshal(state); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if cp, err = controlplane.Load(dir); err != nil || cp.Version != state["version"] {
		t.Fatalf("the cluster reports %s (%v) after the upgrade", cp.Version, err)
	}
}

// readyWatch follows, through a watch on the API server, how many nodes of a selector are Ready
// and schedulable, and keeps the least it saw.
type readyWatch struct {
	w     watch.Interface
	done  chan struct{}
	least int
	err   error
}

func watchReady(t *testing.T, c kubernetes.Interface, selector string) *readyWatch {
	t.Helper()
	ctx := context.Background()
	list, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	ready := map[string]bool{}
	for _, n := range list.Items {
		ready[n.Name] = readySchedulable(&n)
	}
	w, err := c.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	rw := &readyWatch{w: w, done: make(chan struct{}), least: countTrue(ready)}
	go func() {
		defer close(rw.done)
		for ev := range w.ResultChan() {
			switch ev.Type {
			case watch.Error:
				rw.err = fmt.Errorf("watching the nodes failed: %v", apierrors.FromObject(ev.Object))
				return
			case watch.Deleted, watch.Added, watch.Modified:
				n, ok := ev.Object.(*corev1.Node)
				if !ok {
					rw.err = fmt.Errorf("the node watch sent a %T", ev.Object)
					return
				}
				if ev.Type == watch.Deleted {
					delete(ready, n.Name)
				} else {
					ready[n.Name] = readySchedulable(n)
				}
			}
			rw.least = min(rw.least, countTrue(ready))
		}
		rw.err = fmt.Errorf("the API server ended the watch on the nodes before the apply did")
	}()
	return rw
}

// stop ends the watch and returns the least number of Ready nodes seen, or why it could not tell.
func (rw *readyWatch) stop() (int, error) {
	select {
	case <-rw.done: // ended by itself: an error
		return rw.least, rw.err
	default:
	}
	rw.w.Stop()
	<-rw.done
	return rw.least, nil
}

func readySchedulable(n *corev1.Node) bool {
	if n.Spec.Unschedulable {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func countTrue(m map[string]bool) int {
	n := 0
	for _, v := range m {
		if v {
			n++
		}
	}
	return n
}

func TestAccWindowsNodePool_invalid(t *testing.T) {
	t.Parallel()
	state, provider := testAccLocal(t)
	b := testBackend(t, state)
	image := testImage(t, b, "a")
	// Node settings are checked against the image before any cluster exists.
	pool := func(attrs string) string {
		return provider + fmt.Sprintf(`
resource "kubewin_windows_node_pool" "win" {
  local {
    image                                    = %q
    join_simulated_nodes_to_existing_cluster = true
  }
%s
}
`, image, attrs)
	}
	newer := filepath.Join(t.TempDir(), "newer")
	if err := simmachine.WriteImage(newer, v1alpha1.ImageManifest{
		APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindImageManifest, WindowsBuild: v1alpha1.WindowsServer2022,
		KubernetesVersion: "v1.99.0", Runtime: v1alpha1.RuntimeInfo{Name: v1alpha1.RuntimeContainerd, Version: "2.1.4"},
		PauseImage:      v1alpha1.PauseImage{Reference: "registry.k8s.io/pause:3.10", Digest: "sha256:" + strings.Repeat("3", 64)},
		NodebootVersion: "x",
	}, map[string][]byte{"k/kubelet.exe": []byte("x")}); err == nil {
		t.Fatal("an image with an unsupported Kubernetes version was written")
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			// Where the machines run is explicit, and simulated machines join only simulated clusters.
			{Config: provider + `resource "kubewin_windows_node_pool" "win" {
  name       = "win"
  node_count = 1
}`, PlanOnly: true,
				ExpectError: regexp.MustCompile(`(?s)Missing Backend.*with kubewin_windows_node_pool.win.*Add a backend block: .azure \{.*.local \{ image`)},
			{Config: provider + fmt.Sprintf(`resource "kubewin_windows_node_pool" "win" {
  name       = "win"
  node_count = 1
  local {
    image = %q
  }
}`, image), PlanOnly: true, ExpectError: regexp.MustCompile(`(?s)Simulated Nodes Need a Simulated Cluster.*Set cluster_id to a kubewin_cluster`)},
			{Config: provider + fmt.Sprintf(`resource "kubewin_windows_node_pool" "win" {
  name       = "win"
  cluster_id = "production"
  node_count = 1
  local {
    image = %q
  }
}`, image), PlanOnly: true,
				ExpectError: regexp.MustCompile(`(?s)Not a Cluster of the Local Backend.*cluster_id = "production".*has\s+no\s+cluster\s+"production"`)},
			{Config: provider + `resource "kubewin_windows_node_pool" "win" {
  name       = "win"
  node_count = 1
  azure {}
}`, PlanOnly: true, ExpectError: regexp.MustCompile(`(?s)Missing Azure Setting.*azure\.resource_group_name \(the resource group.*` +
				`Missing Azure Setting.*azure\.location.*Missing Azure Setting.*azure\.vm_size.*` +
				`Missing Azure Setting.*azure\.subnet_id.*Missing Azure Setting.*azure\.image_id`)},
			{Config: pool(`  name = "windowspool"
  node_count = 1`), PlanOnly: true,
				ExpectError: regexp.MustCompile(`(?s)Windows Computer Names Too Long.*"windowspool" makes Windows computer names of 17 characters`)},
			{Config: pool(`  name = "win"
  node_count = -1`), PlanOnly: true, ExpectError: regexp.MustCompile(`(?s)node_count.*must be at least 0`)},
			{Config: pool(`  name = "win"
  node_count = 1
  network_mode = "l3bridge"`), PlanOnly: true, ExpectError: regexp.MustCompile(`(?s)network_mode.*value must be one of`)},
			{Config: pool(`  name = "win"
  node_count = 1
  labels = { "kubernetes.io/role" = "windows" }`), PlanOnly: true,
				ExpectError: regexp.MustCompile(`(?s)Invalid Node Setting.*a kubelet may not set labels in\s+the kubernetes.io`)},
			{Config: pool(`  name = "win"
  node_count = 1
  kubelet_extra_args = { "pod-infra-container-image" = "x" }`), PlanOnly: true,
				ExpectError: regexp.MustCompile(`(?s)Invalid Kubelet Arguments.*was\s+removed\s+in\s+Kubernetes\s+1\.34`)},
			{Config: pool(`  name = "win"
  node_count = 1
  system_reserved_memory = "2 GB"`), PlanOnly: true,
				ExpectError: regexp.MustCompile(`(?s)Invalid Memory Quantity.*system_reserved_memory: "2 GB" is not a memory\s+quantity`)},
		},
	})
}

// A pool larger than the room left in the cluster's pod network is refused at plan time: node
// IPAM gives each Node a pod CIDR, and the other nodes hold theirs.
func TestAccWindowsNodePool_podNetworkFull(t *testing.T) {
	t.Parallel()
	state, provider := testAccLocal(t)
	image := testImage(t, testBackend(t, state), "cidr")
	config := func(win int) string {
		c := provider + fmt.Sprintf(`
resource "kubewin_cluster" "small" {
  name                = "small"
  cluster_cidr        = "10.244.0.0/24"
  node_cidr_mask_size = 26
  local {}
}

resource "kubewin_windows_node_pool" "other" {
  name       = "other"
  cluster_id = kubewin_cluster.small.id
  node_count = 1
  local {
    image = %q
  }
}
`, image)
		if win > 0 {
			c += fmt.Sprintf(`
resource "kubewin_windows_node_pool" "win" {
  name       = "win"
  cluster_id = kubewin_cluster.small.id
  node_count = %d
  local {
    image = %q
  }
}
`, win, image)
		}
		return c
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: config(0)},
			{Config: config(4), PlanOnly: true, ExpectError: regexp.MustCompile(`(?s)Pool Larger Than the Cluster's Pod Network.*` +
				`node_count = 4 needs a pod CIDR for each node.*10\.244\.0\.0/24,\s+split\s+into\s+/26\s+per\s+node.*has\s+4,\s+and\s+the\s+` +
				`cluster's\s+other\s+nodes\s+hold\s+1:\s+room\s+for\s+3.*Lower\s+node_count\s+to\s+3\s+or\s+fewer`)},
			{Config: config(3), PlanOnly: true, ExpectNonEmptyPlan: true},
		},
	})
}

// A node that cannot join fails the apply within the create timeout, naming the node, the
// phase and the error code; the error ends with the machine's diagnostics summary and where
// its bundle, fetched from the machine's directory, was saved.
func TestAccWindowsNodePool_joinFailure(t *testing.T) {
	t.Parallel()
	state, provider := testAccLocal(t)
	b := testBackend(t, state)
	image := testImage(t, b, "tampered")
	// The payload no longer matches the manifest the image was baked with.
	if err := os.WriteFile(filepath.Join(image, simmachine.ImagePayloadDir, "k", "kubelet.exe"), []byte("tampered"), 0o755); err != nil {
		t.Fatal(err)
	}
	local := poolBackend{block: func(image string) string { return fmt.Sprintf("  local {\n    image = %q\n  }", image) }}
	config := strings.Replace(poolConfig(provider, local, image, 1), `drain      = { timeout = "1m" }`, `drain      = { timeout = "1m" }
  timeouts   = { create = "2m" }`, 1)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			checkSavedBundle(t, "win000000", bundleHolds("summary.txt", "failed in phase preflight with code PayloadCorrupt"))
			return nil
		},
		Steps: []resource.TestStep{{
			Config: config,
			ExpectError: regexp.MustCompile(`(?s)Node Failed to Join.*node win000000 failed in phase preflight with\s+code PayloadCorrupt.*` +
				`Diagnostics of win000000 \(nodeboot diagnose\):.*join: node win000000 failed in phase\s+preflight.*` +
				`The full diagnostics bundle was saved to\s+\S+/kubewin/diagnostics/win000000-\S+\.tar\.gz`),
		}},
	})
}

// health_check's defaults are the pool's, and the plan's warning says, node by node, what is
// wrong and what the next apply does.
func TestHealthCheckSettings(t *testing.T) {
	h, diags := healthCheck(context.Background(), types.ObjectValueMust(healthCheckAttrTypes, map[string]attr.Value{
		"not_ready_timeout": types.StringValue(defaultNotReadyTimeout), "max_replacements": types.Int64Value(pool.DefaultMaxReplacements),
		"join_retries": types.Int64Value(defaultJoinRetries),
	}))
	want := pool.HealthCheck{NotReadyTimeout: pool.DefaultNotReadyTimeout, MaxReplacements: pool.DefaultMaxReplacements, JoinRetries: defaultJoinRetries}
	if diags.HasError() || h != want {
		t.Errorf("defaults %+v, %v", h, diags)
	}
	got := healthReport([]pool.Finding{
		{Node: "win000001", State: "NotReady for 3m0s (its kubelet stopped posting node status)", Action: "it is kept", Kept: true},
		{Node: "win000002", State: "its machine stopped", Action: "the next apply evicts its pods"},
	})
	for _, want := range []string{"- win000001: NotReady for 3m0s (its kubelet stopped posting node status); it is kept.\n",
		"- win000002: its machine stopped; the next apply evicts its pods.\n", "health_check"} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
}
