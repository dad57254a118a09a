package provider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"k8s.io/utils/ptr"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/simmachine"
	"github.com/kubewin/kubewin/internal/testenv"
	"github.com/kubewin/kubewin/provider/internal/local"
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

// testImage writes a kubewin-local image directory for the control plane's Kubernetes version.
func testImage(t testing.TB, b *local.Backend, tag string) string {
	t.Helper()
	version, err := b.ControlPlaneVersion()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "image-"+tag)
	err = simmachine.WriteImage(dir, v1alpha1.ImageManifest{
		APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindImageManifest, WindowsBuild: v1alpha1.WindowsServer2022,
		KubernetesVersion: version, Runtime: v1alpha1.RuntimeInfo{Name: v1alpha1.RuntimeContainerd, Version: "2.1.4"},
		PauseImage:      v1alpha1.PauseImage{Reference: "registry.k8s.io/pause:3.10", Digest: "sha256:" + strings.Repeat("3", 64)},
		NodebootVersion: "test-" + tag,
	}, map[string][]byte{"k/kubelet.exe": []byte("simulated kubelet " + tag), "k/kube-proxy.exe": []byte("simulated kube-proxy")})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func poolConfig(provider, image string, count int) string {
	return provider + fmt.Sprintf(`
resource "kubewin_cluster" "test" {
  name = "pooltest"
}

resource "kubewin_windows_node_pool" "win" {
  name       = "win"
  cluster_id = kubewin_cluster.test.id
  image      = %q
  node_count = %d
  labels     = { "example.com/team" = "windows" }
  taints     = [{ key = "os", value = "windows", effect = "NoSchedule" }]
  drain      = { timeout = "1m" }
}
`, image, count)
}

func TestAccWindowsNodePool(t *testing.T) {
	state, provider := testAccLocal(t)
	b := testBackend(t, state)
	imageA, imageB := testImage(t, b, "a"), testImage(t, b, "b")
	var admin kubernetes.Interface
	client := func() kubernetes.Interface {
		if admin == nil {
			cp, err := b.Cluster("pooltest")
			if err != nil {
				t.Fatal(err)
			}
			cfg, _ := cp.AdminRESTConfig()
			admin = kubernetes.NewForConfigOrDie(cfg)
		}
		return admin
	}
	readyNodes := func() int {
		nodes, err := client().CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: "kubewin.io/pool=win"})
		if err != nil {
			return -1
		}
		n := 0
		for _, node := range nodes.Items {
			for _, c := range node.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && !node.Spec.Unschedulable {
					n++
				}
			}
		}
		return n
	}
	poolChecks := func(count int) []statecheck.StateCheck {
		return []statecheck.StateCheck{
			statecheck.ExpectKnownValue("kubewin_windows_node_pool.win", tfjsonpath.New("nodes"), knownvalue.ListSizeExact(count)),
			statecheck.ExpectKnownValue("kubewin_windows_node_pool.win", tfjsonpath.New("nodes").AtSliceIndex(0).AtMapKey("ready"), knownvalue.Bool(true)),
			statecheck.ExpectKnownValue("kubewin_windows_node_pool.win", tfjsonpath.New("nodes").AtSliceIndex(0).AtMapKey("pod_cidr"), knownvalue.StringRegexp(regexp.MustCompile(`^10\.244\.\d+\.0/24$`))),
			checkFunc(func() error {
				if n := readyNodes(); n != count {
					return fmt.Errorf("%d Ready pool nodes, want %d", n, count)
				}
				tokens, err := client().CoreV1().Secrets(metav1.NamespaceSystem).List(context.Background(), metav1.ListOptions{FieldSelector: "type=" + string(bootstrapapi.SecretTypeBootstrapToken)})
				if err != nil || len(tokens.Items) != 0 {
					return fmt.Errorf("bootstrap tokens left after the apply: %d (%v)", len(tokens.Items), err)
				}
				return nil
			}),
		}
	}
	var minReady atomic.Int64
	stopWatch := func() {}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			if ms, _ := b.Machines("win"); len(ms) != 0 {
				return fmt.Errorf("%d machines left", len(ms))
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
				Config: poolConfig(provider, imageA, 3),
				ConfigStateChecks: append(poolChecks(3), checkFunc(func() error {
					node, err := client().CoreV1().Nodes().Get(context.Background(), "win000000", metav1.GetOptions{})
					if err != nil {
						return err
					}
					if node.Labels["kubernetes.io/os"] != "windows" || node.Labels["example.com/team"] != "windows" || node.Labels["node.kubernetes.io/windows-build"] != "10.0.20348" {
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
				Config:            poolConfig(provider, imageA, 5),
				ConfigStateChecks: poolChecks(5),
			},
			{
				// Scale in to 2: a pod on a removed node is evicted, through the Eviction API, while a
				// PodDisruptionBudget keeps one of its two pods.
				PreConfig: func() {
					ctx := context.Background()
					for i, node := range []string{"win000000", "win000004"} {
						_, err := client().CoreV1().Pods("default").Create(ctx, &corev1.Pod{
							ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("iis-%d", i), Labels: map[string]string{"app": "iis"}},
							Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "iis", Image: "mcr.microsoft.com/windows/servercore/iis"}},
								Tolerations: []corev1.Toleration{{Key: "os", Operator: corev1.TolerationOpEqual, Value: "windows", Effect: corev1.TaintEffectNoSchedule}}},
						}, metav1.CreateOptions{})
						if err != nil {
							t.Fatal(err)
						}
					}
					if _, err := client().PolicyV1().PodDisruptionBudgets("default").Create(ctx, &policyv1.PodDisruptionBudget{
						ObjectMeta: metav1.ObjectMeta{Name: "iis"},
						Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "iis"}}},
					}, metav1.CreateOptions{}); err != nil {
						t.Fatal(err)
					}
					deadline := time.Now().Add(30 * time.Second)
					for time.Now().Before(deadline) {
						pdb, err := client().PolicyV1().PodDisruptionBudgets("default").Get(ctx, "iis", metav1.GetOptions{})
						if err == nil && pdb.Status.CurrentHealthy == 2 {
							return
						}
						time.Sleep(100 * time.Millisecond)
					}
					t.Fatal("the pods never ran on the simulated nodes")
				},
				Config: poolConfig(provider, imageA, 2),
				ConfigStateChecks: append(poolChecks(2), checkFunc(func() error {
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
					minReady.Store(int64(readyNodes()))
					ctx, cancel := context.WithCancel(context.Background())
					var wg sync.WaitGroup
					wg.Go(func() {
						for ctx.Err() == nil {
							if n := int64(readyNodes()); n >= 0 && n < minReady.Load() {
								minReady.Store(n)
							}
							time.Sleep(50 * time.Millisecond)
						}
					})
					stopWatch = func() { cancel(); wg.Wait() }
				},
				Config: poolConfig(provider, imageB, 2),
				ConfigStateChecks: append(poolChecks(2), checkFunc(func() error {
					stopWatch()
					if m := minReady.Load(); m < 2 {
						return fmt.Errorf("the replacement left only %d Ready nodes", m)
					}
					ms, _ := b.Machines("win")
					for _, m := range ms {
						if m.Name == "win000000" || m.Name == "win000001" {
							return fmt.Errorf("old machine %s survived the image change", m.Name)
						}
					}
					return nil
				})),
			},
			{
				ResourceName:            "kubewin_windows_node_pool.win",
				ImportState:             true,
				ImportStateId:           "win",
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"timeouts", "nodes"},
				Config:                  poolConfig(provider, imageB, 2),
			},
		},
	})
}

