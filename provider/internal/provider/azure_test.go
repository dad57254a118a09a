package provider

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kubewin/kubewin/internal/armtest"
	"github.com/kubewin/kubewin/internal/armtest/simboot"
	"github.com/kubewin/kubewin/provider/internal/azure"
)

// The azure backend's tests run against one ARM + Entra test server for the test binary
// (internal/armtest), over HTTPS: the provider finds it through metadata_host and trusts its CA
// through SSL_CERT_FILE, as a user of a custom cloud would. Its scale-set instances boot as
// simulated machines running nodeboot with the custom data they were given, and join the local
// control plane of the test's kubewin_cluster for real.
var (
	armServer *armtest.Server
	armBooter *simboot.Booter
)

// startARM starts the test binary's ARM server. It must run before anything reads the system's
// certificate pool, which SSL_CERT_FILE then names.
func startARM(dir string) error {
	armBooter = &simboot.Booter{Dir: filepath.Join(dir, "instances"), Nodeboot: filepath.Join(dir, "nodeboot")}
	s, err := armtest.New(armtest.Options{Dir: dir, Booter: armBooter, RetryAfter: 20 * time.Millisecond})
	if err != nil {
		return err
	}
	armServer = s
	return os.Setenv("SSL_CERT_FILE", s.CAFile())
}

var azureSeq atomic.Int64

// azureFixture is a resource group of the test server with a virtual network, a route table
// associated with its node subnet, and two images of the control plane's version.
type azureFixture struct {
	group, subnetID, routeTableID string
	imageA, imageB                string
}

// newAzureFixture seeds the server for a test and points the provider (running in this
// process) at it through ARM_* variables, as azurerm reads them.
func newAzureFixture(t *testing.T, state string) *azureFixture {
	t.Helper()
	for _, kv := range armServer.Env() {
		k, v, _ := strings.Cut(kv, "=")
		if k != "SSL_CERT_FILE" {
			t.Setenv(k, v)
		}
	}
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
func imageTags(t *testing.T, dir string) map[string]string {
	t.Helper()
	m, _, err := loadImage(dir)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		azure.TagWindowsBuild: fmt.Sprint(uint32(m.WindowsBuild)), azure.TagKubernetesVersion: m.KubernetesVersion,
		azure.TagRuntime: string(m.Runtime.Name), azure.TagRuntimeVersion: m.Runtime.Version,
	}
}

// scaleSetID is the resource ID of a pool's scale set in the fixture's group.
func (f *azureFixture) scaleSetID(name string) string {
	return armServer.ResourceGroupID(f.group) + "/providers/Microsoft.Compute/virtualMachineScaleSets/" + name
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
			for _, in := range armServer.Instances(f.scaleSetID("win")) {
				names = append(names, strings.ToLower(in.ComputerName))
			}
			return names, nil
		},
		importID: f.scaleSetID("win"),
		writes:   func() int { return armServer.Writes().ByType["Microsoft.Compute/virtualMachineScaleSets"] },
	}
}

// The pool suite of the local backend, on a scale set through the ARM test server.
func TestAccWindowsNodePool_azure(t *testing.T) {
	state, provider := testAccLocal(t)
	f := newAzureFixture(t, state)
	testAccWindowsNodePool(t, state, provider, f.poolBackend())
}
