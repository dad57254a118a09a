package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/echoprovider"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubewin/kubewin/internal/controlplane"
	"github.com/kubewin/kubewin/internal/kubeadmboot"
	"github.com/kubewin/kubewin/internal/kubeversion"
	"github.com/kubewin/kubewin/internal/sim/simcloud"
	"github.com/kubewin/kubewin/internal/testkit/armtest"
	"github.com/kubewin/kubewin/internal/testkit/testenv"
	"github.com/kubewin/kubewin/provider/internal/azure"
	"github.com/kubewin/kubewin/provider/internal/azure/azureacc"
	"github.com/kubewin/kubewin/provider/internal/azureccm"
	"github.com/kubewin/kubewin/provider/internal/azurecsi"
)

// An azure cluster through the ARM test server: its control planes are simulated Linux machines
// on which the real kubeadm makes the cluster from their cloud-init (the first one's control plane
// runs as processes), its Linux agents join with kubeadm and a simulated kubelet.

// clusterGroup is a resource group of the test server for one cluster; the resources it held
// before the test (images) are what destroy must leave.
type clusterGroup struct {
	name   string
	before []string
	image  string // a Windows image of the control plane's version
}

func newClusterGroup(t testing.TB, state string) *clusterGroup {
	t.Helper()
	testServerOnly(t)
	g := &clusterGroup{name: fmt.Sprintf("kubewin-cluster-%d", azureSeq.Add(1))}
	armServer.AddResourceGroup(g.name)
	g.image = seedWindowsImage(t, state, g.name)
	g.before = armServer.ResourceIDs(g.name)
	return g
}

// seedWindowsImage publishes a simulated Windows image of the control plane's version in a
// resource group of the test server, as the Packer templates publish one, and returns its ID.
func seedWindowsImage(t testing.TB, state, group string) string {
	t.Helper()
	dir := testImage(t, testBackend(t, state), group)
	id := armServer.ResourceGroupID(group) + "/providers/Microsoft.Compute/galleries/kubewin/images/ws2022/versions/1.0.0"
	if err := armServer.AddImage(id, imageTags(t, dir)); err != nil {
		t.Fatal(err)
	}
	armBooter.AddImage(id, dir)
	return id
}

// suiteWindowsImage is the Windows image of the cluster suite's pool: on the test server one it
// seeds in the group; on Azure the image azureacc.EnvWindowsImage names, or none (the pool step
// is skipped).
func suiteWindowsImage(t *testing.T, state, group string) string {
	t.Helper()
	if armServer == nil {
		if os.Getenv(azureacc.EnvWindowsImage) == "" {
			t.Logf("%s is not set: the Windows pool step is skipped", azureacc.EnvWindowsImage)
		}
		return os.Getenv(azureacc.EnvWindowsImage)
	}
	return seedWindowsImage(t, state, group)
}

// leftovers is what the group holds that it did not before.
func (g *clusterGroup) leftovers() []string {
	var out []string
	for _, id := range armServer.ResourceIDs(g.name) {
		if !slices.Contains(g.before, id) {
			out = append(out, id)
		}
	}
	return out
}

// clusterVersion is the Kubernetes release the simulated machines run ("1.37.1").
func clusterVersion(t testing.TB) string {
	t.Helper()
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	v, err := controlplane.BinaryVersion(bin)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(v, "v")
}

// clusterAccess is an admin credential of an azure cluster, taken as the provider takes it.
func clusterAccess(t *testing.T, client *azure.Client, id string) *azure.Access {
	t.Helper()
	c, err := client.OpenCluster(id)
	if err != nil {
		t.Fatal(err)
	}
	endpoint, masters, err := c.Endpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.Access(context.Background(), endpoint, masters)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// readyNodes counts an azure cluster's Ready nodes by OS.
func readyNodes(t testing.TB, a *azure.Access) map[string]int {
	t.Helper()
	kc, err := kubernetes.NewForConfig(a.REST())
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := kc.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, n := range nodes.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				out[n.Labels[corev1.LabelOSStable]]++
			}
		}
	}
	return out
}

func azureClusterConfig(provider, version, location, group, extra string) string {
	return provider + fmt.Sprintf(`
resource "kubewin_cluster" "test" {
  name               = "acc"
  kubernetes_version = %q
  azure {
    resource_group_name = %q
    location            = %q
    dns_prefix          = "acc-%s"
%s
  }
}
`, version, group, location, group, extra)
}