func TestAccWindowsNodePool_invalid(t *testing.T) {
	state, provider := testAccLocal(t)
	b := testBackend(t, state)
	image := testImage(t, b, "a")
	pool := func(attrs string) string {
		return provider + fmt.Sprintf(`
resource "kubewin_windows_node_pool" "win" {
  cluster_id = "none"
  image      = %q
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
			{Config: pool(`  name = "windowspool"
  node_count = 1`), PlanOnly: true, ExpectError: regexp.MustCompile(`(?s)Windows Computer Names Too Long.*"windowspool" makes Windows computer names of 17 characters`)},
			{Config: pool(`  name = "win"
  node_count = -1`), PlanOnly: true, ExpectError: regexp.MustCompile(`(?s)node_count.*must be at least 0`)},
			{Config: pool(`  name = "win"
  node_count = 1
  network_mode = "l3bridge"`), PlanOnly: true, ExpectError: regexp.MustCompile(`(?s)network_mode.*value must be one of`)},
			{Config: pool(`  name = "win"
  node_count = 1
  labels = { "kubernetes.io/role" = "windows" }`), PlanOnly: true, ExpectError: regexp.MustCompile(`(?s)Invalid Node Setting.*a kubelet may not set labels in\s+the kubernetes.io`)},
			{Config: pool(`  name = "win"
  node_count = 1
  kubelet_extra_args = { "pod-infra-container-image" = "x" }`), PlanOnly: true, ExpectError: regexp.MustCompile(`(?s)Invalid Kubelet Arguments.*was\s+removed\s+in\s+Kubernetes\s+1\.34`)},
		},
	})
}

// A node that cannot join fails the apply within the create timeout, naming the node, the
// phase and the error code.
func TestAccWindowsNodePool_joinFailure(t *testing.T) {
	state, provider := testAccLocal(t)
	b := testBackend(t, state)
	image := testImage(t, b, "tampered")
	// The payload no longer matches the manifest the image was baked with.
	if err := os.WriteFile(filepath.Join(image, simmachine.ImagePayloadDir, "k", "kubelet.exe"), []byte("tampered"), 0o755); err != nil {
		t.Fatal(err)
	}
	config := strings.Replace(poolConfig(provider, image, 1), `drain      = { timeout = "1m" }`, `drain      = { timeout = "1m" }
  timeouts   = { create = "2m" }`, 1)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config:      config,
			ExpectError: regexp.MustCompile(`(?s)Node Failed to Join.*node win000000 failed in phase preflight with\s+code PayloadCorrupt`),
		}},
	})
}
