package azure

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/kubewin/kubewin/internal/nodecmd"
	"github.com/kubewin/kubewin/internal/nodestatus"
	"github.com/kubewin/kubewin/internal/powershell"
	"github.com/kubewin/kubewin/provider/internal/pool"
)

// Machines is what a pool's scale set is made of. Names follow azurerm's
// azurerm_windows_virtual_machine_scale_set where it has one.
type Machines struct {
	ResourceGroup, Location, SubnetID string
	// VMSize is the scale set's SKU, e.g. Standard_D4s_v5.
	VMSize string
	// ImageID is a gallery image version, a gallery image (its latest version) or a managed image.
	ImageID       string
	AdminUsername string
	Zones         []string
	// IPForwarding lets the NICs receive pod traffic routed to the node (l2bridge, host-gateway).
	IPForwarding, AcceleratedNetworking bool
	OSDisk                              OSDisk
	// Spot makes the machines Azure Spot VMs, evicted (deleted) when Azure needs the capacity
	// or the price passes MaxBidPrice (-1: never for price).
	Spot        bool
	MaxBidPrice float64
	Tags        map[string]string
	// KubeletIdentityID is a user-assigned managed identity the machines carry, which their
	// kubelets pull from Azure Container Registry as; "" for none.
	KubeletIdentityID string
}

// OSDisk is the machines' OS disk.
type OSDisk struct {
	StorageAccountType string // Standard_LRS, StandardSSD_LRS, Premium_LRS, ...
	Caching            string // ReadWrite, ReadOnly, None
	SizeGB             int32  // 0: the image's size
}

// Digest identifies what existing instances keep when the scale set's model changes: the
// image and the machine settings. A change of it replaces the pool's nodes.
func (m Machines) Digest() string {
	b, _ := json.Marshal(struct {
		Image, Size            string
		IPForwarding, AccelNet bool
		OSDisk                 OSDisk
		Spot                   bool
		MaxBidPrice            float64
		KubeletIdentity        string `json:",omitempty"`
	}{m.ImageID, m.VMSize, m.IPForwarding, m.AcceleratedNetworking, m.OSDisk, m.Spot, m.MaxBidPrice, strings.ToLower(m.KubeletIdentityID)})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Tags kubewin puts on the scale sets it manages.
const (
	TagPool      = "kubewin.io/pool"
	TagManagedBy = "kubewin.io/managed-by"
)

// ScaleSet is a pool's machines on Azure: one Uniform scale set named after the pool, whose
// instances' computer names (prefix + 6 base-36 digits of the instance ID) are the node names.
// Uniform, because it deletes chosen instances in one call (deleteInstances), after the pool
// drained exactly those, and names computers deterministically. Manual upgrade policy: a model
// change (a new image, a new token) reaches only instances added after it.
type ScaleSet struct {
	Client *Client
	// Name is the scale set's name; Pool the pool it belongs to (its kubewin.io/pool tag).
	Name, Pool, ComputerNamePrefix string
	Machines                       Machines
	// AdminPassword is used when the scale set is created and never stored; empty: a random one.
	AdminPassword string

	mu  sync.Mutex
	ids map[string]string // computer name → instance ID, as last listed
}

var _ pool.Compute = (*ScaleSet)(nil)

// ID is the scale set's resource ID.
func (s *ScaleSet) ID() string {
	return resourceID{subscription: s.Client.SubscriptionID, group: s.Machines.ResourceGroup, typ: typeScaleSet, name: s.Name}.String()
}

func (s *ScaleSet) scaleSets() *armcompute.VirtualMachineScaleSetsClient {
	return s.Client.compute.NewVirtualMachineScaleSetsClient()
}

func (s *ScaleSet) vms() *armcompute.VirtualMachineScaleSetVMsClient {
	return s.Client.compute.NewVirtualMachineScaleSetVMsClient()
}

// ScaleSetTags reads the tags of a scale set by its resource ID.
func (c *Client) ScaleSetTags(ctx context.Context, id string) (map[string]string, error) {
	r, err := arm.ParseResourceID(id)
	if err != nil || !strings.EqualFold(r.ResourceType.String(), "Microsoft.Compute/virtualMachineScaleSets") {
		return nil, fmt.Errorf("%q is not a scale set's resource ID", id)
	}
	resp, err := c.compute.NewVirtualMachineScaleSetsClient().Get(ctx, r.ResourceGroupName, r.Name, nil)
	if err != nil {
		return nil, fmt.Errorf("read scale set %s: %w", id, err)
	}
	out := map[string]string{}
	for k, v := range resp.Tags {
		if v != nil {
			out[k] = *v
		}
	}
	return out, nil
}

// get reads the scale set: nil when it does not exist, an error when it is not this pool's.
func (s *ScaleSet) get(ctx context.Context) (*armcompute.VirtualMachineScaleSet, error) {
	resp, err := s.scaleSets().Get(ctx, s.Machines.ResourceGroup, s.Name, nil)
	if notFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read scale set %s: %w", s.ID(), err)
	}
	if resp.Tags[TagPool] == nil || *resp.Tags[TagPool] != s.Pool {
		return nil, fmt.Errorf("scale set %s exists but is not kubewin pool %s's (its %s tag is not %q): kubewin does not take over scale sets it "+
			"did not create; name the pool differently or import it", s.ID(), s.Pool, TagPool, s.Pool)
	}
	return &resp.VirtualMachineScaleSet, nil
}