// The azure cluster's life under terraform: made, read, its Linux pool scaled and a control
// plane added in place, a version change refused at plan time, an ephemeral admin credential
// for another provider, and a destroy that leaves exactly what was there before. Control planes
// Compute fails (AllocationFailed) or that are deleted out of band are made again by the next
// apply, and a create that fails after the first control plane runs says how to keep the
// cluster. The suite runs on both targets (accTarget); the steps that inject faults need the
// test server and are skipped on Azure.
func TestAccClusterAzure(t *testing.T) {
	t.Parallel()
	state, provider := testAccLocal(t)
	tg := accTarget(t)
	group := newTargetGroup(t, tg)
	image := suiteWindowsImage(t, state, group)
	// What the group holds before the cluster (a seeded image) is what destroy must leave.
	before, err := tg.Resources(context.Background(), group)
	if err != nil {
		t.Fatal(err)
	}
	version := clusterVersion(t)
	config := func(extra string) string { return azureClusterConfig(provider, version, tg.Location, group, extra) }
	one := config("    linux_pool = { node_count = 1 }")
	three := config("    linux_pool = { node_count = 2 }\n    masters = { count = 3 }")
	// The fault steps need the test server; on Azure they are skipped (SkipFunc), after their
	// PreConfig ran, so their faults are injected only on the test server.
	var faults []*armtest.Fault
	clearFaults := func() {
		for _, f := range faults {
			f.Remove()
		}
		faults = nil
	}
	defer clearFaults()
	inject := func(fault func() *armtest.Fault) func() {
		return func() {
			clearFaults()
			if armServer != nil {
				faults = append(faults, fault())
			}
		}
	}
	onlyTestServer := func() (bool, error) { return armServer == nil, nil }
	nodes := func(linux int) func(*terraform.State) error {
		return func(s *terraform.State) error {
			id := s.RootModule().Resources["kubewin_cluster.test"].Primary.ID
			if got := readyNodes(t, clusterAccess(t, tg.Client, id)); got["linux"] != linux {
				return fmt.Errorf("Ready nodes %v, want %d Linux", got, linux)
			}
			return nil
		}
	}
	cred, opts := tg.Client.ARM()
	vms, err := armcompute.NewVirtualMachinesClient(tg.Client.SubscriptionID, cred, opts)
	if err != nil {
		t.Fatal(err)
	}
	// controlPlanes checks through ARM that the cluster has n control-plane VMs, none Failed,
	// each of whose serial console says its bootstrap is done.
	controlPlanes := func(n int) func(*terraform.State) error {
		return func(*terraform.State) error {
			ctx := context.Background()
			for i := range n {
				name := fmt.Sprintf("acc-master-%d", i)
				vm, err := vms.Get(ctx, group, name, nil)
				if err != nil {
					return err
				}
				if st := *vm.Properties.ProvisioningState; st != "Succeeded" {
					return fmt.Errorf("%s's VM is %s, want Succeeded", name, st)
				}
				r, err := vms.RetrieveBootDiagnosticsData(ctx, group, name, nil)
				if err != nil {
					return err
				}
				log, err := readURL(ctx, *r.SerialConsoleLogBlobURI)
				if err != nil {
					return err
				}
				if b := kubeadmboot.ReadSerial(log); !b.Ready {
					return fmt.Errorf("%s's bootstrap is not done: %s", name, b.Line)
				}
			}
			return nil
		}
	}
	kv, err := kubeversion.Parse(version)
	if err != nil {
		t.Fatal(err)
	}
	pin, err := azureccm.ForMinor(int(kv.Minor()))
	if err != nil {
		t.Fatal(err)
	}
	cloudProvider := func(azureFile bool) resource.TestCheckFunc {
		return func(s *terraform.State) error {
			return checkCloudProvider(t, tg, s.RootModule().Resources["kubewin_cluster.test"].Primary.ID, group, pin.CloudControllerManager,
				azureFile)
		}
	}
	storageAt := func(name string) tfjsonpath.Path { return tfjsonpath.New("azure").AtMapKey("storage").AtMapKey(name) }
	at := func(name string) tfjsonpath.Path {
		return tfjsonpath.New("azure").AtMapKey("cloud_provider").AtMapKey(name)
	}
	endpoint := regexp.MustCompile(`^https://\d+\.\d+\.\d+\.\d+:6443$`)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: map[string]func() (tfprotov6.ProviderServer, error){
			"kubewin": providerserver.NewProtocol6WithError(New("test")()),
			"echo":    echoprovider.NewProviderServer(),
		},
		CheckDestroy: func(*terraform.State) error {
			after, err := tg.Resources(context.Background(), group)
			if armServer != nil { // also what ARM does not list: routes, role assignments
				after = append(after, armServer.ResourceIDs(group)...)
			}
			var left []string
			for _, id := range after {
				if !slices.Contains(before, id) {
					left = append(left, id)
				}
			}
			if err != nil || len(left) > 0 {
				return fmt.Errorf("destroy left %v (%v)", left, err)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				// A create that fails once the first control plane runs (Compute has no capacity
				// for the second) taints the cluster: the error says how to keep it.
				SkipFunc: onlyTestServer,
				PreConfig: inject(func() *armtest.Fault {
					return armServer.FailAllocation(armtest.Match{Method: http.MethodPut, Path: armtest.InGroup(group, `/virtualMachines/acc-master-1$`)})
				}),
				Config: config("    linux_pool = { node_count = 1 }\n    masters = { count = 3 }"),
				ExpectError: regexp.MustCompile(`(?s)AllocationFailed.*The\s+cluster\s+runs.*marks\s+it\s+tainted.*terraform\s+untaint.*` +
					`makes\s+what\s+is\s+missing.*in\s+place`),
			},
			{
				// The tainted cluster is replaced.
				PreConfig: clearFaults,
				Config:    one,
				Check:     resource.ComposeTestCheckFunc(nodes(1), cloudProvider(true), controlPlanes(1)),
				ConfigStateChecks: []statecheck.StateCheck{
					// The cloud provider is on by default for a new cluster, at kubewin's pin.
					statecheck.ExpectKnownValue("kubewin_cluster.test", at("enabled"), knownvalue.Bool(true)),
					statecheck.ExpectKnownValue("kubewin_cluster.test", at("cloud_routes"), knownvalue.Bool(false)),
					statecheck.ExpectKnownValue("kubewin_cluster.test", at("version"), knownvalue.StringExact(pin.CloudControllerManager)),
					statecheck.ExpectKnownValue("kubewin_cluster.test", at("images"), knownvalue.MapExact(map[string]knownvalue.Check{
						"cloud-controller-manager": knownvalue.StringExact(azureccm.Registry + "/azure-cloud-controller-manager:" + pin.CloudControllerManager),
						"cloud-node-manager":       knownvalue.StringExact(azureccm.Registry + "/azure-cloud-node-manager:" + pin.CloudNodeManager),
					})),
					statecheck.ExpectKnownValue("kubewin_cluster.test", at("identity_id"),
						knownvalue.StringRegexp(regexp.MustCompile(`/providers/Microsoft\.ManagedIdentity/userAssignedIdentities/acc-cloud-provider$`))),
					statecheck.ExpectKnownValue("kubewin_cluster.test", at("identity_client_id"),
						knownvalue.StringRegexp(regexp.MustCompile(`^[0-9a-f-]{36}$`))),
					statecheck.ExpectKnownValue("kubewin_cluster.test", at("identity_principal_id"),
						knownvalue.StringRegexp(regexp.MustCompile(`^[0-9a-f-]{36}$`))),
					// So are both CSI drivers, at kubewin's pins.
					statecheck.ExpectKnownValue("kubewin_cluster.test", storageAt("azure_disk"), knownvalue.Bool(true)),
					statecheck.ExpectKnownValue("kubewin_cluster.test", storageAt("azure_file"), knownvalue.Bool(true)),
					statecheck.ExpectKnownValue("kubewin_cluster.test", storageAt("azure_disk_version"), knownvalue.StringExact(azurecsi.Pinned.AzureDisk)),
					statecheck.ExpectKnownValue("kubewin_cluster.test", storageAt("images").AtMapKey("azurefile-windows"),
						knownvalue.StringExact(azurecsi.Registry+"/azurefile-csi:"+azurecsi.Pinned.AzureFile+"-windows-hp")),
					statecheck.ExpectKnownValue("kubewin_cluster.test", tfjsonpath.New("endpoint"), knownvalue.StringRegexp(endpoint)),
					statecheck.ExpectKnownValue("kubewin_cluster.test", tfjsonpath.New("ca_cert_hash"),
						knownvalue.StringRegexp(regexp.MustCompile(`^sha256:[0-9a-f]{64}$`))),
					statecheck.ExpectKnownValue("kubewin_cluster.test", tfjsonpath.New("ca_certificate"),
						knownvalue.StringRegexp(regexp.MustCompile(`BEGIN CERTIFICATE`))),
					statecheck.ExpectKnownValue("kubewin_cluster.test", tfjsonpath.New("kubeconfig_path"), knownvalue.Null()),
					statecheck.ExpectKnownValue("kubewin_cluster.test", tfjsonpath.New("azure").AtMapKey("api_server_fqdn"),
						knownvalue.StringRegexp(regexp.MustCompile(`^acc-.*\.cloudapp\.azure\.com$`))),
					statecheck.ExpectKnownValue("kubewin_cluster.test", tfjsonpath.New("running"), knownvalue.Bool(true)),
				},
			},
			{
				// A new version would need a new cluster: refused, naming the attribute.
				Config:   strings.Replace(one, version, "1.36.3", 1),
				PlanOnly: true,
				ExpectError: regexp.MustCompile(`(?s)Change Would Replace the Cluster.*Changing kubernetes_version of azure cluster "acc".*` +
					`kubewin never\s+destroys a cluster`),
			},
			{
				// The cloud provider cannot be turned off in place.
				Config:      config("    linux_pool = { node_count = 1 }\n    cloud_provider = { enabled = false }"),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)Cloud Provider Cannot Be Turned On or Off in Place.*from true to false`),
			},
			{
				// Its release's minor is Kubernetes'.
				Config:      config("    linux_pool = { node_count = 1 }\n    cloud_provider = { version = \"v1.36.11\" }"),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)Cloud Provider Version of Another Minor.*v1\.36\.11 is for Kubernetes 1\.36`),
			},
			{
				// No credential from the control planes: the error says what to check.
				SkipFunc: onlyTestServer,
				PreConfig: inject(func() *armtest.Fault {
					return armServer.FailRequests(armtest.Match{Method: http.MethodPost, Path: armtest.InGroup(group, `/runCommand$`)}, http.StatusForbidden,
						"AuthorizationFailed", "The client does not have authorization to perform action "+
							"'Microsoft.Compute/virtualMachines/runCommand/action'.")
				}),
				Config: config("    linux_pool = { node_count = 2 }"),
				ExpectError: regexp.MustCompile(`(?s)Cannot Reach the Cluster.*run command on its\s+control planes, and none answered:.*` +
					`AuthorizationFailed.*Virtual\s+Machine\s+Contributor`),
			},
			{
				// Compute has no capacity for the third control plane: its VM is left Failed.
				SkipFunc: onlyTestServer,
				PreConfig: inject(func() *armtest.Fault {
					return armServer.FailAllocation(armtest.Match{Method: http.MethodPut, Path: armtest.InGroup(group, `/virtualMachines/acc-master-2$`), Times: 1})
				}),
				Config:      three,
				ExpectError: regexp.MustCompile(`(?s)Cannot Add Control Planes.*AllocationFailed`),
			},
			{
				// The next apply makes the Failed one again, and adds what is missing.
				PreConfig: clearFaults,
				Config:    three,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("kubewin_cluster.test", plancheck.ResourceActionUpdate),
				}},
				Check: resource.ComposeTestCheckFunc(nodes(2), controlPlanes(3)),
			},
			{
				// A control plane deleted out of band is made again in place.
				PreConfig: func() {
					p, err := vms.BeginDelete(context.Background(), group, "acc-master-1", nil)
					if err == nil {
						_, err = p.PollUntilDone(context.Background(), nil)
					}
					if err != nil {
						t.Fatal(err)
					}
				},
				Config: three,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("kubewin_cluster.test", plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue("kubewin_cluster.test", tfjsonpath.New("azure").AtMapKey("masters").AtMapKey("count"),
						knownvalue.Int64Exact(3)),
				}},
				Check: resource.ComposeTestCheckFunc(nodes(2), controlPlanes(3)),
			},
			{
				// Azure File turned off in place: its objects and the identity's storage role go.
				Config: config("    linux_pool = { node_count = 2 }\n    masters = { count = 3 }\n    storage = { azure_file = false }"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("kubewin_cluster.test", plancheck.ResourceActionUpdate),
				}},
				Check: cloudProvider(false),
			},
			{
				Config:      config("    linux_pool = { node_count = 2 }\n    masters = { count = 1 }"),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)Control Planes Cannot Be Removed.*from 3 to 1`),
			},
			{
				// The admin credential reaches another provider for the run, never the
				// cluster's state.
				Config: three + `
