package provider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/azureimage"
	"github.com/kubewin/kubewin/internal/routetable"
	"github.com/kubewin/kubewin/internal/sim/simmachine"
	"github.com/kubewin/kubewin/internal/testkit/armtest"
	"github.com/kubewin/kubewin/internal/testkit/armtest/simboot"
	"github.com/kubewin/kubewin/internal/testkit/testenv"
	"github.com/kubewin/kubewin/provider/internal/azure"
	"github.com/kubewin/kubewin/provider/internal/azure/azureacc"
)

// The azure backend's tests run against one ARM + Entra test server for the test binary
// (internal/armtest), over HTTPS: the provider finds it through metadata_host and trusts its CA
// through SSL_CERT_FILE, as a user of a custom cloud would. Its scale-set instances boot as
// simulated machines running nodeboot with the custom data they were given, and join the local
// control plane of the test's kubewin_cluster for real.
//
// When the environment names an Azure subscription (azureacc.FromEnv: ARM_SUBSCRIPTION_ID and
// ARM_TEST_LOCATION, with a credential as the provider reads it), the suites that need only ARM
// run there instead (subscriptionTarget), each in its own tagged resource group; the suites that need the
// test server's simulated machines, images and faults are skipped.
var (
	armServer          *armtest.Server
	armBooter          *simboot.Booter
	subscriptionTarget *azureacc.Target
)

// startARM chooses the azure target: the subscription the environment names, or the test
// binary's ARM server. The server must start before anything reads the system's certificate
// pool, which SSL_CERT_FILE then names. The provider (running in this process) reaches the server
// through the ARM_* variables, as azurerm reads them: they are set here, once for every test, so
// that the tests can run in parallel (a parallel test cannot change the environment).
func startARM(dir string) error {
	var err error
	if subscriptionTarget, err = azureacc.FromEnv(context.Background()); err != nil || subscriptionTarget != nil {
		return err
	}
	bin, err := testenv.BinDir()
	if err != nil {
		return err
	}
	armBooter = &simboot.Booter{Dir: filepath.Join(dir, "instances"), Nodeboot: filepath.Join(dir, "nodeboot"), KubeBin: bin}
	// Operations are polled every 20 ms instead of every second (RetryAfter), and Azure's clock,
	// which refills the throttling budgets, runs as much faster (TimeScale): the parallel tests'
	// polls spend the subscription's read budget at the rate Azure's clients spend it.
	const retryAfter = 20 * time.Millisecond
	s, err := armtest.New(armtest.Options{Dir: dir, Booter: armBooter, RetryAfter: retryAfter, TimeScale: float64(time.Second / retryAfter)})
	if err != nil {
		return err
	}
	armServer = s
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		if err := os.Setenv(k, v); err != nil {
			return err
		}
	}
	return nil
}

var azureSeq atomic.Int64

// testServerOnly skips a test that needs the ARM test server's simulated machines, images or
// faults when the suites target real Azure.
func testServerOnly(t testing.TB) {
	t.Helper()
	if armServer == nil {
		t.Skip("needs the ARM test server (simulated machines joining a control plane in this process, seeded images, injected faults); " +
			"the azure suites target real Azure because ARM_SUBSCRIPTION_ID is set")
	}
}

// serverTarget is the test server as an azureacc target, made on first use.
var serverTarget = sync.OnceValues(func() (*azureacc.Target, error) {
	c := armServer.Credentials()
	return azureacc.New(context.Background(), azure.Config{
		SubscriptionID: c.SubscriptionID, TenantID: c.TenantID, ClientID: c.ClientID, ClientSecret: c.ClientSecret, MetadataHost: armServer.MetadataHost(),
	}, armServer.Location(), "")
})

