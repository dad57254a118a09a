package provider

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubewin/kubewin/provider/internal/azure"
)

// What a change of each class of azure pool setting does to the scale set, read back from the
// ARM test server: in place (the scale set itself changes, no node is replaced), surge-first (the
// scale set's model takes the new value and the nodes are replaced by nodes made with it), or
// refused at plan time (the scale set is left as it is).

// vmss and vmssVM shorten the scale set checks' signatures.
type (
	vmss   = armcompute.VirtualMachineScaleSet
	vmssVM = armcompute.VirtualMachineScaleSetVM
)

// scaleSetClient reads the test server's scale sets, as a user's tools would.
func scaleSetClient(t *testing.T) *armcompute.ClientFactory {
	t.Helper()
	ctx := context.Background()
	cfg := azure.Config{
		SubscriptionID: armServer.SubscriptionID(), TenantID: armServer.TenantID(), MetadataHost: armServer.MetadataHost(),
		ClientID: armServer.Credentials().ClientID, ClientSecret: armServer.Credentials().ClientSecret,
	}
	cl, err := cfg.Cloud(ctx, armServer.HTTPClient())
	if err != nil {
		t.Fatal(err)
	}
	opts := azcore.ClientOptions{Cloud: cl, Transport: armServer.HTTPClient()}
	cred, err := cfg.Credential(opts, true)
	if err != nil {
		t.Fatal(err)
	}
	f, err := armcompute.NewClientFactory(cfg.SubscriptionID, cred, &arm.ClientOptions{ClientOptions: opts})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// scaleSetCheck reads the fixture's scale set "win" and its instances and checks them.
func (f *azureFixture) scaleSetCheck(t *testing.T, check func(ss *vmss, vms []*vmssVM) error) checkFunc {
	c := scaleSetClient(t)
	return func() error {
		ctx := context.Background()
		ss, err := c.NewVirtualMachineScaleSetsClient().Get(ctx, f.group, "win", nil)
		if err != nil {
			return err
		}
		var vms []*vmssVM
		pager := c.NewVirtualMachineScaleSetVMsClient().NewListPager(f.group, "win", nil)
		for pager.More() {
			page, err := pager.NextPage(ctx)
			if err != nil {
				return err
			}
			vms = append(vms, page.Value...)
		}
		return check(&ss.VirtualMachineScaleSet, vms)
	}
}

// azureSettingsConfig is a pool of count nodes with extra arguments in its azure block.
func (f *azureFixture) settingsConfig(provider string, count int, extra string) string {
	be := f.poolBackend()
	return strings.Replace(poolConfig(provider, be, f.imageA, count), `    image_id            =`, extra+"\n    image_id            =", 1)
}

func computerNames(vms []*vmssVM) []string {
	var out []string
	for _, vm := range vms {
		out = append(out, strings.ToLower(*vm.Properties.OSProfile.ComputerName))
	}
	slices.Sort(out)
	return out
}

func derefs(ps []*string) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = deref(p)
	}
	return out
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// Tags and added zones change the scale set in place: its tags are replaced (a removed tag goes),
// its zones grow, no node is replaced, and a node added later goes to the new zone. Dropping a zone
// is refused at plan time.
func TestAccWindowsNodePool_azureInPlace(t *testing.T) {
	t.Parallel()
	state, provider := testAccLocal(t)
	f := newAzureFixture(t, state)
	var first []string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: f.settingsConfig(provider, 1, `    tags  = { team = "windows", cost = "a" }
    zones = ["1"]`),
				ConfigStateChecks: []statecheck.StateCheck{f.scaleSetCheck(t, func(_ *vmss, vms []*vmssVM) error {
					first = computerNames(vms)
					return nil
				})},
			},
			{
				Config: f.settingsConfig(provider, 2, `    tags  = { team = "windows", owner = "ops" }
    zones = ["1", "2"]`),
				ConfigStateChecks: []statecheck.StateCheck{f.scaleSetCheck(t, func(ss *vmss, vms []*vmssVM) error {
					tags := map[string]string{}
					for k, v := range ss.Tags {
						tags[k] = deref(v)
					}
					want := map[string]string{azure.TagPool: "win", azure.TagManagedBy: "kubewin", tagClusterID: tags[tagClusterID],
						"team": "windows", "owner": "ops"}
					if !maps.Equal(tags, want) {
						return fmt.Errorf("scale set tags %v, want %v", tags, want)
					}
					if zones := fmt.Sprint(derefs(ss.Zones)); zones != "[1 2]" {
						return fmt.Errorf("scale set zones %s, want [1 2]", zones)
					}
					names := computerNames(vms)
					if len(names) != 2 || names[0] != first[0] {
						return fmt.Errorf("instances %v: want %s kept and one added", names, first[0])
					}
					for _, vm := range vms {
						if strings.EqualFold(*vm.Properties.OSProfile.ComputerName, names[1]) && fmt.Sprint(derefs(vm.Zones)) != "[2]" {
							return fmt.Errorf("instance %s added in zones %v, want [2]", names[1], derefs(vm.Zones))
						}
					}
					return nil
				})},
			},
			{
				Config: f.settingsConfig(provider, 2, `    tags  = { team = "windows", owner = "ops" }
    zones = ["2"]`),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)Zones Can Only Be Added.*drops\s+zones\s+"1".*add\s+a\s+kubewin_windows_node_pool\s+with\s+another\s+name`),
			},
		},
	})
}

// The VM size, accelerated networking, the OS disk and the spot price replace the nodes surge-first with the new settings in the scale
// set's model, and the new nodes are made with them. An evicted Spot instance is replaced by the next apply.
func TestAccWindowsNodePool_azureSurgeFirst(t *testing.T) {
	t.Parallel()
	state, provider := testAccLocal(t)
	f := newAzureFixture(t, state)
	admin := adminClient(t, testBackend(t, state), "pooltest")
	replaced := strings.Replace(f.settingsConfig(provider, 1, `    priority                       = "Spot"
    max_bid_price                  = 0.75
    os_disk_caching                = "ReadWrite"
    os_disk_size_gb                = 128
    os_disk_storage_account_type   = "Premium_LRS"
    accelerated_networking_enabled = true`), `"Standard_D4s_v5"`, `"Standard_D8s_v5"`, 1)
	var first []string
	var evicted string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: f.settingsConfig(provider, 1, `    priority        = "Spot"
    max_bid_price   = 0.5
    os_disk_caching = "ReadOnly"
    os_disk_size_gb = 64`),
				ConfigStateChecks: []statecheck.StateCheck{f.scaleSetCheck(t, func(_ *vmss, vms []*vmssVM) error {
					first = computerNames(vms)
					return nil
				})},
			},
			{
				Config: replaced,
				ConfigStateChecks: []statecheck.StateCheck{f.scaleSetCheck(t, func(ss *vmss, vms []*vmssVM) error {
					vp := ss.Properties.VirtualMachineProfile
					disk := vp.StorageProfile.OSDisk
					var storage armcompute.StorageAccountTypes
					if disk.ManagedDisk != nil {
						storage = deref(disk.ManagedDisk.StorageAccountType)
					}
					got := fmt.Sprintf("price %v, caching %v, size %v, storage %v", deref(vp.BillingProfile.MaxPrice), deref(disk.Caching),
						deref(disk.DiskSizeGB), storage)
					if want := "price 0.75, caching ReadWrite, size 128, storage Premium_LRS"; got != want {
						return fmt.Errorf("scale set model: %s, want %s", got, want)
					}
					nic := vp.NetworkProfile.NetworkInterfaceConfigurations[0].Properties
					if deref(ss.SKU.Name) != "Standard_D8s_v5" || !deref(nic.EnableAcceleratedNetworking) {
						return fmt.Errorf("scale set model: size %s, accelerated networking %v", deref(ss.SKU.Name), deref(nic.EnableAcceleratedNetworking))
					}
					if names := computerNames(vms); len(names) != 1 || names[0] == first[0] {
						return fmt.Errorf("instances %v, want %v replaced by one new instance", names, first)
					}
					d := vms[0].Properties.StorageProfile.OSDisk
					if deref(d.Caching) != armcompute.CachingTypesReadWrite || deref(d.DiskSizeGB) != 128 || deref(vms[0].SKU.Name) != "Standard_D8s_v5" {
						return fmt.Errorf("new instance: OS disk caching %v, size %v; VM size %s", deref(d.Caching), deref(d.DiskSizeGB), deref(vms[0].SKU.Name))
					}
					return nil
				})},
			},
			{
				// Azure evicts the Spot instance (the Delete eviction policy deletes it): the next
				// apply adds one in its place, as the plan's count drift says, and removes the old
				// instance's Node.
				PreConfig: func() {
					ins := armServer.Instances(f.scaleSetID())
					if len(ins) != 1 {
						t.Fatalf("%d instances before the eviction, want 1", len(ins))
					}
					evicted = strings.ToLower(ins[0].ComputerName)
					if err := armServer.Evict(f.scaleSetID(), ins[0].InstanceID); err != nil {
						t.Fatal(err)
					}
				},
				Config: replaced,
				ConfigStateChecks: []statecheck.StateCheck{f.scaleSetCheck(t, func(_ *vmss, vms []*vmssVM) error {
					if names := computerNames(vms); len(names) != 1 || names[0] == evicted {
						return fmt.Errorf("instances %v, want one in place of the evicted %s", names, evicted)
					}
					if _, err := admin().CoreV1().Nodes().Get(context.Background(), evicted, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
						return fmt.Errorf("the evicted instance's Node %s: %v, want it removed", evicted, err)
					}
					return nil
				})},
			},
			{
				// An OS disk setting once set cannot go back to unset: the scale set's model would keep it.
				Config: strings.Replace(f.settingsConfig(provider, 1, `    priority                       = "Spot"
    max_bid_price                  = 0.75
    os_disk_size_gb                = 128
    os_disk_storage_account_type   = "Premium_LRS"
    accelerated_networking_enabled = true`), `"Standard_D4s_v5"`, `"Standard_D8s_v5"`, 1),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)Setting Cannot Be Removed.*azure.os_disk_caching\s+was\s+"ReadWrite"\s+and\s+is\s+now\s+unset`),
			},
		},
	})
}