// instance is a scale-set instance: whether it runs, and whether it has the scale set's latest
// model, or else what its own is made of.
type instance struct {
	id, name string
	running  bool
	deleting bool
	latest   bool
	made     machineKey
}

// machineKey is what a machine is made of, as an instance's own model shows it (a spot price
// shows in none): image, size, OS disk and primary NIC.
type machineKey struct {
	image, size, caching, storage, subnet string
	diskGB                                int32
	ipForwarding, accelerated             bool
}

// fits reports whether an instance made as have is made as want: OS disk settings want leaves
// unset (Azure's or the image's defaults) match any.
func (want machineKey) fits(have machineKey) bool {
	opt := func(w, h string) bool { return w == "" || strings.EqualFold(w, h) }
	return want.image == have.image && strings.EqualFold(want.size, have.size) && strings.EqualFold(want.subnet, have.subnet) &&
		want.ipForwarding == have.ipForwarding && want.accelerated == have.accelerated &&
		opt(want.caching, have.caching) && opt(want.storage, have.storage) && (want.diskGB == 0 || want.diskGB == have.diskGB)
}

// keyOf is what a machine of the given image, size, OS disk and NICs is made of.
func keyOf(image *armcompute.ImageReference, size *string, disk osDiskView,
	nics []*armcompute.VirtualMachineScaleSetNetworkConfiguration) machineKey {
	k := machineKey{
		image: imageKey(image), size: deref(size),
		caching: string(deref(disk.caching)), diskGB: deref(disk.sizeGB), storage: string(deref(disk.storage)),
	}
	for _, n := range nics {
		if p := n.Properties; p != nil && (len(nics) == 1 || deref(p.Primary)) {
			k.ipForwarding, k.accelerated = deref(p.EnableIPForwarding), deref(p.EnableAcceleratedNetworking)
			if len(p.IPConfigurations) > 0 && p.IPConfigurations[0].Properties != nil && p.IPConfigurations[0].Properties.Subnet != nil {
				k.subnet = deref(p.IPConfigurations[0].Properties.Subnet.ID)
			}
		}
	}
	return k
}

// osDiskView is an OS disk's settings, of a scale set's model or an instance's.
type osDiskView struct {
	caching *armcompute.CachingTypes
	sizeGB  *int32
	storage *armcompute.StorageAccountTypes
}

// instanceKey is what an instance is made of, by its own model.
func instanceKey(vm *armcompute.VirtualMachineScaleSetVM) machineKey {
	var size *string
	if vm.SKU != nil {
		size = vm.SKU.Name
	}
	var image *armcompute.ImageReference
	var disk osDiskView
	var nics []*armcompute.VirtualMachineScaleSetNetworkConfiguration
	if p := vm.Properties; p != nil {
		if sp := p.StorageProfile; sp != nil {
			image = sp.ImageReference
			if d := sp.OSDisk; d != nil {
				disk.caching, disk.sizeGB = d.Caching, d.DiskSizeGB
				if d.ManagedDisk != nil {
					disk.storage = d.ManagedDisk.StorageAccountType
				}
			}
		}
		if p.NetworkProfileConfiguration != nil {
			nics = p.NetworkProfileConfiguration.NetworkInterfaceConfigurations
		}
	}
	return keyOf(image, size, disk, nics)
}

// modelKey is what the scale set's model makes its instances of.
func modelKey(ss *armcompute.VirtualMachineScaleSet) machineKey {
	var size *string
	if ss.SKU != nil {
		size = ss.SKU.Name
	}
	var image *armcompute.ImageReference
	var disk osDiskView
	var nics []*armcompute.VirtualMachineScaleSetNetworkConfiguration
	if p := ss.Properties; p != nil && p.VirtualMachineProfile != nil {
		vp := p.VirtualMachineProfile
		if sp := vp.StorageProfile; sp != nil {
			image = sp.ImageReference
			if d := sp.OSDisk; d != nil {
				disk.caching, disk.sizeGB = d.Caching, d.DiskSizeGB
				if d.ManagedDisk != nil {
					disk.storage = d.ManagedDisk.StorageAccountType
				}
			}
		}
		if vp.NetworkProfile != nil {
			nics = vp.NetworkProfile.NetworkInterfaceConfigurations
		}
	}
	return keyOf(image, size, disk, nics)
}

// spotPrice is the scale set model's spot price, nil for regular machines.
func spotPrice(ss *armcompute.VirtualMachineScaleSet) *float64 {
	if p := ss.Properties; p != nil && p.VirtualMachineProfile != nil && p.VirtualMachineProfile.BillingProfile != nil {
		return p.VirtualMachineProfile.BillingProfile.MaxPrice
	}
	return nil
}