// accTarget is where the suites that need only ARM run: real Azure when the environment names
// it, else the test server, whose ARM_* variables the provider reads (startARM).
func accTarget(t *testing.T) *azureacc.Target {
	t.Helper()
	if subscriptionTarget != nil {
		return subscriptionTarget
	}
	tg, err := serverTarget()
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// routeFixture is a resource group of a target, made through ARM for the test and deleted
// with everything in it when the test ends, with a virtual network and a route table
// associated with its subnet.
type routeFixture struct {
	target                        *azureacc.Target
	group, subnetID, routeTableID string
}

func newRouteFixture(t *testing.T, tg *azureacc.Target) *routeFixture {
	t.Helper()
	f := &routeFixture{target: tg, group: newTargetGroup(t, tg)}
	var err error
	if f.subnetID, f.routeTableID, err = tg.Network(context.Background(), f.group); err != nil {
		t.Fatal(err)
	}
	return f
}

// newTargetGroup is a resource group of a target for the test, deleted with everything in it
// when the test ends.
func newTargetGroup(t *testing.T, tg *azureacc.Target) string {
	t.Helper()
	group, err := tg.NewGroup(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tg.DeleteGroup(context.Background(), group); err != nil {
			t.Errorf("%v: delete it by hand or with make sweep-azure", err)
		}
	})
	return group
}

// azureFixture is a resource group of the test server with a virtual network, a route table
// associated with its node subnet, and two images of the control plane's version.
type azureFixture struct {
	group, subnetID, routeTableID string
	imageA, imageB                string
}

// newAzureFixture seeds the server for a test; the provider, in this process or another, reaches
// it through the ARM_* variables startARM set.
func newAzureFixture(t testing.TB, state string) *azureFixture {
	t.Helper()
	testServerOnly(t)
	f := &azureFixture{group: fmt.Sprintf("kubewin-test-%d", azureSeq.Add(1))}
	vnet, err := armServer.AddVirtualNetwork(armtest.VirtualNetwork{
		ResourceGroup: f.group, Name: "vnet", AddressPrefixes: []string{"10.240.0.0/16"},
		Subnets: map[string]string{"nodes": "10.240.0.0/24"},
	})
	if err != nil {
		t.Fatal(err)
	}
	f.subnetID = vnet + "/subnets/nodes"
	if f.routeTableID, err = armServer.AddRouteTable(f.group, "pods", f.subnetID); err != nil {
		t.Fatal(err)
	}
	b := testBackend(t, state)
	for i, img := range []*string{&f.imageA, &f.imageB} {
		tag := fmt.Sprintf("%s-%d", f.group, i)
		dir := testImage(t, b, tag)
		*img = fmt.Sprintf("%s/providers/Microsoft.Compute/galleries/kubewin/images/ws2022/versions/1.0.%d", armServer.ResourceGroupID(f.group), i)
		if err := armServer.AddImage(*img, imageTags(t, dir)); err != nil {
			t.Fatal(err)
		}
		armBooter.AddImage(*img, dir)
	}
	return f
}

// imageTags are the tags the Packer templates put on a published image.
func imageTags(t testing.TB, dir string) map[string]string {
	t.Helper()
	m, _, err := loadImage(dir)
	if err != nil {
		t.Fatal(err)
	}
	return azureimage.Tags(m)
}

// scaleSetID is the resource ID of scale set "win", the tests' pool's, in the fixture's group.
func (f *azureFixture) scaleSetID() string {
	return armServer.ResourceGroupID(f.group) + "/providers/Microsoft.Compute/virtualMachineScaleSets/win"
}

// poolBackend is the fixture as the pool acceptance test's backend.
func (f *azureFixture) poolBackend() poolBackend {
	return poolBackend{
		block: func(image string) string {
			return fmt.Sprintf(`  azure {
    resource_group_name = %q
    location            = %q
    vm_size             = "Standard_D4s_v5"
    subnet_id           = %q
    image_id            = %q
  }`, f.group, armServer.Location(), f.subnetID, image)
		},
		imageA: f.imageA, imageB: f.imageB,
		machines: func() ([]string, error) {
			var names []string
			for _, in := range armServer.Instances(f.scaleSetID()) {
				names = append(names, strings.ToLower(in.ComputerName))
			}
			return names, nil
		},
		importID:      f.scaleSetID(),
		writes:        f.scaleSetWrites,
		upgradeWrites: 1,
	}
}

