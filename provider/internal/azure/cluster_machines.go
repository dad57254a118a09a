package azure

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	"golang.org/x/crypto/ssh"

	"github.com/kubewin/kubewin/internal/kubeadmboot"
)

func imageReference(i Image) *armcompute.ImageReference {
	if i.ID != "" {
		return &armcompute.ImageReference{ID: to.Ptr(i.ID)}
	}
	return &armcompute.ImageReference{Publisher: to.Ptr(i.Publisher), Offer: to.Ptr(i.Offer), SKU: to.Ptr(i.SKU), Version: to.Ptr(i.Version)}
}

// linuxConfiguration logs on with SSH keys only: the spec's, or one nobody holds.
func (c *Cluster) linuxConfiguration() (*armcompute.LinuxConfiguration, error) {
	keys := c.Spec.SSHPublicKeys
	if len(keys) == 0 {
		pub, _, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, err
		}
		k, err := ssh.NewPublicKey(pub)
		if err != nil {
			return nil, err
		}
		keys = []string{strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k)))}
	}
	cfg := &armcompute.LinuxConfiguration{DisablePasswordAuthentication: to.Ptr(true), ProvisionVMAgent: to.Ptr(true),
		SSH: &armcompute.SSHConfiguration{}}
	for _, k := range keys {
		cfg.SSH.PublicKeys = append(cfg.SSH.PublicKeys,
			&armcompute.SSHPublicKey{Path: to.Ptr("/home/" + c.Spec.AdminUsername + "/.ssh/authorized_keys"), KeyData: to.Ptr(k)})
	}
	return cfg, nil
}

func (c *Cluster) osDisk(m MachineSpec) *armcompute.OSDisk {
	d := &armcompute.OSDisk{
		CreateOption: to.Ptr(armcompute.DiskCreateOptionTypesFromImage), OSType: to.Ptr(armcompute.OperatingSystemTypesLinux),
		// The disk goes with the machine: a destroyed cluster leaves none behind.
		DeleteOption: to.Ptr(armcompute.DiskDeleteOptionTypesDelete),
		ManagedDisk:  &armcompute.ManagedDiskParameters{StorageAccountType: to.Ptr(armcompute.StorageAccountTypesPremiumLRS)},
	}
	if m.OSDiskSizeGB > 0 {
		d.DiskSizeGB = to.Ptr(m.OSDiskSizeGB)
	}
	return d
}

// controlPlaneVM is control plane i's VM, with its cloud-init user data (on create).
func (c *Cluster) controlPlaneVM(i int, userData []byte) object {
	return newSpec(c, virtualMachines, c.masterName(i), func() (armcompute.VirtualMachine, error) {
		linux, err := c.linuxConfiguration()
		if err != nil {
			return armcompute.VirtualMachine{}, err
		}
		return c.controlPlaneVMBody(i, linux, userData), nil
	})
}

// masterVMBody is control plane i's VM: its NIC, its zone (the masters' zones in turn) and its
// cloud-init user data.
func (c *Cluster) controlPlaneVMBody(i int, linux *armcompute.LinuxConfiguration, userData []byte) armcompute.VirtualMachine {
	m := armcompute.VirtualMachine{
		Location: to.Ptr(c.Spec.Location), Tags: c.tags(),
		Properties: &armcompute.VirtualMachineProperties{
			HardwareProfile: &armcompute.HardwareProfile{VMSize: to.Ptr(armcompute.VirtualMachineSizeTypes(c.Spec.ControlPlanes.VMSize))},
			StorageProfile:  &armcompute.StorageProfile{ImageReference: imageReference(c.Spec.ControlPlanes.Image), OSDisk: c.osDisk(c.Spec.ControlPlanes)},
			OSProfile: &armcompute.OSProfile{
				ComputerName: to.Ptr(c.masterName(i)), AdminUsername: to.Ptr(c.Spec.AdminUsername), LinuxConfiguration: linux,
				CustomData: to.Ptr(base64.StdEncoding.EncodeToString(userData)),
			},
			// The NIC goes with the VM: a NIC left behind stays reserved for the deleted VM for 180 s,
			// refusing its own deletion and a new VM (NicReservedForAnotherVm).
			NetworkProfile: &armcompute.NetworkProfile{NetworkInterfaces: []*armcompute.NetworkInterfaceReference{{
				ID:         to.Ptr(c.id(typeInterface, c.nicName(i)).String()),
				Properties: &armcompute.NetworkInterfaceReferenceProperties{Primary: to.Ptr(true), DeleteOption: to.Ptr(armcompute.DeleteOptionsDelete)},
			}}},
			// The serial console keeps the bootstrap's report, which the provider reads.
			DiagnosticsProfile: &armcompute.DiagnosticsProfile{BootDiagnostics: &armcompute.BootDiagnostics{Enabled: to.Ptr(true)}},
		},
	}
	if z := c.Spec.ControlPlanes.Zones; len(z) > 0 {
		m.Zones = []*string{to.Ptr(z[i%len(z)])}
	}
	if c.Spec.CloudProvider != nil {
		// cloud-controller-manager runs on the control planes as the cloud provider's identity.
		m.Identity = &armcompute.VirtualMachineIdentity{
			Type:                   to.Ptr(armcompute.ResourceIdentityTypeUserAssigned),
			UserAssignedIdentities: map[string]*armcompute.UserAssignedIdentitiesValue{c.IdentityID(): {}},
		}
	}
	return m
}