// instances lists the scale set's instances, with their power state when withView: only the
// instance view has it, and only List needs it (to tell stopped machines). Each list spends
// one call of Compute's HighCostGetVMScaleSet budgets, shared by the subscription in the region.
func (s *ScaleSet) instances(ctx context.Context, withView bool) ([]instance, error) {
	var out []instance
	var opts *armcompute.VirtualMachineScaleSetVMsClientListOptions
	if withView {
		opts = &armcompute.VirtualMachineScaleSetVMsClientListOptions{Expand: to.Ptr("instanceView")}
	}
	pager := s.vms().NewListPager(s.Machines.ResourceGroup, s.Name, opts)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if notFound(err) {
			return nil, nil // no scale set: no machines
		}
		if err != nil {
			return nil, fmt.Errorf("list the instances of scale set %s: %w", s.ID(), err)
		}
		for _, vm := range page.Value {
			in := instance{id: deref(vm.InstanceID), running: true, latest: true, made: instanceKey(vm)}
			if p := vm.Properties; p != nil {
				if p.OSProfile != nil {
					in.name = strings.ToLower(deref(p.OSProfile.ComputerName))
				}
				in.running, in.deleting = running(p), deref(p.ProvisioningState) == "Deleting"
				in.latest = p.LatestModelApplied == nil || *p.LatestModelApplied
			}
			out = append(out, in)
		}
	}
	s.mu.Lock()
	s.ids = map[string]string{}
	for _, in := range out {
		s.ids[in.name] = in.id
	}
	s.mu.Unlock()
	return out, nil
}

// running reports whether an instance runs or is still being created: not stopped,
// deallocated or deleted, and not failed unless its instance view says it runs. An instance whose
// provisioning Compute gave up on (OSProvisioningTimedOut) is Failed but runs, and "may still finish
// provisioning successfully" (the error's message): its node may join, and it is kept if so.
func running(p *armcompute.VirtualMachineScaleSetVMProperties) bool {
	powerRunning := false
	if p.InstanceView != nil {
		for _, st := range p.InstanceView.Statuses {
			switch deref(st.Code) {
			case "PowerState/stopped", "PowerState/stopping", "PowerState/deallocated", "PowerState/deallocating":
				return false
			case "PowerState/running":
				powerRunning = true
			}
		}
	}
	switch deref(p.ProvisioningState) {
	case "Deleting":
		return false
	case "Failed":
		return powerRunning
	}
	return true
}

func (s *ScaleSet) List(ctx context.Context) ([]pool.Machine, error) {
	ins, err := s.instances(ctx, true)
	if err != nil {
		return nil, err
	}
	out := make([]pool.Machine, 0, len(ins))
	for _, in := range ins {
		out = append(out, pool.Machine{Name: in.name, Running: in.running})
	}
	return out, nil
}

// Add raises the scale set's capacity by n with customData in its model — creating the scale
// set on the pool's first machines — in one ARM write, waits for the operation, and returns the
// new instances' names. A machine whose provisioning timed out is returned with the others: the
// pool's wait for its node tells whether it serves. The scale set names its instances, so named
// is not called: the names are known once Azure has answered.
func (s *ScaleSet) Add(ctx context.Context, n int, customData []byte, _ func([]string) error) ([]string, error) {
	before, err := s.instances(ctx, false)
	if err != nil {
		return nil, err
	}
	var existing, model *armcompute.VirtualMachineScaleSet
	err = preemptible(ctx, "scale out "+s.ID(), func() error {
		var err error
		existing, err = s.get(ctx)
		switch {
		case err != nil:
			return err
		case existing == nil:
			return s.create(ctx, n, customData)
		}
		capacity := int64(n)
		if existing.SKU != nil && existing.SKU.Capacity != nil {
			capacity += *existing.SKU.Capacity
		}
		tflog.Info(ctx, "scaling out scale set", map[string]any{"scale_set": s.ID(), "capacity": capacity})
		p, err := s.scaleSets().BeginUpdate(ctx, s.Machines.ResourceGroup, s.Name, s.update(existing.Identity, capacity, customData), nil)
		res, err := wait(ctx, s.Client, p, err)
		model = &res.VirtualMachineScaleSet
		return err
	})
	if provisioningTimedOut(err) {
		tflog.Warn(ctx, "Azure gave up waiting for a machine's provisioning (OSProvisioningTimedOut); it runs, and its node's join decides",
			map[string]any{"scale_set": s.ID(), "error": err.Error()})
		err = nil
	}
	err = s.Client.explainLinkedImage(ctx, explain(err, s.Machines, n), s.Machines.ImageID)
	// What was created, also when the operation failed part-way.
	after, listErr := s.instances(ctx, false)
	// A spot price shows in no instance's model: instances are upgraded only while it is unchanged.
	if err == nil && listErr == nil && model != nil && deref(spotPrice(existing)) == deref(spotPrice(model)) {
		err = s.upgradeCustomData(ctx, *model, after)
	}
	var added []string
	for _, in := range after {
		if !slices.ContainsFunc(before, func(b instance) bool { return b.id == in.id }) {
			added = append(added, in.name)
		}
	}
	slices.Sort(added)
	if err != nil {
		return added, fmt.Errorf("scale set %s: %w", s.ID(), err)
	}
	return added, listErr
}

// create creates the scale set with n machines.
func (s *ScaleSet) create(ctx context.Context, n int, customData []byte) error {
	tflog.Info(ctx, "creating scale set", map[string]any{"scale_set": s.ID(), "capacity": n})
	password := s.AdminPassword
	if password == "" {
		password = randomPassword()
	}
	return scaleSets.put(ctx, s.Client, s.Machines.ResourceGroup, s.Name, s.body(n, password, customData))
}