// scaleSetWrites counts the ARM writes the fixture's scale sets were given (the test server is
// shared by the test binary's tests).
func (f *azureFixture) scaleSetWrites() int {
	n := 0
	for _, r := range armServer.Requests() {
		if r.ResourceType == "Microsoft.Compute/virtualMachineScaleSets" && r.Method != "GET" && r.Status < 400 &&
			strings.Contains(strings.ToLower(r.Path), "/resourcegroups/"+strings.ToLower(f.group)+"/") {
			n++
		}
	}
	return n
}

// The pool suite of the local backend, on a scale set through the ARM test server.
func TestAccWindowsNodePool_azure(t *testing.T) {
	t.Parallel()
	state, provider := testAccLocal(t)
	f := newAzureFixture(t, state)
	testAccWindowsNodePool(t, state, provider, f.poolBackend())
}

// azureClient is a client of the test server with its start-up app's credentials, for checks.
func azureClient(t *testing.T) *azure.Client {
	t.Helper()
	c, err := azure.New(context.Background(), azure.Config{
		SubscriptionID: armServer.SubscriptionID(), TenantID: armServer.TenantID(), MetadataHost: armServer.MetadataHost(),
		ClientID: armServer.Credentials().ClientID, ClientSecret: armServer.Credentials().ClientSecret,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func azureRoutesConfig(provider, tableID string, routes map[string][2]string) string {
	var b strings.Builder
	b.WriteString(provider + "locals {\n  nodes = {\n")
	for name, r := range routes {
		fmt.Fprintf(&b, "    %q = { pod_cidr = %q, ip = %q }\n", name, r[0], r[1])
	}
	fmt.Fprintf(&b, `  }
}

resource "kubewin_pod_route" "node" {
  for_each    = local.nodes
  name        = each.key
  destination = each.value.pod_cidr
  next_hop    = each.value.ip
  azure {
    route_table_id = %q
  }
}
`, tableID)
	return b.String()
}

// Routes in an Azure route table: created in parallel (written together per table), updated in place,
// removed, imported by resource ID; the table's limit holds at plan time.
func TestAccPodRoute_azure(t *testing.T) {
	t.Parallel()
	testAccPodRouteAzure(t, accTarget(t))
}

func testAccPodRouteAzure(t *testing.T, tg *azureacc.Target) {
	_, provider := testAccLocal(t)
	f := newRouteFixture(t, tg)
	table, err := tg.Client.OpenRouteTable(f.routeTableID)
	if err != nil {
		t.Fatal(err)
	}
	tableHas := func(want map[string][2]string) checkFunc {
		return func() error {
			rt, subnets, err := table.Read(context.Background())
			if err != nil {
				return err
			}
			if len(rt.Routes) != len(want) || len(subnets) != 1 {
				return fmt.Errorf("route table has %d routes and %d subnets, want %d and 1: %v", len(rt.Routes), len(subnets), len(want), rt.Routes)
			}
			for _, r := range rt.Routes {
				if w := want[r.Name]; w[0] != r.Destination.String() || w[1] != r.NextHop.String() {
					return fmt.Errorf("route %s = %s via %s, want %v", r.Name, r.Destination, r.NextHop, w)
				}
			}
			return nil
		}
	}
	five := map[string][2]string{}
	for i := range 5 {
		five[fmt.Sprintf("win%06d", i)] = [2]string{fmt.Sprintf("10.244.%d.0/24", i), fmt.Sprintf("10.240.0.%d", i+4)}
	}
	moved := map[string][2]string{"win000000": {"10.244.0.0/24", "10.240.0.4"}, "win000001": {"10.244.1.0/24", "10.240.0.9"}}
	tooMany := map[string][2]string{}
	for i := range routetable.MaxRoutes + 1 {
		tooMany[fmt.Sprintf("win%06d", i)] = [2]string{fmt.Sprintf("10.%d.%d.0/24", 200+i/256, i%256), "10.240.0.4"}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: azureRoutesConfig(provider, f.routeTableID, five), ConfigStateChecks: []statecheck.StateCheck{tableHas(five)}},
			{
				Config: azureRoutesConfig(provider, f.routeTableID, moved),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(`kubewin_pod_route.node["win000001"]`, plancheck.ResourceActionUpdate),
					plancheck.ExpectResourceAction(`kubewin_pod_route.node["win000004"]`, plancheck.ResourceActionDestroy),
				}},
				ConfigStateChecks: []statecheck.StateCheck{tableHas(moved)},
			},
			{
				Config: azureRoutesConfig(provider, f.routeTableID, tooMany), PlanOnly: true,
				ExpectError: regexp.MustCompile(`(?s)Route Does Not Fit the Route Table.*already holds 400 routes`),
			},
			{
				// Every route removed from the configuration leaves the table.
				Config:            provider,
				ConfigStateChecks: []statecheck.StateCheck{tableHas(nil)},
			},
		},
	})
}