// Settings the scale set cannot take are refused at plan time, naming what to do instead, and the
// scale set is left as it is.
func TestAccWindowsNodePool_azureRefused(t *testing.T) {
	t.Parallel()
	state, provider := testAccLocal(t)
	f := newAzureFixture(t, state)
	base := f.settingsConfig(provider, 1, `    admin_username = "kubewin"`)
	refused := func(before, after, attr string) resource.TestStep {
		return resource.TestStep{
			Config:   strings.Replace(base, before, after, 1),
			PlanOnly: true,
			ExpectError: regexp.MustCompile(`(?s)Setting Cannot Change on an Existing Pool.*` + regexp.QuoteMeta(attr) +
				`\s+changes\s+from.*add\s+a\s+kubewin_windows_node_pool\s+with\s+another\s+name`),
		}
	}
	var first []string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: base, ConfigStateChecks: []statecheck.StateCheck{f.scaleSetCheck(t, func(_ *vmss, vms []*vmssVM) error {
				first = computerNames(vms)
				return nil
			})}},
			refused(`resource_group_name = "`+f.group, `resource_group_name = "`+f.group+`-b`, "azure.resource_group_name"),
			refused(`location            = "`, `location            = "x`, "azure.location"),
			refused(`subnet_id           = "`+f.subnetID, `subnet_id           = "`+f.subnetID+`b`, "azure.subnet_id"),
			refused(`admin_username = "kubewin"`, `admin_username = "kubeadmin"`, "azure.admin_username"),
			refused(`admin_username = "kubewin"`, `admin_username = "kubewin"
    priority       = "Spot"`, "azure.priority"),
			refused(`admin_username = "kubewin"`, `admin_username = "kubewin"
    scale_set_name = "other"`, "azure.scale_set_name"),
			refused(`  name       = "win"`, `  name       = "win"
  node_name_prefix = "other"`, "node_name_prefix"),
			{
				Config: base,
				ConfigStateChecks: []statecheck.StateCheck{f.scaleSetCheck(t, func(ss *vmss, vms []*vmssVM) error {
					if names := computerNames(vms); !slices.Equal(names, first) {
						return fmt.Errorf("instances %v, want %v unchanged", names, first)
					}
					if deref(ss.Location) != armServer.Location() || deref(ss.Properties.VirtualMachineProfile.Priority) != "" {
						return fmt.Errorf("scale set changed: location %s, priority %s", deref(ss.Location), deref(ss.Properties.VirtualMachineProfile.Priority))
					}
					return nil
				})},
			},
		},
	})
}