// ControlPlaneProvisioned reports whether control plane i's VM exists as a machine. A create that
// ends AllocationFailed leaves the VM in ARM with provisioningState Failed and never started
// ("Failed: represents a failed operation during provisioning",
// https://learn.microsoft.com/azure/virtual-machines/states-billing#provisioning-states; the
// allocation case: https://learn.microsoft.com/troubleshoot/azure/virtual-machines/windows/allocation-failure):
// it is no control plane, and Repair deletes it and makes it again. One that ended
// OSProvisioningTimedOut is Failed too but runs ("The VM may still finish provisioning
// successfully"), and counts, as a pool's machine does: its bootstrap decides.
func (c *Cluster) ControlPlaneProvisioned(ctx context.Context, i int) (bool, error) {
	vm, err := c.Client.compute.NewVirtualMachinesClient().Get(ctx, c.Spec.ResourceGroup, c.masterName(i),
		&armcompute.VirtualMachinesClientGetOptions{Expand: to.Ptr(armcompute.InstanceViewTypesInstanceView)})
	if notFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	p := vm.Properties
	if p == nil || deref(p.ProvisioningState) != "Failed" {
		return true, nil
	}
	if p.InstanceView != nil {
		for _, st := range p.InstanceView.Statuses {
			if deref(st.Code) == "PowerState/running" {
				return true, nil
			}
		}
	}
	return false, nil
}

// bootTimeout bounds a control plane's bootstrap, packages included.
const bootTimeout = 20 * time.Minute