// A route of an Azure route table is imported by its resource ID.
func TestAccPodRoute_azureImport(t *testing.T) {
	t.Parallel()
	_, provider := testAccLocal(t)
	f := newRouteFixture(t, accTarget(t))
	config := provider + fmt.Sprintf(`resource "kubewin_pod_route" "test" {
  name        = "win000000"
  destination = "10.244.0.0/24"
  next_hop    = "10.240.0.4"
  azure {
    route_table_id = %q
  }
}`, f.routeTableID)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: config},
			{ResourceName: "kubewin_pod_route.test", ImportState: true, ImportStateVerify: true, ImportStateId: f.routeTableID + "/routes/win000000",
				Config: config},
		},
	})
}

// A pool whose image is shared from a gallery of another tenant: without that tenant in
// auxiliary_tenant_ids the plan fails naming it, as ARM serves the image only to a token of its
// tenant; with it, the scale set is made from the image (ARM checks the auxiliary token) and its
// node joins.
func TestAccWindowsNodePool_azureAuxiliaryTenant(t *testing.T) {
	t.Parallel()
	state, provider := testAccLocal(t)
	f := newAzureFixture(t, state)
	other := armServer.AddTenant(armtest.Tenant{ClientIDs: []string{armServer.Credentials().ClientID}})
	dir := testImage(t, testBackend(t, state), f.group+"-shared")
	image := "/subscriptions/" + other.SubscriptionID +
		"/resourceGroups/gallery/providers/Microsoft.Compute/galleries/kubewin/images/ws2022/versions/1.0.0"
	if err := armServer.AddImage(image, imageTags(t, dir)); err != nil {
		t.Fatal(err)
	}
	armBooter.AddImage(image, dir)
	be := f.poolBackend()
	auxiliary := strings.Replace(provider, "provider \"kubewin\" {\n",
		fmt.Sprintf("provider \"kubewin\" {\n  azure {\n    auxiliary_tenant_ids = [%q]\n  }\n", other.ID), 1)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: poolConfig(provider, be, image, 1),
				ExpectError: regexp.MustCompile(`(?s)Invalid Image.*subscription\s+` + other.SubscriptionID + `\s+of\s+another\s+tenant.*add\s+` + other.ID +
					`\s+to\s+auxiliary_tenant_ids.*ARM_AUXILIARY_TENANT_IDS`),
			},
			{
				Config: poolConfig(auxiliary, be, image, 1),
				ConfigStateChecks: []statecheck.StateCheck{checkFunc(func() error {
					if ins := armServer.Instances(f.scaleSetID()); len(ins) != 1 || ins[0].ImageID != image {
						return fmt.Errorf("instances %+v, want one of image %s", ins, image)
					}
					return nil
				})},
			},
		},
	})
}

