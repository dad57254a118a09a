package provider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubewin/kubewin/internal/controlplane"
	"github.com/kubewin/kubewin/internal/proc"
	"github.com/kubewin/kubewin/internal/testkit/testenv"
	"github.com/kubewin/kubewin/provider/internal/local"
)

// testAccLocal is a provider block for a fresh local state directory.
func testAccLocal(t testing.TB) (string, string) {
	t.Helper()
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	// Whatever a failed test leaves running (its destroy may not have run) is stopped.
	t.Cleanup(func() { stopLeftovers(state) })
	return state, fmt.Sprintf("provider \"kubewin\" {\n  local {\n    state_dir = %q\n    bin_path  = [%q, %q]\n  }\n}\n", state, nodebootDir, bin)
}

func TestAccCluster(t *testing.T) {
	t.Parallel()
	state, provider := testAccLocal(t)
	dir := state + "/clusters/acc"
	config := provider + `resource "kubewin_cluster" "test" {
  name = "acc"
  local {}
}`
	var pids map[string]int
	// answers checks that the cluster answers with the admin credential, and notes its processes.
	answers := func(*terraform.State) error {
		cp, err := controlplane.Load(dir)
		if err != nil {
			return err
		}
		pids = cp.PIDs
		return apiAnswers(cp)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				return fmt.Errorf("%s still exists after destroy", dir)
			}
			for c, up := range (&controlplane.ControlPlane{PIDs: pids}).Running() {
				if up {
					return fmt.Errorf("%s (pid %d) still runs after destroy", c, pids[c])
				}
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: config,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("kubewin_cluster.test", tfjsonpath.New("id"), knownvalue.StringExact("acc")),
					statecheck.ExpectKnownValue("kubewin_cluster.test", tfjsonpath.New("endpoint"),
						knownvalue.StringRegexp(regexp.MustCompile(`^https://127\.0\.0\.1:\d+$`))),
					statecheck.ExpectKnownValue("kubewin_cluster.test", tfjsonpath.New("kubernetes_version"),
						knownvalue.StringRegexp(regexp.MustCompile(`^v1\.\d+\.\d+`))),
					statecheck.ExpectKnownValue("kubewin_cluster.test", tfjsonpath.New("ca_cert_hash"),
						knownvalue.StringRegexp(regexp.MustCompile(`^sha256:[0-9a-f]{64}$`))),
					statecheck.ExpectKnownValue("kubewin_cluster.test", tfjsonpath.New("cluster_cidr"), knownvalue.StringExact("10.244.0.0/16")),
					statecheck.ExpectKnownValue("kubewin_cluster.test", tfjsonpath.New("running"), knownvalue.Bool(true)),
				},
				Check: answers, // the processes outlive the apply
			},
			{
				// Stopped behind Terraform's back (a reboot): the next apply starts it again.
				PreConfig: func() {
					cp, err := controlplane.Load(dir)
					if err != nil {
						t.Fatal(err)
					}
					if err := cp.Stop(context.Background(), 10*time.Second); err != nil {
						t.Fatal(err)
					}
				},
				Config: config,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("kubewin_cluster.test", plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue("kubewin_cluster.test", tfjsonpath.New("running"), knownvalue.Bool(true)),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("kubewin_cluster.test", tfjsonpath.New("running"), knownvalue.Bool(true)),
				},
				Check: answers,
			},
			{
				ResourceName:      "kubewin_cluster.test",
				ImportState:       true,
				ImportStateId:     "acc",
				ImportStateVerify: true,
				Config:            config,
			},
		},
	})
}

func TestAccCluster_invalid(t *testing.T) {
	t.Parallel()
	_, provider := testAccLocal(t)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: provider + `resource "kubewin_cluster" "test" {
  name = "Bad_Name"
  local {}
}`,
				ExpectError: regexp.MustCompile(`(?s)name.*must be 1-40 lower-case letters`),
			},
			{
				Config: provider + `resource "kubewin_cluster" "test" {
  name = "x"
  cluster_cidr = "10.0.0.1/16"
  local {}
}`,
				ExpectError: regexp.MustCompile(`(?s)Invalid CIDR.*has host bits set: use 10\.0\.0\.0/16`),
			},
			{
				Config: provider + `resource "kubewin_cluster" "test" {
  name = "x"
  cluster_cidr = "10.0.0.0/8"
  service_cidr = "10.96.0.0/12"
  local {}
}`,
				ExpectError: regexp.MustCompile(`(?s)Overlapping CIDRs.*cluster_cidr 10\.0\.0\.0/8 overlaps service_cidr 10\.96\.0\.0/12`),
			},
			{
				Config: provider + `resource "kubewin_cluster" "test" {
  name = "x"
  cluster_cidr = "fd00::/48"
  local {}
}`,
				ExpectError: regexp.MustCompile(`IPv6 is not supported yet`),
			},
			{
				Config: provider + `resource "kubewin_cluster" "test" {
  name = "x"
  cluster_cidr = "10.244.0.0/16"
  node_cidr_mask_size = 12
  local {}
}`,
				ExpectError: regexp.MustCompile(`(?s)node_cidr_mask_size /12 is larger than\s+cluster_cidr`),
			},
		},
	})
}