ephemeral "kubewin_cluster_credentials" "admin" {
  cluster_id = kubewin_cluster.test.id
}

provider "echo" {
  data = ephemeral.kubewin_cluster_credentials.admin
}

resource "echo" "admin" {}
`,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("echo.admin", tfjsonpath.New("data").AtMapKey("client_key"),
						knownvalue.StringRegexp(regexp.MustCompile(`-----BEGIN EC PRIVATE KEY-----`))),
					statecheck.ExpectKnownValue("echo.admin", tfjsonpath.New("data").AtMapKey("host"), knownvalue.StringRegexp(endpoint)),
				},
			},
			{
				// A Windows pool joins the cluster.
				SkipFunc: func() (bool, error) { return image == "", nil },
				Config: three + fmt.Sprintf(`
resource "kubewin_windows_node_pool" "win" {
  name       = "win"
  cluster_id = kubewin_cluster.test.id
  node_count = 1
  azure {
    resource_group_name = %q
    location            = %q
    vm_size             = "Standard_D4s_v5"
    subnet_id           = kubewin_cluster.test.azure.agent_subnet_id
    image_id            = %q
  }
}
`, group, tg.Location, image),
				Check: func(s *terraform.State) error {
					id := s.RootModule().Resources["kubewin_cluster.test"].Primary.ID
					if got := readyNodes(t, clusterAccess(t, tg.Client, id)); got["linux"] != 2 || got["windows"] != 1 {
						return fmt.Errorf("Ready nodes %v, want 2 Linux and 1 Windows", got)
					}
					return nil
				},
			},
		},
	})
}

// checkCloudProvider checks an azure cluster's cloud provider: its identity has its roles on
// the resource group (a check of the test server's records), the first control plane's
// azure.json (read by a run command, as an operator would) names the identity, its tenant and
// the cluster's load balancer, and the components run the version's images.
func checkCloudProvider(t *testing.T, tg *azureacc.Target, id, group, version string, azureFile bool) error {
	t.Helper()
	ctx := context.Background()
	c := &azure.Cluster{Client: tg.Client, Spec: azure.ClusterSpec{Name: "acc", ResourceGroup: group,
		CloudProvider: &azure.CloudProviderSpec{Version: version}}}
	cp, err := c.CloudProvider(ctx)
	if err != nil {
		return err
	}
	if armServer != nil {
		want := slices.Clone(azure.CloudProviderRoles)
		if azureFile {
			want = append(want, azure.StorageAccountContributor)
		}
		got := armServer.RoleAssignments(group)
		for _, r := range want {
			if !slices.ContainsFunc(got, func(a armtest.RoleAssignment) bool {
				return a.Role == r.Name && a.PrincipalID == cp.Identity.PrincipalID
			}) {
				return fmt.Errorf("role assignments %+v: no %s of principal %s", got, r.Name, cp.Identity.PrincipalID)
			}
		}
		if len(got) != len(want) {
			return fmt.Errorf("role assignments %+v, want %d", got, len(want))
		}
	}
	out, err := c.RunScript(ctx, 0, "cat "+azure.CloudConfigPath)
	if err != nil {
		return err
	}
	// The run command's message: "Enable succeeded:", then the script's [stdout] and [stderr].
	_, stdout, _ := strings.Cut(out, "[stdout]\n")
	stdout, _, _ = strings.Cut(stdout, "\n[stderr]")
	var cfg azure.CloudConfig
	if err := json.Unmarshal([]byte(stdout), &cfg); err != nil {
		return fmt.Errorf("%s on the first control plane: %w\n%s", azure.CloudConfigPath, err, out)
	}
	if cfg.UserAssignedIdentityID != cp.Identity.ClientID || cfg.TenantID != azure.Env("tenant_id") || cfg.LoadBalancerName != "acc-apiserver" ||
		cfg.Location != tg.Location {
		return fmt.Errorf("%s names identity %s, tenant %s, load balancer %s, location %s", azure.CloudConfigPath,
			cfg.UserAssignedIdentityID, cfg.TenantID, cfg.LoadBalancerName, cfg.Location)
	}
	if armServer != nil && cfg.ResourceManagerEndpoint != "https://"+armServer.MetadataHost() {
		return fmt.Errorf("%s names resource manager %s", azure.CloudConfigPath, cfg.ResourceManagerEndpoint)
	}
	kc, err := kubernetes.NewForConfig(clusterAccess(t, tg.Client, id).REST())
	if err != nil {
		return err
	}
	d, err := kc.AppsV1().Deployments(azureccm.Namespace).Get(ctx, azureccm.CloudControllerManager, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if img := d.Spec.Template.Spec.Containers[0].Image; img != cp.Images[azureccm.CloudControllerManager] {
		return fmt.Errorf("cloud-controller-manager runs %s", img)
	}
	// The CSI drivers that are on, and managed-csi the default class.
	for name, on := range map[string]bool{"disk.csi.azure.com": true, "file.csi.azure.com": azureFile} {
		if _, err := kc.StorageV1().CSIDrivers().Get(ctx, name, metav1.GetOptions{}); on != (err == nil) {
			return fmt.Errorf("CSIDriver %s, want it %t: %v", name, on, err)
		}
	}
	sc, err := kc.StorageV1().StorageClasses().Get(ctx, azurecsi.ManagedCSI, metav1.GetOptions{})
	if err != nil || sc.Annotations[azurecsi.DefaultClassAnnotation] != "true" {
		return fmt.Errorf("the default class %s: %v", azurecsi.ManagedCSI, err)
	}
	// The Linux agents' kubelets registered with the uninitialized taint (--cloud-provider=external
	// from kubeadm's flags), and the cloud-node-manager initialized them from their instance
	// metadata: provider ID of their scale set instance, region, instance type.
	nodes, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: corev1.LabelOSStable + "=linux"})
	if err != nil {
		return err
	}
	prefix := strings.ToLower("azure://" + groupID(tg.Client.SubscriptionID, group) + "/providers/Microsoft.Compute/virtualMachineScaleSets/acc-agents/")
	for _, n := range nodes.Items {
		if err := cloudInitialized(n, prefix, tg.Location); err != nil {
			return err
		}
	}
	return nil
}

// readURL reads a URL (a blob's SAS URI).
func readURL(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s%s: %s", req.URL.Host, req.URL.Path, resp.Status)
	}
	return io.ReadAll(resp.Body)
}

// groupID is a resource group's resource ID.
func groupID(subscription, group string) string {
	return "/subscriptions/" + subscription + "/resourceGroups/" + group
}

// cloudInitialized checks that the cloud-node-manager (on the test server, the simulated one,
// which says so) initialized a node of a scale set whose resource ID starts with prefix
// (lower-case): provider ID, region and instance type, no uninitialized taint left.
func cloudInitialized(n corev1.Node, prefix, location string) error {
	if !strings.HasPrefix(strings.ToLower(n.Spec.ProviderID), prefix) || n.Labels[corev1.LabelTopologyRegion] != location ||
		n.Labels[corev1.LabelInstanceTypeStable] == "" || (armServer != nil && n.Annotations[simcloud.SimulatedAnnotation] == "") ||
		slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == azureccm.UninitializedTaint }) {
		return fmt.Errorf("node %s is not initialized by the cloud provider: provider ID %q, labels %v, taints %v", n.Name, n.Spec.ProviderID,
			n.Labels, n.Spec.Taints)
	}
	return nil
}

// examples/acs-engine: the guides' windows.json through provider::kubewin::acs_apimodel.
func acsEngineExample(t *testing.T, work, _ string) ([]string, []string) {
	g := newClusterGroup(t, filepath.Join(work, "state"))
	acsExampleGroup = g
	return []string{"resource_group_name=" + g.name, "location=" + armServer.Location(), "windows_image_id=" + g.image,
		"kubernetes_version=" + clusterVersion(t)}, armServer.Env()
}

var acsExampleGroup *clusterGroup

// checkACSEngineExample checks the example's cluster: 3 control planes, Ready Linux and Windows
// nodes, and the guides' IIS workload on the Windows nodes.
func checkACSEngineExample(t *testing.T, c *cli) {
	_, out, err := c.try("output", "-raw", "endpoint")
	if err != nil {
		t.Fatal(out)
	}
	id := armServer.ResourceGroupID(acsExampleGroup.name) + "/providers/Microsoft.Network/loadBalancers/kubernetes-windows-apiserver"
	a := clusterAccess(t, azureClient(t), id)
	if "https://"+a.Endpoint != strings.TrimSpace(out) {
		t.Errorf("endpoint output %q, load balancer frontend %s", out, a.Endpoint)
	}
	if got := readyNodes(t, a); got["linux"] != 2 || got["windows"] != 3 {
		t.Errorf("Ready nodes %v, want 2 Linux (the default pool) and 3 Windows (the model's windowspool1)", got)
	}
	for i := range 3 {
		if ok, err := (&azure.Cluster{Client: azureClient(t), Spec: azure.ClusterSpec{Name: "kubernetes-windows",
			ResourceGroup: acsExampleGroup.name}}).ControlPlaneProvisioned(context.Background(), i); err != nil || !ok {
			t.Errorf("control plane %d: %v, %v", i, ok, err)
		}
	}
	// The guides' IIS Deployment, applied with kubectl, runs on the Windows nodes.
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["acs"] = &clientcmdapi.Cluster{Server: "https://" + a.Endpoint, CertificateAuthorityData: a.CACert}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: a.Cert, ClientKeyData: a.Key}
	kc.Contexts["acs"] = &clientcmdapi.Context{Cluster: "acs", AuthInfo: "admin"}
	kc.CurrentContext = "acs"
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}
	kubectl := testenv.MustBinary(t, "kubectl")
	if out, err := exec.Command(kubectl, "--kubeconfig", kubeconfig, "apply", "-f", filepath.Join(repoRoot,
		"examples/workloads/iis.yaml")).CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	client, err := kubernetes.NewForConfig(a.REST())
	if err != nil {
		t.Fatal(err)
	}
	// The cluster runs the cloud provider, so the Windows pool's kubelets run with
	// --cloud-provider=external too, and its node manager initialized every node: without it a
	// Windows node has no provider ID and no load balancer takes it.
	nodes, err := client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	scaleSets := strings.ToLower("azure://" + armServer.ResourceGroupID(acsExampleGroup.name) + "/providers/Microsoft.Compute/virtualMachineScaleSets/")
	for _, n := range nodes.Items {
		if _, master := n.Labels["node-role.kubernetes.io/control-plane"]; !master {
			if err := cloudInitialized(n, scaleSets, armServer.Location()); err != nil {
				t.Error(err)
			}
		}
	}
	deadline := time.Now().Add(time.Minute)
	for {
		pods, err := client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: "app=iis"})
		running := 0
		for _, p := range pods.Items {
			n, nerr := client.CoreV1().Nodes().Get(context.Background(), p.Spec.NodeName, metav1.GetOptions{})
			if p.Status.Phase == corev1.PodRunning && nerr == nil && n.Labels[corev1.LabelOSStable] == "windows" {
				running++
			}
		}
		if err == nil && running == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d IIS pods run on Windows nodes after a minute (%v), want 3", running, err)
		}
		time.Sleep(time.Second)
	}
	if out, err := exec.Command(kubectl, "--kubeconfig", kubeconfig, "delete", "-f", filepath.Join(repoRoot, "examples/workloads/iis.yaml"),
		"--wait=false").CombinedOutput(); err != nil {
		t.Fatalf("kubectl delete: %v\n%s", err, out)
	}
}

// checkACSEngineDestroyed checks that the example's destroy left nothing it made.
func checkACSEngineDestroyed(t *testing.T) {
	if left := acsExampleGroup.leftovers(); len(left) > 0 {
		t.Errorf("destroy left %v", left)
	}
}