// A node that fails before it trusts the cluster fails the apply naming node, phase and code: it
// reports the failure to the cluster once it has discovered it, and as its serial console is
// SAC's (the ARM test server's rule for Windows), the pool runs nodeboot diagnose on it by run
// command, whose summary ends the error.
func TestAccWindowsNodePool_azureJoinFailure(t *testing.T) {
	t.Parallel()
	state, provider := testAccLocal(t)
	f := newAzureFixture(t, state)
	dir := testImage(t, testBackend(t, state), f.group+"-tampered")
	if err := os.WriteFile(filepath.Join(dir, simmachine.ImagePayloadDir, "k", "kubelet.exe"), []byte("tampered"), 0o755); err != nil {
		t.Fatal(err)
	}
	image := armServer.ResourceGroupID(f.group) + "/providers/Microsoft.Compute/galleries/kubewin/images/ws2022/versions/9.9.9"
	if err := armServer.AddImage(image, imageTags(t, dir)); err != nil {
		t.Fatal(err)
	}
	armBooter.AddImage(image, dir)
	be := f.poolBackend()
	config := strings.Replace(poolConfig(provider, be, image, 1), `drain      = { timeout = "1m" }`, `drain      = { timeout = "1m" }
  timeouts   = { create = "1m" }`, 1)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: config,
			// The instance's serial console is SAC's: its report and log come from nodeboot diagnose,
			// run by a run command once the wait has run out.
			ExpectError: regexp.MustCompile(`(?s)Node Failed to Join.*node win000000 failed in phase preflight with\s+code PayloadCorrupt.*` +
				`Diagnostics of win000000 \(nodeboot diagnose\):.*\[preflight\].*The full diagnostics bundle is on the\s+machine\s+at\s+` +
				`C:\\ProgramData\\kubewin\\nodeboot\\diagnostics\.tar\.gz`),
		}},
	})
}

// A 10-node pool one of whose machines fails its join, once, with a code that lies with the
// machine (another program listens on the kubelet's port: PortInUse) completes in one apply: that
// machine is replaced while the others join, and the apply ends with ten Ready nodes. The failure
// is in preflight, before the node trusts the cluster, and the Windows machine's serial console is
// SAC's: the pool learns of it from the report nodeboot writes after discovering the cluster.
func TestAccWindowsNodePool_azureJoinRetried(t *testing.T) {
	t.Parallel()
	state, provider := testAccLocal(t)
	f := newAzureFixture(t, state)
	be := f.poolBackend()
	var faulty atomic.Int32
	armBooter.SetFault(func(in armtest.Instance, m *simmachine.Machine) {
		if strings.EqualFold(in.ScaleSetID, f.scaleSetID()) && in.InstanceID == "3" {
			m.PortsInUse = []int{10250}
			faulty.Add(1)
		}
	})
	t.Cleanup(func() { armBooter.SetFault(nil) })
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			// Within a timeout that a failure seen only at the deadline would not meet.
			Config: poolConfigWith(provider, be, f.imageA, 10, `  timeouts = { create = "3m" }
`),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("kubewin_windows_node_pool.win", tfjsonpath.New("nodes"), knownvalue.ListSizeExact(10)),
				checkFunc(func() error {
					names, err := be.machines()
					if err != nil {
						return err
					}
					if faulty.Load() != 1 || len(names) != 10 || slices.Contains(names, "win000003") {
						return fmt.Errorf("faulty machines booted: %d; instances %v: want 10, without win000003", faulty.Load(), names)
					}
					return nil
				}),
			},
		}},
	})
}

