package provider

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubewin/kubewin/internal/controlplane"
	"github.com/kubewin/kubewin/internal/testkit/testenv"
)

// Simulated machines join a cluster kubewin did not create, reached with host, CA and a client
// certificate, only with the opt-in that says so; the nodes say they are simulated.
func TestAccWindowsNodePool_existingCluster(t *testing.T) {
	state, _ := testAccLocal(t)
	b := testBackend(t, state)
	bin, _ := testenv.BinDir()
	cp, err := controlplane.Start(context.Background(), controlplane.Config{Dir: t.TempDir(), BinDir: bin, ClusterName: "existing"})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Destroy(context.Background())
	kc, err := clientcmd.LoadFromFile(cp.AdminKubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	user := kc.AuthInfos[kc.Contexts[kc.CurrentContext].AuthInfo]
	ca, _ := cp.CACert()
	image := testImage(t, b, "existing")
	config := fmt.Sprintf(`
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
  }
}

resource "kubewin_windows_node_pool" "win" {
  name       = "ext"
  node_count = 1
  local {
    image = %q
%%s
  }
}
`, state, nodebootDir, bin, cp.Endpoint(), ca, user.ClientCertificateData, user.ClientKeyData, image)
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
				Config:      fmt.Sprintf(config, ""),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)Simulated Nodes Need a Simulated Cluster.*local\.join_simulated_nodes_to_existing_cluster\s+=\s+true`),
			},
			{
				Config: fmt.Sprintf(config, "    join_simulated_nodes_to_existing_cluster = true"),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("kubewin_windows_node_pool.win", tfjsonpath.New("nodes").AtSliceIndex(0).AtMapKey("ready"), knownvalue.Bool(true)),
					statecheck.ExpectKnownValue("kubewin_windows_node_pool.win", tfjsonpath.New("nodes").AtSliceIndex(0).AtMapKey("name"), knownvalue.StringExact("ext000000")),
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
		},
	})
}

func TestAccProvider_kubernetesInvalid(t *testing.T) {
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