// waitBoot reads control plane i's serial console through boot diagnostics until its bootstrap
// reports ready (and returns the cluster CA certificate) or failed.
func (c *Cluster) waitBoot(ctx context.Context, i int) ([]byte, error) {
	name := c.masterName(i)
	ctx, cancel := context.WithTimeout(ctx, bootTimeout)
	defer cancel()
	r, err := c.Client.compute.NewVirtualMachinesClient().RetrieveBootDiagnosticsData(ctx, c.Spec.ResourceGroup, name,
		&armcompute.VirtualMachinesClientRetrieveBootDiagnosticsDataOptions{SasURIExpirationTimeInMinutes: to.Ptr[int32](int32(bootTimeout / time.Minute))})
	if err != nil {
		return nil, fmt.Errorf("read the serial console of %s: %w", name, err)
	}
	if r.SerialConsoleLogBlobURI == nil {
		return nil, fmt.Errorf("%s has no serial console log: boot diagnostics are off", name)
	}
	delay := 250 * time.Millisecond
	for {
		log, err := c.Client.readBlob(ctx, *r.SerialConsoleLogBlobURI)
		if err == nil {
			switch b := kubeadmboot.ReadSerial(log); {
			case b.Ready:
				return b.CACert, nil
			case b.Failed:
				return nil, fmt.Errorf("the bootstrap of %s failed in phase %s (exit %s); the end of its serial console:\n%s", name, b.Phase, b.Exit,
					tailLines(log, 25))
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%s did not finish its bootstrap within %s: %w", name, bootTimeout, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// readBlob reads a blob by its SAS URI.
func (c *Client) readBlob(ctx context.Context, uri string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, uri, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET serial console log: %s", resp.Status)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 4<<20))
}

func tailLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// randomHex is n random bytes, hex: kubeadm's certificate key is 32.
func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return hex.EncodeToString(b)
}

// agentScaleSetBody is the Linux agents' scale set with capacity machines.
func (c *Cluster) agentScaleSetBody(capacity int, linux *armcompute.LinuxConfiguration, userData []byte) armcompute.VirtualMachineScaleSet {
	disk := c.osDisk(c.Spec.Agents)
	ipc := &armcompute.VirtualMachineScaleSetIPConfigurationProperties{Primary: to.Ptr(true),
		Subnet: &armcompute.APIEntityReference{ID: to.Ptr(c.AgentSubnetID())}}
	if c.Spec.Network.PublicAPIServer {
		ipc.LoadBalancerBackendAddressPools = []*armcompute.SubResource{{ID: c.pool("agents").ID}}
	}
	ss := armcompute.VirtualMachineScaleSet{
		Location: to.Ptr(c.Spec.Location), Tags: c.tags(),
		SKU: &armcompute.SKU{Name: to.Ptr(c.Spec.Agents.VMSize), Tier: to.Ptr("Standard"), Capacity: to.Ptr(int64(capacity))},
		Properties: &armcompute.VirtualMachineScaleSetProperties{
			OrchestrationMode: to.Ptr(armcompute.OrchestrationModeUniform),
			// Overprovisioned instances would join and be deleted again.
			Overprovision: to.Ptr(false),
			// A single placement group (Uniform's default) holds at most 100 machines.
			SinglePlacementGroup: to.Ptr(false),
			UpgradePolicy:        &armcompute.UpgradePolicy{Mode: to.Ptr(armcompute.UpgradeModeManual)},
			VirtualMachineProfile: &armcompute.VirtualMachineScaleSetVMProfile{
				OSProfile: &armcompute.VirtualMachineScaleSetOSProfile{
					ComputerNamePrefix: to.Ptr(c.AgentNamePrefix()), AdminUsername: to.Ptr(c.Spec.AdminUsername), LinuxConfiguration: linux,
					CustomData: to.Ptr(base64.StdEncoding.EncodeToString(userData)),
				},
				StorageProfile: &armcompute.VirtualMachineScaleSetStorageProfile{
					ImageReference: imageReference(c.Spec.Agents.Image),
					OSDisk: &armcompute.VirtualMachineScaleSetOSDisk{
						CreateOption: disk.CreateOption, OSType: disk.OSType, DiskSizeGB: disk.DiskSizeGB,
						ManagedDisk: &armcompute.VirtualMachineScaleSetManagedDiskParameters{StorageAccountType: disk.ManagedDisk.StorageAccountType},
					},
				},
				NetworkProfile: &armcompute.VirtualMachineScaleSetNetworkProfile{
					NetworkInterfaceConfigurations: []*armcompute.VirtualMachineScaleSetNetworkConfiguration{{
						Name: to.Ptr("nic0"),
						Properties: &armcompute.VirtualMachineScaleSetNetworkConfigurationProperties{
							Primary: to.Ptr(true),
							// Pod traffic routed to the node by the route table arrives for the pods.
							EnableIPForwarding: to.Ptr(true),
							IPConfigurations:   []*armcompute.VirtualMachineScaleSetIPConfiguration{{Name: to.Ptr("ip0"), Properties: ipc}},
						},
					}},
				},
				DiagnosticsProfile: &armcompute.DiagnosticsProfile{BootDiagnostics: &armcompute.BootDiagnostics{Enabled: to.Ptr(true)}},
			},
		},
	}
	if z := c.Spec.Agents.Zones; len(z) > 0 {
		ss.Zones = to.SliceOfPtrs(z...)
	}
	ss.Identity = c.agents().identity()
	return ss
}

// agents is the agents' scale set as a pool's machines (pool.Compute), for scaling.
func (c *Cluster) agents() *ScaleSet {
	return &ScaleSet{
		Client: c.Client, Name: c.scaleSetName(), Pool: c.scaleSetName(), ComputerNamePrefix: c.AgentNamePrefix(),
		Machines: Machines{ResourceGroup: c.Spec.ResourceGroup, Location: c.Spec.Location, VMSize: c.Spec.Agents.VMSize, SubnetID: c.AgentSubnetID(),
			KubeletIdentityID: c.agentIdentityID()},
	}
}

// agentIdentityID is the user-assigned identity the agents carry, "" for none.
func (c *Cluster) agentIdentityID() string {
	if c.Spec.AgentRegistry == nil {
		return ""
	}
	return c.Spec.AgentRegistry.IdentityID
}

// agentScaleSet is the Linux agents' scale set, with capacity machines and user data (on create).
func (c *Cluster) agentScaleSet(capacity int, userData []byte) object {
	return newSpec(c, scaleSets, c.scaleSetName(), func() (armcompute.VirtualMachineScaleSet, error) {
		linux, err := c.linuxConfiguration()
		if err != nil {
			return armcompute.VirtualMachineScaleSet{}, err
		}
		return c.agentScaleSetBody(capacity, linux, userData), nil
	})
}

// agentScaleSetUpdate changes the agents' capacity, with new user data in the scale set's model
// (for the machines it adds) unless userData is nil.
func (c *Cluster) agentScaleSetUpdate(capacity int, userData []byte) armcompute.VirtualMachineScaleSetUpdate {
	sku := &armcompute.SKU{Name: to.Ptr(c.Spec.Agents.VMSize), Tier: to.Ptr("Standard"), Capacity: to.Ptr(int64(capacity))}
	u := armcompute.VirtualMachineScaleSetUpdate{SKU: sku}
	if userData != nil {
		u.Properties = &armcompute.VirtualMachineScaleSetUpdateProperties{VirtualMachineProfile: &armcompute.VirtualMachineScaleSetUpdateVMProfile{
			OSProfile: &armcompute.VirtualMachineScaleSetUpdateOSProfile{CustomData: to.Ptr(base64.StdEncoding.EncodeToString(userData))},
		}}
	}
	return u
}

// setAgents creates the agents' scale set with capacity machines, or changes its capacity with
// new user data in its model (for the machines it adds), in one write.
func (c *Cluster) setAgents(ctx context.Context, capacity int, userData []byte) error {
	client := c.Client.compute.NewVirtualMachineScaleSetsClient()
	r, err := client.Get(ctx, c.Spec.ResourceGroup, c.scaleSetName(), nil)
	if notFound(err) {
		tflog.Info(ctx, "creating the Linux agents' scale set", map[string]any{"scale_set": c.ScaleSetID(), "capacity": capacity})
		return c.agentScaleSet(capacity, userData).put(ctx, c.Client)
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", c.ScaleSetID(), err)
	}
	if err := c.ours(c.ScaleSetID(), r.Tags); err != nil {
		return err
	}
	tflog.Info(ctx, "scaling the Linux agents' scale set", map[string]any{"scale_set": c.ScaleSetID(), "capacity": capacity})
	p, err := client.BeginUpdate(ctx, c.Spec.ResourceGroup, c.scaleSetName(), c.agentScaleSetUpdate(capacity, userData), nil)
	res, err := wait(ctx, c.Client, p, err)
	if provisioningTimedOut(err) { // as for a pool's scale-out: the machine runs, and its join decides
		tflog.Warn(ctx, "Azure gave up waiting for a machine's provisioning (OSProvisioningTimedOut); it runs, and its join decides",
			map[string]any{"scale_set": c.ScaleSetID(), "error": err.Error()})
		return nil
	}
	if err != nil || userData == nil {
		return err
	}
	// The new user data is a new model: the agents before it are brought to it (no reimage).
	agents := c.agents()
	ins, err := agents.instances(ctx, false)
	if err != nil {
		return err
	}
	return agents.upgradeCustomData(ctx, res.VirtualMachineScaleSet, ins)
}

// agentCount is the scale set's capacity (0 when it does not exist).
func (c *Cluster) agentCount(ctx context.Context) (int, error) {
	r, err := c.Client.compute.NewVirtualMachineScaleSetsClient().Get(ctx, c.Spec.ResourceGroup, c.scaleSetName(), nil)
	if notFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if r.SKU == nil || r.SKU.Capacity == nil {
		return 0, nil
	}
	return int(*r.SKU.Capacity), nil
}