// ARM faults: throttling with Retry-After and server errors are retried; an operation that ends
// Failed fails the apply with ARM's error, and the next apply repairs the pool without duplicates.
func TestAccWindowsNodePool_azureFaults(t *testing.T) {
	t.Parallel()
	state, provider := testAccLocal(t)
	f := newAzureFixture(t, state)
	be := f.poolBackend()
	scaleSet := armtest.InGroup(f.group, `/virtualMachineScaleSets/win$`)
	var faults []*armtest.Fault
	instances := func(want int) checkFunc {
		return func() error {
			for _, fault := range faults {
				fault.Remove()
			}
			if ms, _ := be.machines(); len(ms) != want {
				return fmt.Errorf("%d instances, want %d: %v", len(ms), want, ms)
			}
			return nil
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				PreConfig: func() {
					faults = []*armtest.Fault{
						armServer.Throttle(armtest.Match{Method: "PUT", Path: scaleSet, Times: 2}, 300*time.Millisecond),
						armServer.FailRequests(armtest.Match{Method: "GET", Path: armtest.InGroup(f.group, `/virtualMachineScaleSets/win$|/virtualMachines$`),
							Times: 2}, 503, "ServiceUnavailable",
							"The service is temporarily unavailable."),
					}
				},
				Config: poolConfig(provider, be, f.imageA, 2),
				ConfigStateChecks: []statecheck.StateCheck{checkFunc(func() error {
					if faults[0].Hits() != 2 || faults[1].Hits() != 2 {
						return fmt.Errorf("faults hit %d and %d times, want 2 each", faults[0].Hits(), faults[1].Hits())
					}
					return nil
				}), instances(2)},
			},
			{
				PreConfig: func() {
					faults = []*armtest.Fault{armServer.FailOperations(armtest.Match{Method: "PATCH", Path: scaleSet, Times: 1}, "InternalExecutionError",
						"An internal execution error occurred. Please retry later.")}
				},
				Config: poolConfig(provider, be, f.imageA, 4),
				ExpectError: regexp.MustCompile(`(?s)Cannot Reconcile Node Pool.*Pool "win" did not reach node_count = 4: .*InternalExecutionError.*` +
					`apply\s+again\s+to\s+resume`),
			},
			{
				Config:            poolConfig(provider, be, f.imageA, 4),
				ConfigStateChecks: []statecheck.StateCheck{instances(4)},
			},
		},
	})
}

// Compute's failures to create machines, as Azure's operations end, and the next apply repairs the
// pool to exactly its count. A core quota refuses the scale-out (nothing is created) and
// AllocationFailed leaves Failed instances that never start (the next apply replaces them): each
// fails the apply with what to do. OSProvisioningTimedOut leaves one Failed instance that runs:
// its node joins, so the apply succeeds and later applies keep it. A preempted scale-out is sent
// again within the apply.
func TestAccWindowsNodePool_azureComputeFailures(t *testing.T) {
	state, provider := testAccLocal(t)
	f := newAzureFixture(t, state)
	be := f.poolBackend()
	scaleSet := armtest.InGroup(f.group, `/virtualMachineScaleSets/win$`)
	var fault *armtest.Fault
	var timedOut string // the instance whose provisioning timed out
	instances := func(want int) checkFunc {
		return func() error {
			if ms, _ := be.machines(); len(ms) != want {
				return fmt.Errorf("%d instances, want %d: %v", len(ms), want, ms)
			}
			return nil
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: poolConfig(provider, be, f.imageA, 1), ConfigStateChecks: []statecheck.StateCheck{instances(1)}},
			{
				// 1 machine of 4 vCPUs runs; 2 more need 8 against a limit of 8.
				PreConfig: func() { armServer.LimitCores("standardDSv5Family", 8) },
				Config:    poolConfig(provider, be, f.imageA, 3),
				ExpectError: regexp.MustCompile(`(?s)Azure vCPU Quota Exceeded.*OperationNotAllowed.*standardDSv5Family Cores quota.*` +
					`Current Limit: 8, Current Usage: 4, Additional Required: 8.*Request\s+a\s+quota\s+increase`),
			},
			{
				PreConfig: func() {
					armServer.LimitCores("standardDSv5Family", -1)
					fault = armServer.FailAllocation(armtest.Match{Method: "PATCH", Path: scaleSet, Times: 1})
				},
				Config: poolConfig(provider, be, f.imageA, 3),
				ExpectError: regexp.MustCompile(`(?s)Azure Has No Capacity for the VM Size.*AllocationFailed.*` +
					`Apply\s+again\s+later:\s+the\s+next\s+apply\s+removes\s+the\s+machines`),
			},
			{
				PreConfig: func() {
					fault = armServer.TimeOutProvisioning(armtest.Match{Method: "PATCH", Path: scaleSet, Times: 1})
				},
				Config: poolConfig(provider, be, f.imageA, 3),
				ConfigStateChecks: []statecheck.StateCheck{instances(3), checkFunc(func() error {
					// The first apply's instance, then the two the timed-out scale-out added (in instance ID
					// order): the first of those is the one whose provisioning timed out.
					ins := armServer.Instances(f.scaleSetID())
					if fault.Hits() != 1 || len(ins) != 3 {
						return fmt.Errorf("the time-out hit %d scale-outs, want 1; %d instances, want 3", fault.Hits(), len(ins))
					}
					timedOut = strings.ToLower(ins[1].ComputerName)
					return nil
				})},
			},
			{
				// The machine whose provisioning timed out runs and its node is Ready: it stays.
				Config: poolConfig(provider, be, f.imageA, 3),
				ConfigStateChecks: []statecheck.StateCheck{instances(3), checkFunc(func() error {
					if ms, _ := be.machines(); !slices.Contains(ms, timedOut) {
						return fmt.Errorf("the instance whose provisioning timed out, %s, was replaced though it runs: %v", timedOut, ms)
					}
					return nil
				})},
			},
			{
				PreConfig: func() { fault = armServer.PreemptOperations(armtest.Match{Method: "PATCH", Path: scaleSet, Times: 1}) },
				Config:    poolConfig(provider, be, f.imageA, 4),
				ConfigStateChecks: []statecheck.StateCheck{instances(4), checkFunc(func() error {
					if fault.Hits() != 1 {
						return fmt.Errorf("the preemption hit %d scale-outs, want 1", fault.Hits())
					}
					return nil
				})},
			},
		},
	})
}