// upgradeCustomData brings to the scale set's latest model (manualupgrade) the instances of ins on
// an older one that are made as the latest makes them. Under the Manual upgrade policy each Add's
// custom data (a fresh join token) is a new model, and Compute refuses model changes once the
// instances reference 10 models (kubernetes-sigs/cluster-api-provider-azure#4958). Custom data is
// read at provisioning only ("Custom data is made available to the VM during first startup or
// setup, which is called provisioning", https://learn.microsoft.com/azure/virtual-machines/custom-data,
// which contrasts it with user data, the kind that "can be updated without stopping or reimaging
// the VM"): a running machine keeps what it booted with, a changed model reaches it only when it
// is reimaged (hashicorp/terraform-provider-azurerm#61), and manualupgrade is not a reimage (that
// is VirtualMachineScaleSets_Reimage, whose body carries the osProfile to provision again with,
// https://learn.microsoft.com/rest/api/compute/virtualmachinescalesets/reimage). Instances made otherwise (another image, size,
// OS disk or NIC), which a replacement is about to remove, are left as they are: upgrading them
// would reimage, resize or reconfigure them.
func (s *ScaleSet) upgradeCustomData(ctx context.Context, model armcompute.VirtualMachineScaleSet, ins []instance) error {
	want := modelKey(&model)
	var ids []string
	for _, in := range ins {
		if !in.latest && !in.deleting && want.fits(in.made) {
			ids = append(ids, in.id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	tflog.Info(ctx, "bringing scale set instances to the latest model", map[string]any{"scale_set": s.ID(), "instances": ids})
	p, err := s.scaleSets().BeginUpdateInstances(ctx, s.Machines.ResourceGroup, s.Name,
		armcompute.VirtualMachineScaleSetVMInstanceRequiredIDs{InstanceIDs: to.SliceOfPtrs(ids...)}, nil)
	if _, err = wait(ctx, s.Client, p, err); err != nil {
		return fmt.Errorf("bring instances %v of scale set %s to its latest model: %w", ids, s.ID(), err)
	}
	return nil
}

// imageKey identifies an image reference: its ID, or the marketplace image's names.
func imageKey(r *armcompute.ImageReference) string {
	if r == nil {
		return ""
	}
	if r.ID != nil {
		return strings.ToLower(*r.ID)
	}
	return strings.ToLower(strings.Join([]string{deref(r.Publisher), deref(r.Offer), deref(r.SKU), deref(r.Version)}, ":"))
}

// body is the scale set with capacity machines, their administrator's password and custom data.
func (s *ScaleSet) body(capacity int, password string, customData []byte) armcompute.VirtualMachineScaleSet {
	m := s.Machines
	vmss := armcompute.VirtualMachineScaleSet{
		Location: to.Ptr(m.Location),
		Tags:     s.tags(),
		SKU:      &armcompute.SKU{Name: to.Ptr(m.VMSize), Tier: to.Ptr("Standard"), Capacity: to.Ptr(int64(capacity))},
		Properties: &armcompute.VirtualMachineScaleSetProperties{
			OrchestrationMode: to.Ptr(armcompute.OrchestrationModeUniform),
			// Overprovisioned instances would boot, join and be deleted again.
			Overprovision: to.Ptr(false),
			// A single placement group (Uniform's default) holds at most 100 machines.
			SinglePlacementGroup: to.Ptr(false),
			UpgradePolicy:        &armcompute.UpgradePolicy{Mode: to.Ptr(armcompute.UpgradeModeManual)},
			VirtualMachineProfile: &armcompute.VirtualMachineScaleSetVMProfile{
				OSProfile: &armcompute.VirtualMachineScaleSetOSProfile{
					ComputerNamePrefix: to.Ptr(s.ComputerNamePrefix),
					AdminUsername:      to.Ptr(m.AdminUsername),
					AdminPassword:      to.Ptr(password),
					CustomData:         to.Ptr(base64.StdEncoding.EncodeToString(customData)),
					WindowsConfiguration: &armcompute.WindowsConfiguration{
						EnableAutomaticUpdates: to.Ptr(false),
						ProvisionVMAgent:       to.Ptr(true),
						PatchSettings:          &armcompute.PatchSettings{PatchMode: to.Ptr(armcompute.WindowsVMGuestPatchModeManual)},
					},
				},
				StorageProfile: s.storageProfile(),
				NetworkProfile: &armcompute.VirtualMachineScaleSetNetworkProfile{NetworkInterfaceConfigurations: s.nics()},
				// Boot diagnostics with managed storage keep the serial console, where nodeboot writes
				// its join report before it can reach the cluster.
				DiagnosticsProfile: &armcompute.DiagnosticsProfile{BootDiagnostics: &armcompute.BootDiagnostics{Enabled: to.Ptr(true)}},
			},
		},
	}
	if len(m.Zones) > 0 {
		vmss.Zones = to.SliceOfPtrs(m.Zones...)
	}
	vmss.Identity = s.identity()
	if m.Spot {
		vp := vmss.Properties.VirtualMachineProfile
		vp.Priority = to.Ptr(armcompute.VirtualMachinePriorityTypesSpot)
		vp.EvictionPolicy = to.Ptr(armcompute.VirtualMachineEvictionPolicyTypesDelete)
		vp.BillingProfile = &armcompute.BillingProfile{MaxPrice: to.Ptr(m.MaxBidPrice)}
	}
	return vmss
}

// update raises the scale set's capacity, with custom data and everything Machines.Digest covers
// in its model (image, size, NICs, OS disk, spot price, identity), so that the machines it adds,
// those of a surge-first replacement among them, are made of the pool's current settings; has is
// the identity the scale set carries.
func (s *ScaleSet) update(has *armcompute.VirtualMachineScaleSetIdentity, capacity int64, customData []byte) armcompute.VirtualMachineScaleSetUpdate {
	m := s.Machines
	vp := &armcompute.VirtualMachineScaleSetUpdateVMProfile{
		OSProfile: &armcompute.VirtualMachineScaleSetUpdateOSProfile{CustomData: to.Ptr(base64.StdEncoding.EncodeToString(customData))},
		StorageProfile: &armcompute.VirtualMachineScaleSetUpdateStorageProfile{
			ImageReference: &armcompute.ImageReference{ID: to.Ptr(m.ImageID)},
			OSDisk:         s.osDiskUpdate(),
		},
		NetworkProfile: &armcompute.VirtualMachineScaleSetUpdateNetworkProfile{NetworkInterfaceConfigurations: s.nicUpdates()},
	}
	if m.Spot {
		vp.BillingProfile = &armcompute.BillingProfile{MaxPrice: to.Ptr(m.MaxBidPrice)}
	}
	return armcompute.VirtualMachineScaleSetUpdate{
		Identity: s.identityUpdate(has),
		SKU:      &armcompute.SKU{Name: to.Ptr(m.VMSize), Tier: to.Ptr("Standard"), Capacity: to.Ptr(capacity)},
		Properties: &armcompute.VirtualMachineScaleSetUpdateProperties{
			// Scale sets made with a single placement group leave it (never the other way round).
			SinglePlacementGroup:  to.Ptr(false),
			VirtualMachineProfile: vp,
		},
	}
}

// identity is the scale set's identity: the kubelet's user-assigned identity, nil without one.
func (s *ScaleSet) identity() *armcompute.VirtualMachineScaleSetIdentity {
	if s.Machines.KubeletIdentityID == "" {
		return nil
	}
	return &armcompute.VirtualMachineScaleSetIdentity{Type: to.Ptr(armcompute.ResourceIdentityTypeUserAssigned),
		UserAssignedIdentities: map[string]*armcompute.UserAssignedIdentitiesValue{s.Machines.KubeletIdentityID: {}}}
}

// identityUpdate is the PATCH that takes the scale set from the identity it has to carrying the
// kubelet's user-assigned identity alone (a system-assigned one is kept), nil when nothing
// changes. A PATCH leaves the identities it does not name, so each other user-assigned one is
// named with null, which removes it, and with no user-assigned identity left the type goes to
// None, which "will remove any identities from the virtual machine scale set"
// (VirtualMachineScaleSetIdentity.type in the Compute REST API's specification).
func (s *ScaleSet) identityUpdate(has *armcompute.VirtualMachineScaleSetIdentity) *armcompute.VirtualMachineScaleSetIdentity {
	want := s.Machines.KubeletIdentityID
	system := has != nil && strings.Contains(string(deref(has.Type)), string(armcompute.ResourceIdentityTypeSystemAssigned))
	carried := userAssigned(has)
	ids := map[string]*armcompute.UserAssignedIdentitiesValue{}
	for id := range carried {
		if !strings.EqualFold(id, want) {
			ids[id] = nil
		}
	}
	switch {
	case want == "" && len(ids) == 0:
		return nil
	case want == "" && system:
		return &armcompute.VirtualMachineScaleSetIdentity{Type: to.Ptr(armcompute.ResourceIdentityTypeSystemAssigned)}
	case want == "":
		return &armcompute.VirtualMachineScaleSetIdentity{Type: to.Ptr(armcompute.ResourceIdentityTypeNone)}
	case len(ids) == 0 && len(carried) == 1:
		return nil // it carries the kubelet identity alone
	}
	ids[want] = &armcompute.UserAssignedIdentitiesValue{}
	typ := armcompute.ResourceIdentityTypeUserAssigned
	if system {
		typ = armcompute.ResourceIdentityTypeSystemAssignedUserAssigned
	}
	return &armcompute.VirtualMachineScaleSetIdentity{Type: to.Ptr(typ), UserAssignedIdentities: ids}
}

// userAssigned are the user-assigned identities of an identity (nil: none).
func userAssigned(i *armcompute.VirtualMachineScaleSetIdentity) map[string]*armcompute.UserAssignedIdentitiesValue {
	if i == nil || !strings.Contains(string(deref(i.Type)), string(armcompute.ResourceIdentityTypeUserAssigned)) {
		return nil
	}
	return i.UserAssignedIdentities
}

// osDiskUpdate is the OS disk of update: the settings the pool sets, nil when it sets none. An
// unset setting is left out, never sent as null: the Update body's VirtualMachineScaleSetUpdateOSDisk
// types caching, diskSizeGB and managedDisk as string, integer and object, with no null (the ARM
// template schema of Microsoft.Compute 2024-11-01, which the ARM test server checks PATCH bodies
// against). The provider refuses at plan time to unset one that was set, as the model would keep it.
func (s *ScaleSet) osDiskUpdate() *armcompute.VirtualMachineScaleSetUpdateOSDisk {
	d := s.Machines.OSDisk
	if d == (OSDisk{}) {
		return nil
	}
	disk := &armcompute.VirtualMachineScaleSetUpdateOSDisk{}
	if d.Caching != "" {
		disk.Caching = to.Ptr(armcompute.CachingTypes(d.Caching))
	}
	if d.SizeGB > 0 {
		disk.DiskSizeGB = to.Ptr(d.SizeGB)
	}
	if d.StorageAccountType != "" {
		disk.ManagedDisk = &armcompute.VirtualMachineScaleSetManagedDiskParameters{
			StorageAccountType: to.Ptr(armcompute.StorageAccountTypes(d.StorageAccountType)),
		}
	}
	return disk
}

// tags are the scale set's tags: kubewin's and the pool's.
func (s *ScaleSet) tags() map[string]*string {
	tags := map[string]*string{TagPool: to.Ptr(s.Pool), TagManagedBy: to.Ptr("kubewin")}
	for k, v := range s.Machines.Tags {
		tags[k] = to.Ptr(v)
	}
	return tags
}

// Sync brings the settings of an existing scale set that change in place — its tags and its
// zones — to the pool's, in one PATCH when they differ: tags are replaced as a whole (ARM's PATCH
// of tags, Azure/azure-resource-manager-rpc v1.0/resource-api-reference.md); zones can only be
// added, which the provider checks at plan time ("Update scale set to add availability zones" in
// https://learn.microsoft.com/azure/virtual-machine-scale-sets/virtual-machine-scale-sets-use-availability-zones).
// Instances stay where they are: those added later spread over the zones.
func (s *ScaleSet) Sync(ctx context.Context) error {
	existing, err := s.get(ctx)
	if err != nil || existing == nil {
		return err
	}
	var u armcompute.VirtualMachineScaleSetUpdate
	changed := false
	if tags := s.tags(); !maps.EqualFunc(tags, existing.Tags, func(a, b *string) bool { return deref(a) == deref(b) }) {
		u.Tags, changed = tags, true
	}
	var zones []string
	for _, z := range existing.Zones {
		zones = append(zones, deref(z))
	}
	if len(s.Machines.Zones) > 0 && !slices.Equal(slices.Sorted(slices.Values(zones)), slices.Sorted(slices.Values(s.Machines.Zones))) {
		u.Zones, changed = to.SliceOfPtrs(s.Machines.Zones...), true
	}
	if !changed {
		return nil
	}
	tflog.Info(ctx, "updating the scale set's tags and zones", map[string]any{"scale_set": s.ID(), "zones": s.Machines.Zones})
	p, err := s.scaleSets().BeginUpdate(ctx, s.Machines.ResourceGroup, s.Name, u, nil)
	if _, err = wait(ctx, s.Client, p, err); err != nil {
		return fmt.Errorf("update the tags and zones of scale set %s: %w", s.ID(), err)
	}
	return nil
}

func (s *ScaleSet) storageProfile() *armcompute.VirtualMachineScaleSetStorageProfile {
	d := s.Machines.OSDisk
	disk := &armcompute.VirtualMachineScaleSetOSDisk{
		CreateOption: to.Ptr(armcompute.DiskCreateOptionTypesFromImage),
		OSType:       to.Ptr(armcompute.OperatingSystemTypesWindows),
	}
	if d.Caching != "" {
		disk.Caching = to.Ptr(armcompute.CachingTypes(d.Caching))
	}
	if d.StorageAccountType != "" {
		disk.ManagedDisk = &armcompute.VirtualMachineScaleSetManagedDiskParameters{
			StorageAccountType: to.Ptr(armcompute.StorageAccountTypes(d.StorageAccountType)),
		}
	}
	if d.SizeGB > 0 {
		disk.DiskSizeGB = to.Ptr(d.SizeGB)
	}
	return &armcompute.VirtualMachineScaleSetStorageProfile{ImageReference: &armcompute.ImageReference{ID: to.Ptr(s.Machines.ImageID)}, OSDisk: disk}
}

func (s *ScaleSet) nics() []*armcompute.VirtualMachineScaleSetNetworkConfiguration {
	m := s.Machines
	return []*armcompute.VirtualMachineScaleSetNetworkConfiguration{{
		Name: to.Ptr("nic0"),
		Properties: &armcompute.VirtualMachineScaleSetNetworkConfigurationProperties{
			Primary:                     to.Ptr(true),
			EnableIPForwarding:          to.Ptr(m.IPForwarding),
			EnableAcceleratedNetworking: to.Ptr(m.AcceleratedNetworking),
			IPConfigurations: []*armcompute.VirtualMachineScaleSetIPConfiguration{{
				Name: to.Ptr("ip0"),
				Properties: &armcompute.VirtualMachineScaleSetIPConfigurationProperties{
					Primary: to.Ptr(true),
					Subnet:  &armcompute.APIEntityReference{ID: to.Ptr(m.SubnetID)},
				},
			}},
		},
	}}
}

func (s *ScaleSet) nicUpdates() []*armcompute.VirtualMachineScaleSetUpdateNetworkConfiguration {
	m := s.Machines
	return []*armcompute.VirtualMachineScaleSetUpdateNetworkConfiguration{{
		Name: to.Ptr("nic0"),
		Properties: &armcompute.VirtualMachineScaleSetUpdateNetworkConfigurationProperties{
			Primary:                     to.Ptr(true),
			EnableIPForwarding:          to.Ptr(m.IPForwarding),
			EnableAcceleratedNetworking: to.Ptr(m.AcceleratedNetworking),
			IPConfigurations: []*armcompute.VirtualMachineScaleSetUpdateIPConfiguration{{
				Name: to.Ptr("ip0"),
				Properties: &armcompute.VirtualMachineScaleSetUpdateIPConfigurationProperties{
					Primary: to.Ptr(true),
					Subnet:  &armcompute.APIEntityReference{ID: to.Ptr(m.SubnetID)},
				},
			}},
		},
	}}
}

// Delete removes the named instances in one deleteInstances call.
func (s *ScaleSet) Delete(ctx context.Context, names []string) error {
	ids, err := s.instanceIDs(ctx, names)
	if err != nil || len(ids) == 0 {
		return err
	}
	tflog.Info(ctx, "deleting scale set instances", map[string]any{"scale_set": s.ID(), "instances": ids})
	err = preemptible(ctx, "delete instances of "+s.ID(), func() error { return s.deleteInstances(ctx, ids) })
	if err != nil {
		return fmt.Errorf("delete instances %v of scale set %s: %w", ids, s.ID(), err)
	}
	return nil
}

// deleteInstances deletes the instances ids in one deleteInstances call and waits until they are
// gone. The POST is not sent again blindly when its answer is lost (a connection error, a timeout, a
// server error): it may have run, and Compute refuses to delete instances already being deleted.
// The instances are listed instead: the call is sent again for those still there and not being
// deleted, and the others are waited for.
func (s *ScaleSet) deleteInstances(ctx context.Context, ids []string) error {
	for {
		p, err := s.scaleSets().BeginDeleteInstances(policy.WithRetryOptions(ctx, actionRetryOptions), s.Machines.ResourceGroup, s.Name,
			armcompute.VirtualMachineScaleSetVMInstanceRequiredIDs{InstanceIDs: to.SliceOfPtrs(ids...)}, nil)
		if err == nil || !answerLost(err) {
			_, err = wait(ctx, s.Client, p, err)
			return err
		}
		tflog.Warn(ctx, "the answer to deleteInstances was lost; checking which instances it deleted", map[string]any{"error": err.Error()})
		remaining, deleting, lerr := s.deletionState(ctx, ids)
		if lerr != nil {
			return errors.Join(err, lerr)
		}
		if len(remaining) == 0 {
			return s.awaitGone(ctx, deleting)
		}
		ids = remaining
	}
}

// deletionState lists the instances and sorts ids into those still there and not being deleted,
// and those being deleted.
func (s *ScaleSet) deletionState(ctx context.Context, ids []string) (remaining, deleting []string, err error) {
	ins, err := s.instances(ctx, false)
	if err != nil {
		return nil, nil, err
	}
	for _, in := range ins {
		switch {
		case !slices.Contains(ids, in.id):
		case in.deleting:
			deleting = append(deleting, in.id)
		default:
			remaining = append(remaining, in.id)
		}
	}
	return remaining, deleting, nil
}

// awaitGone waits until the instances ids are gone, reading the instances (a read of Compute's
// HighCostGetVMScaleSet budgets) after the poll interval, then twice as long each time, up to a
// minute.
func (s *ScaleSet) awaitGone(ctx context.Context, ids []string) error {
	for every := s.Client.poll; len(ids) > 0; every = min(2*every, time.Minute) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("instances %v of scale set %s are still being deleted: %w", ids, s.ID(), ctx.Err())
		case <-time.After(every):
		}
		remaining, deleting, err := s.deletionState(ctx, ids)
		if err != nil {
			return err
		}
		ids = append(remaining, deleting...)
	}
	return nil
}

// instanceIDs maps computer names to instance IDs; names of no instance are skipped.
func (s *ScaleSet) instanceIDs(ctx context.Context, names []string) ([]string, error) {
	s.mu.Lock()
	known := s.ids != nil && !slices.ContainsFunc(names, func(n string) bool { return s.ids[n] == "" })
	s.mu.Unlock()
	if !known {
		if _, err := s.instances(ctx, false); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for _, n := range names {
		if id := s.ids[n]; id != "" {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// Destroy deletes the scale set.
func (s *ScaleSet) Destroy(ctx context.Context) error {
	existing, err := s.get(ctx)
	if err != nil || existing == nil {
		return err
	}
	tflog.Info(ctx, "deleting scale set", map[string]any{"scale_set": s.ID()})
	if err := scaleSets.del(ctx, s.Client, s.Machines.ResourceGroup, s.Name); err != nil && !notFound(err) {
		return fmt.Errorf("delete scale set %s: %w", s.ID(), err)
	}
	return nil
}

// Reports reads nothing: a Windows instance's serial console, which boot diagnostics return, is
// SAC's (EMS holds COM1,
// https://learn.microsoft.com/en-us/troubleshoot/azure/virtual-machines/windows/serial-console-windows),
// and nodeboot's report lines never reach it. Reading it would cost a POST and a blob read per
// pending instance at every poll. A failed join reaches the pool by the report nodeboot writes to
// the cluster, and by Diagnose.
func (s *ScaleSet) Reports(context.Context, []string) map[string]*nodestatus.Report { return nil }

// Log is empty, for the same reason: the end of nodeboot's log comes with Diagnose's summary.
func (s *ScaleSet) Log(context.Context, string) string { return "" }

// Diagnose runs `nodeboot diagnose` on the instance through a run command (RunPowerShellScript,
// https://learn.microsoft.com/en-us/rest/api/compute/virtual-machine-scale-set-vms/run-command):
// the one way to read a Windows instance's join on Azure, whose serial console is SAC's (EMS
// holds COM1, https://learn.microsoft.com/en-us/troubleshoot/azure/virtual-machines/windows/serial-console-windows),
// so that Reports and Log find nothing of nodeboot's there. Azure returns only the last 4,096
// bytes of a run command's output
// (https://learn.microsoft.com/en-us/azure/virtual-machines/windows/run-command#restrictions),
// so the summary and the join report come back, and the bundle stays on the instance at the
// path the output names: the summary says what failed, and the bundle is there for whoever
// logs in (bringing it back would take a run command per 3 KiB of base64, each tens of
// seconds). A retried POST runs it again, which changes nothing but the bundle's time.
func (s *ScaleSet) Diagnose(ctx context.Context, name string) (*pool.Diagnosis, error) {
	ids, err := s.instanceIDs(ctx, []string{name})
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("no instance %s in scale set %s", name, s.ID())
	}
	tflog.Info(ctx, "running nodeboot diagnose on the instance", map[string]any{"machine": name, "instance": ids[0]})
	script := fmt.Sprintf("& %s 'diagnose'\nexit $LASTEXITCODE", powershell.Quote(nodecmd.DefaultPaths().BinDir+`\nodeboot.exe`))
	p, err := s.vms().BeginRunCommand(policy.WithRetryOptions(ctx, runCommandRetryOptions), s.Machines.ResourceGroup, s.Name, ids[0],
		armcompute.RunCommandInput{CommandID: to.Ptr("RunPowerShellScript"), Script: to.SliceOfPtrs(strings.Split(script, "\n")...)}, nil)
	r, err := wait(ctx, s.Client, p, err)
	if err != nil {
		return nil, fmt.Errorf("run nodeboot diagnose on %s: %w", name, err)
	}
	var stdout, stderr string
	for _, st := range r.Value {
		switch {
		case st == nil:
		case strings.HasPrefix(deref(st.Code), "ComponentStatus/StdOut/"):
			stdout = deref(st.Message)
		case strings.HasPrefix(deref(st.Code), "ComponentStatus/StdErr/"):
			stderr = deref(st.Message)
		}
	}
	d := &pool.Diagnosis{}
	d.Summary, d.Report, d.OnNode = nodestatus.ParseDiagnosis(stdout)
	if strings.TrimSpace(d.Summary) == "" {
		return nil, fmt.Errorf("nodeboot diagnose on %s printed nothing: %s", name, strings.TrimSpace(stderr))
	}
	return d, nil
}

// serialLog is the machine's serial console output, or nil.
func (s *ScaleSet) serialLog(ctx context.Context, name string) []byte {
	ids, err := s.instanceIDs(ctx, []string{name})
	if err != nil || len(ids) == 0 {
		return nil
	}
	resp, err := s.vms().RetrieveBootDiagnosticsData(ctx, s.Machines.ResourceGroup, s.Name, ids[0],
		&armcompute.VirtualMachineScaleSetVMsClientRetrieveBootDiagnosticsDataOptions{SasURIExpirationTimeInMinutes: to.Ptr[int32](5)})
	if err != nil || resp.SerialConsoleLogBlobURI == nil {
		return nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *resp.SerialConsoleLogBlobURI, nil)
	if err != nil {
		return nil
	}
	blob, err := s.Client.http.Do(req)
	if err != nil {
		return nil
	}
	defer func() { _ = blob.Body.Close() }()
	if blob.StatusCode != http.StatusOK {
		return nil
	}
	data, _ := io.ReadAll(io.LimitReader(blob.Body, 4<<20))
	return data
}

// randomPassword is an administrator password meeting Azure's complexity rules, for scale sets
// created without one: nobody learns it, and it is never stored.
func randomPassword() string {
	const (
		lower   = "abcdefghijkmnopqrstuvwxyz"
		upper   = "ABCDEFGHJKLMNPQRSTUVWXYZ"
		digits  = "23456789"
		special = "!@#%^*-_=+"
	)
	all := lower + upper + digits + special
	pick := func(set string) byte {
		n, err := rand.Int(rand.Reader, big.NewInt(int64(len(set))))
		if err != nil {
			panic(err) // crypto/rand does not fail on supported platforms
		}
		return set[n.Int64()]
	}
	b := []byte{pick(lower), pick(upper), pick(digits), pick(special)}
	for len(b) < 32 {
		b = append(b, pick(all))
	}
	return string(b)
}

// derefAll is the values of ps, nil ones as zero values.
func derefAll[T any](ps []*T) []T {
	out := make([]T, 0, len(ps))
	for _, p := range ps {
		out = append(out, deref(p))
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
