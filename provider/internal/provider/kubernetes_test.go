package provider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubewin/kubewin/internal/controlplane"
	"github.com/kubewin/kubewin/internal/testkit/testenv"
)

// Simulated machines join a cluster kubewin did not create, reached with host, CA and a client
// certificate, only with the opt-in that says so; the nodes say they are simulated.
func TestAccWindowsNodePool_existingCluster(t *testing.T) {
	t.Parallel()
	state, _ := testAccLocal(t)
	b := testBackend(t, state)
	bin, _ := testenv.BinDir()
	cp, err := controlplane.Start(context.Background(), controlplane.Config{Dir: t.TempDir(), BinDir: bin, ClusterName: "existing"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := cp.Destroy(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	kc, err := clientcmd.LoadFromFile(cp.AdminKubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	user := kc.AuthInfos[kc.Contexts[kc.CurrentContext].AuthInfo]
	ca, _ := cp.CACert()
	image := testImage(t, b, "existing")
	// config is the pool joining the cluster at host, with the kubernetes block's and the local
	// block's extra arguments.
	config := func(host, kube, local string) string {
		return fmt.Sprintf(`
provider "kubewin" {
  local {
    state_dir = %q
    bin_path  = [%q, %q]
  }
  kubernetes {
    host                   = %q
    cluster_ca_certificate = %q
    client_certificate     = %q
    client_key             = %q
%s
  }
}

resource "kubewin_windows_node_pool" "win" {
  name       = "ext"
  node_count = 1
  local {
    image = %q
%s
  }
}
`, state, nodebootDir, bin, host, ca, user.ClientCertificateData, user.ClientKeyData, kube, image, local)
	}
	optIn := "    join_simulated_nodes_to_existing_cluster = true"
	networks := fmt.Sprintf("    cluster_cidr = %q\n    service_cidr = %q", cp.Config.ClusterCIDR, cp.Config.ServiceCIDR)
	cfg, _ := cp.AdminRESTConfig()
	admin := kubernetes.NewForConfigOrDie(cfg)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			nodes, err := admin.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
			if err != nil || len(nodes.Items) != 0 {
				return fmt.Errorf("%d nodes left (%v)", len(nodes.Items), err)
			}
			if ms, _ := b.Machines("ext"); len(ms) != 0 {
				return fmt.Errorf("%d machines left", len(ms))
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config:      config(cp.Endpoint(), "", ""),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)Simulated Nodes Need a Simulated Cluster.*local\.join_simulated_nodes_to_existing_cluster\s+=\s+true`),
			},
			{
				Config: config("https://127.0.0.1:1", "", optIn),
				ExpectError: regexp.MustCompile(`(?s)Cannot Reach the Pool's Cluster.*cannot reach the cluster of the provider's kubernetes block: .*` +
					`127\.0\.0\.1:1.*Check\s+kubernetes\.host`),
			},
			{
				Config: config(cp.Endpoint(), "", optIn),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("kubewin_windows_node_pool.win", tfjsonpath.New("nodes").AtSliceIndex(0).AtMapKey("ready"), knownvalue.Bool(true)),
					statecheck.ExpectKnownValue("kubewin_windows_node_pool.win", tfjsonpath.New("nodes").AtSliceIndex(0).AtMapKey("name"),
						knownvalue.StringExact("ext000000")),
					checkFunc(func() error {
						node, err := admin.CoreV1().Nodes().Get(context.Background(), "ext000000", metav1.GetOptions{})
						if err != nil {
							return err
						}
						if node.Labels["kubewin.io/simulated"] != "true" || !strings.HasSuffix(node.Status.NodeInfo.OSImage, "(simulated)") {
							return fmt.Errorf("node ext000000 does not say it is simulated: labels %v, OS image %q", node.Labels, node.Status.NodeInfo.OSImage)
						}
						return nil
					}),
				},
			},
			// A cluster without kubeadm-config (AKS, EKS, GKE) is refused naming what to set instead,
			// and joined once the kubernetes block names its networks.
			{
				PreConfig: func() {
					if err := admin.CoreV1().ConfigMaps("kube-system").Delete(context.Background(), "kubeadm-config", metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config: config(cp.Endpoint(), "", optIn),
				ExpectError: regexp.MustCompile(`(?s)Not a kubeadm Cluster.*has\s+no\s+kube-system/kubeadm-config\s+ConfigMap.*Set\s+the\s+cluster's\s+` +
					`networks\s+in\s+the\s+provider's\s+kubernetes\s+block\s+instead:\s+cluster_cidr.*service_cidr`),
			},
			{
				Config: config(cp.Endpoint(), networks, optIn),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("kubewin_windows_node_pool.win", tfjsonpath.New("nodes").AtSliceIndex(0).AtMapKey("ready"), knownvalue.Bool(true)),
				},
			},
		},
	})
}