// A new admin_password_wo_version on an existing pool is refused at plan time: Azure sets the
// administrator's password only when it creates the scale set, so the new one would be ignored.
func TestAccWindowsNodePool_azurePasswordVersion(t *testing.T) {
	t.Parallel()
	state, provider := testAccLocal(t)
	f := newAzureFixture(t, state)
	be := f.poolBackend()
	config := func(version int) string {
		block := fmt.Sprintf(`    admin_password_wo         = "Correct-Horse-%d"
    admin_password_wo_version = %d
    image_id            =`, version, version)
		return strings.Replace(poolConfig(provider, be, f.imageA, 0), `    image_id            =`, block, 1)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: config(1), ConfigStateChecks: []statecheck.StateCheck{statecheck.ExpectKnownValue("kubewin_windows_node_pool.win",
				tfjsonpath.New("azure").AtMapKey("admin_password_wo_version"), knownvalue.Int64Exact(1))}},
			{Config: config(2), PlanOnly: true, ExpectError: regexp.MustCompile(`(?s)Setting Cannot Change on an Existing Pool.*` +
				`changes\s+from\s+1\s+to\s+2.*` +
				`Keep\s+azure.admin_password_wo_version\s+=\s+1.*add\s+a\s+kubewin_windows_node_pool\s+with\s+another\s+name`)},
		},
	})
}

// An image whose tags name no runtime is refused naming the tag and image_manifest.
func TestAzureMachinesNoRuntime(t *testing.T) {
	m := &nodePoolModel{NetworkMode: types.StringValue("l2bridge"), Azure: &azurePoolModel{
		ImageID: types.StringValue("/subscriptions/x/images/ws"), Tags: types.MapNull(types.StringType), Zones: types.ListNull(types.StringType),
	}}
	_, diags := azureMachines(context.Background(), m, &v1alpha1.ImageManifest{})
	if len(diags) != 1 || diags[0].Summary() != "Invalid Image" ||
		!strings.Contains(diags[0].Detail(), "The image /subscriptions/x/images/ws names no container runtime. Give it the kubewin.io/runtime tag") ||
		!strings.Contains(diags[0].Detail(), "set azure.image_manifest") {
		t.Fatalf("diagnostics: %v", diags)
	}
}