func apiAnswers(cp *controlplane.ControlPlane) error {
	cfg, err := cp.AdminRESTConfig()
	if err != nil {
		return err
	}
	_, err = kubernetes.NewForConfigOrDie(cfg).CoreV1().Namespaces().Get(context.Background(), "kube-public", metav1.GetOptions{})
	return err
}

// stopLeftovers stops the clusters and machines of a local state directory.
func stopLeftovers(state string) {
	ctx := context.Background()
	clusters, _ := filepath.Glob(filepath.Join(state, "clusters", "*"))
	for _, dir := range clusters {
		if cp, err := controlplane.Load(dir); err == nil {
			_ = cp.Stop(ctx, 5*time.Second)
		}
	}
	b, err := local.New(state, nil)
	if err != nil {
		return
	}
	pools, _ := filepath.Glob(filepath.Join(state, "pools", "*"))
	for _, dir := range pools {
		ms, _ := b.Machines(filepath.Base(dir))
		for _, m := range ms {
			_ = proc.Stop(ctx, m.PID, 5*time.Second)
		}
	}
}

// In a Terraform Cloud run the local backend's processes would not outlive the run: its
// resources are refused at plan time.
func TestAccLocalRefusedInTerraformCloud(t *testing.T) {
	_, provider := testAccLocal(t)
	t.Setenv("TFC_RUN_ID", "run-CLBfmvxPh9ZTYVj2")
	refused := regexp.MustCompile(`(?s)The Local Backend Cannot Run in Terraform Cloud.*TFC_RUN_ID is set`)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: provider + `resource "kubewin_cluster" "test" {
  name = "remote"
  local {}
}`, PlanOnly: true, ExpectError: refused},
			{Config: provider + `resource "kubewin_pod_route" "test" {
  name        = "win000000"
  destination = "10.244.0.0/24"
  next_hop    = "10.240.0.4"
  local {
    route_table = "pods"
  }
}`, PlanOnly: true, ExpectError: refused},
		},
	})
}

// A state written before the backend blocks (schema version 0) reads as a local cluster.
func TestClusterStateUpgrade(t *testing.T) {
	server, err := providerserver.NewProtocol6WithError(New("test")())()
	if err != nil {
		t.Fatal(err)
	}
	old := `{"name":"dev","cluster_cidr":"10.244.0.0/16","service_cidr":"10.96.0.0/12","node_cidr_mask_size":24,"running":true,"id":"dev",` +
		`"endpoint":"https://127.0.0.1:6443","kubernetes_version":"v1.37.1",` +
		`"ca_certificate":"PEM","ca_cert_hash":"sha256:00","kubeconfig_path":"/x/admin.conf"}`
	resp, err := server.UpgradeResourceState(context.Background(), &tfprotov6.UpgradeResourceStateRequest{
		TypeName: "kubewin_cluster", Version: 0, RawState: &tfprotov6.RawState{JSON: []byte(old)},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range resp.Diagnostics {
		t.Errorf("%s: %s", d.Summary, d.Detail)
	}
	schema, err := server.GetProviderSchema(context.Background(), &tfprotov6.GetProviderSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	v, err := resp.UpgradedState.Unmarshal(schema.ResourceSchemas["kubewin_cluster"].ValueType())
	if err != nil {
		t.Fatal(err)
	}
	var attrs map[string]tftypes.Value
	if err := v.As(&attrs); err != nil {
		t.Fatal(err)
	}
	var name string
	if err := attrs["name"].As(&name); err != nil || name != "dev" {
		t.Errorf("name %q, %v", name, err)
	}
	if attrs["local"].IsNull() || !attrs["azure"].IsNull() {
		t.Errorf("upgraded state has local %v and azure %v, want a local block and no azure one", attrs["local"], attrs["azure"])
	}
}