func TestAccProvider_kubernetesInvalid(t *testing.T) {
	t.Parallel()
	state, _ := testAccLocal(t)
	block := func(attrs string) string {
		return fmt.Sprintf(`
provider "kubewin" {
  local {
    state_dir = %q
  }
  kubernetes {
%s
  }
}

data "kubewin_image_manifest" "x" {
  content = "{}"
}
`, state, attrs)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: block(`    host = "http://10.0.0.4:6443"
    token = "x"`), ExpectError: regexp.MustCompile(`(?s)(Invalid Host.*Missing Cluster CA|Missing Cluster CA.*Invalid Host)`)},
			{Config: block(`    host = "https://10.0.0.4:6443"
    cluster_ca_certificate = "x"`), ExpectError: regexp.MustCompile(`(?s)Missing Credential.*Set token, or client_certificate and client_key`)},
			{Config: block(`    config_path = "/nonexistent/kubeconfig"`), ExpectError: regexp.MustCompile(`(?s)Invalid Kubeconfig`)},
		},
	})
}

// config_path = "~/..." is the home directory's, as the kubernetes provider reads it (client-go
// does not expand ~).
func TestKubernetesConfigPathHome(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	kubeconfig := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"https://10.0.0.4:6443\"}}]\n" +
		"users: [{name: u, user: {token: x}}]\ncontexts: [{name: ctx, context: {cluster: c, user: u}}]\ncurrent-context: ctx\n"
	if err := os.MkdirAll(filepath.Join(home, ".kube"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".kube", "config"), []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	k := &kubernetesModel{ConfigPath: types.StringValue("~/.kube/config")}
	cfg, diags := k.restConfig()
	if diags.HasError() || cfg == nil || cfg.Host != "https://10.0.0.4:6443" {
		t.Fatalf("config_path ~/.kube/config: %v %v", cfg, diags)
	}
}

// The cluster's networks are both set or neither, each a CIDR.
func TestKubernetesNetworks(t *testing.T) {
	for _, tc := range []struct{ cluster, service, want string }{
		{"10.244.0.0/16", "10.96.0.0/12", ""},
		{"", "", ""},
		{"10.244.0.0/16", "", `Incomplete Cluster Networks: cluster_cidr = "10.244.0.0/16" and service_cidr = "": set both`},
		{"10.244.0.0", "10.96.0.0/12", `Invalid CIDR: cluster_cidr = "10.244.0.0" is not a CIDR`},
	} {
		k := &kubernetesModel{ClusterCIDR: types.StringValue(tc.cluster), ServiceCIDR: types.StringValue(tc.service)}
		_, diags := k.networks()
		got := ""
		if len(diags) > 0 {
			got = diags[0].Summary() + ": " + diags[0].Detail()
		}
		if (tc.want == "") != (got == "") || !strings.HasPrefix(got, tc.want) {
			t.Errorf("cluster_cidr %q, service_cidr %q: %q, want %q", tc.cluster, tc.service, got, tc.want)
		}
	}
}

// The Terraform Cloud guide's RBAC manifest gives the cluster token all a pool needs: a pool
// joins, scales in and is destroyed with a token of its service account alone.
func TestAccWindowsNodePool_guideRBAC(t *testing.T) {
	t.Parallel()
	state, _ := testAccLocal(t)
	b := testBackend(t, state)
	bin, _ := testenv.BinDir()
	cp, err := controlplane.Start(context.Background(), controlplane.Config{Dir: t.TempDir(), BinDir: bin, ClusterName: "rbac"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := cp.Destroy(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	cfg, _ := cp.AdminRESTConfig()
	admin := kubernetes.NewForConfigOrDie(cfg)
	guide, err := os.ReadFile(filepath.Join(repoRoot, "templates", "guides", "terraform-cloud.md.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	_, manifest, _ := strings.Cut(string(guide), "```yaml\n")
	manifest, _, _ = strings.Cut(manifest, "```")
	ctx := context.Background()
	for _, doc := range strings.Split(manifest, "\n---\n") {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatalf("the guide's manifest: %v\n%s", err, doc)
		}
		switch o := obj.(type) {
		case *corev1.ServiceAccount:
			_, err = admin.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.Namespace:
			_, err = admin.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			_, err = admin.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.Role:
			_, err = admin.RbacV1().Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, err = admin.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		default:
			t.Fatalf("the guide's manifest has a %T", obj)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	tr, err := admin.CoreV1().ServiceAccounts("kube-system").CreateToken(ctx, "kubewin", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := cp.CACert()
	config := func(count int) string {
		return fmt.Sprintf(`
provider "kubewin" {
  local {
    state_dir = %q
    bin_path  = [%q, %q]
  }
  kubernetes {
    host                   = %q
    cluster_ca_certificate = %q
    token                  = %q
  }
}

resource "kubewin_windows_node_pool" "win" {
  name       = "rbac"
  node_count = %d
  local {
    image                                    = %q
    join_simulated_nodes_to_existing_cluster = true
  }
}
`, state, nodebootDir, bin, cp.Endpoint(), ca, tr.Status.Token, count, testImage(t, b, "rbac"))
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			nodes, err := admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil || len(nodes.Items) != 0 {
				return fmt.Errorf("%d nodes left (%v)", len(nodes.Items), err)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{Config: config(2), ConfigStateChecks: []statecheck.StateCheck{statecheck.ExpectKnownValue("kubewin_windows_node_pool.win",
				tfjsonpath.New("nodes").AtSliceIndex(1).AtMapKey("ready"), knownvalue.Bool(true))}},
			{Config: config(1), ConfigStateChecks: []statecheck.StateCheck{statecheck.ExpectKnownValue("kubewin_windows_node_pool.win",
				tfjsonpath.New("nodes"), knownvalue.ListSizeExact(1))}},
		},
	})
}
