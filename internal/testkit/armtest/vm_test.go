package armtest

import (
	"encoding/base64"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"
)

func done[T any](t *testing.T, p *runtime.Poller[T], err error) T {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.PollUntilDone(testContext(t), fast)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func (f *fixture) nid(typ, name string) string {
	return f.s.ResourceGroupID(testGroup) + "/providers/Microsoft.Network/" + typ + "/" + name
}

// A control plane's resources: a public address out of 127.0.0.0/8 with its DNS name, a Standard
// load balancer on it, a NIC at a static address in the load balancer's pool, a Linux VM from a
// marketplace image that boots with its custom data, answers run commands and shows its serial
// console; what is in use cannot be deleted, and everything goes in dependency order.
func TestClusterResources(t *testing.T) {
	f := newFixture(t, Options{NICReservation: 300 * time.Millisecond})
	ctx := testContext(t)
	pips, lbs, nics := f.network.NewPublicIPAddressesClient(), f.network.NewLoadBalancersClient(), f.network.NewInterfacesClient()
	vms := f.compute.NewVirtualMachinesClient()

	p1, err := f.network.NewSecurityGroupsClient().BeginCreateOrUpdate(ctx, testGroup, "masters", armnetwork.SecurityGroup{
		Location: to.Ptr(f.s.Location()),
		Properties: &armnetwork.SecurityGroupPropertiesFormat{SecurityRules: []*armnetwork.SecurityRule{{Name: to.Ptr("apiserver"),
			Properties: &armnetwork.SecurityRulePropertiesFormat{
				Access: to.Ptr(armnetwork.SecurityRuleAccessAllow), Direction: to.Ptr(armnetwork.SecurityRuleDirectionInbound), Priority: to.Ptr[int32](100),
				Protocol: to.Ptr(armnetwork.SecurityRuleProtocolTCP), SourceAddressPrefix: to.Ptr("*"), SourcePortRange: to.Ptr("*"),
				DestinationAddressPrefix: to.Ptr("*"), DestinationPortRange: to.Ptr("6443"),
			}}}},
	}, nil)
	nsg := done(t, p1, err)
	p2, err := f.network.NewSubnetsClient().BeginCreateOrUpdate(ctx, testGroup, "vnet", "masters",
		armnetwork.Subnet{Properties: &armnetwork.SubnetPropertiesFormat{
			AddressPrefix: to.Ptr("10.0.255.0/24"), NetworkSecurityGroup: &armnetwork.SecurityGroup{ID: nsg.ID},
		}}, nil)
	subnet := done(t, p2, err)
	if subnet.Properties.NetworkSecurityGroup == nil || !strings.EqualFold(*subnet.Properties.NetworkSecurityGroup.ID, *nsg.ID) {
		t.Errorf("subnet %+v lacks its security group", subnet.Properties)
	}

	p3, err := pips.BeginCreateOrUpdate(ctx, testGroup, "apiserver-ip", armnetwork.PublicIPAddress{
		Location: to.Ptr(f.s.Location()), SKU: &armnetwork.PublicIPAddressSKU{Name: to.Ptr(armnetwork.PublicIPAddressSKUNameStandard)},
		Properties: &armnetwork.PublicIPAddressPropertiesFormat{
			PublicIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic),
			DNSSettings:              &armnetwork.PublicIPAddressDNSSettings{DomainNameLabel: to.Ptr("kw-test")},
		},
	}, nil)
	pip := done(t, p3, err)
	addr, err := netip.ParseAddr(*pip.Properties.IPAddress)
	if err != nil || !addr.IsLoopback() || addr == netip.MustParseAddr("127.0.0.1") {
		t.Errorf("public address %s, want one of 127.0.0.0/8 other than 127.0.0.1", *pip.Properties.IPAddress)
	}
	if got := *pip.Properties.DNSSettings.Fqdn; got != "kw-test."+f.s.Location()+".cloudapp.azure.com" {
		t.Errorf("fqdn %s", got)
	}

	lbID := f.nid("loadBalancers", "apiserver")
	sub := func(kind, name string) *armnetwork.SubResource {
		return &armnetwork.SubResource{ID: to.Ptr(lbID + "/" + kind + "/" + name)}
	}
	lb := armnetwork.LoadBalancer{
		Location: to.Ptr(f.s.Location()), SKU: &armnetwork.LoadBalancerSKU{Name: to.Ptr(armnetwork.LoadBalancerSKUNameStandard)},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{
			FrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{{Name: to.Ptr("fe"),
				Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{PublicIPAddress: &armnetwork.PublicIPAddress{ID: pip.ID}}}},
			BackendAddressPools: []*armnetwork.BackendAddressPool{{Name: to.Ptr("masters")}},
			Probes: []*armnetwork.Probe{{Name: to.Ptr("p"),
				Properties: &armnetwork.ProbePropertiesFormat{Protocol: to.Ptr(armnetwork.ProbeProtocolTCP), Port: to.Ptr[int32](6443)}}},
			LoadBalancingRules: []*armnetwork.LoadBalancingRule{{Name: to.Ptr("r"), Properties: &armnetwork.LoadBalancingRulePropertiesFormat{
				FrontendIPConfiguration: sub("frontendIPConfigurations", "fe"), BackendAddressPool: sub("backendAddressPools",
					"masters"), Probe: sub("probes", "p"),
				Protocol: to.Ptr(armnetwork.TransportProtocolTCP), FrontendPort: to.Ptr[int32](6443), BackendPort: to.Ptr[int32](6443),
				DisableOutboundSnat: to.Ptr(true),
			}}},
			OutboundRules: []*armnetwork.OutboundRule{{Name: to.Ptr("o"), Properties: &armnetwork.OutboundRulePropertiesFormat{
				FrontendIPConfigurations: []*armnetwork.SubResource{sub("frontendIPConfigurations", "fe")}, BackendAddressPool: sub("backendAddressPools",
					"masters"),
				Protocol: to.Ptr(armnetwork.LoadBalancerOutboundRuleProtocolAll),
			}}},
		},
	}
	bad := lb
	bad.Properties = &armnetwork.LoadBalancerPropertiesFormat{FrontendIPConfigurations: lb.Properties.FrontendIPConfigurations,
		LoadBalancingRules: []*armnetwork.LoadBalancingRule{{Name: to.Ptr("r"), Properties: &armnetwork.LoadBalancingRulePropertiesFormat{
			FrontendIPConfiguration: sub("frontendIPConfigurations", "fe"), BackendAddressPool: sub("backendAddressPools", "nope"),
			Protocol: to.Ptr(armnetwork.TransportProtocolTCP), FrontendPort: to.Ptr[int32](6443), BackendPort: to.Ptr[int32](6443),
		}}}}
	if _, err := lbs.BeginCreateOrUpdate(ctx, testGroup, "apiserver", bad, nil); err == nil || responseError(t,
		err).ErrorCode != "InvalidResourceReference" {
		t.Errorf("a rule naming a missing pool: %v", err)
	}
	p4, err := lbs.BeginCreateOrUpdate(ctx, testGroup, "apiserver", lb, nil)
	done(t, p4, err)

	p5, err := nics.BeginCreateOrUpdate(ctx, testGroup, "master-0-nic", armnetwork.Interface{
		Location: to.Ptr(f.s.Location()),
		Properties: &armnetwork.InterfacePropertiesFormat{IPConfigurations: []*armnetwork.InterfaceIPConfiguration{{Name: to.Ptr("ip"),
			Properties: &armnetwork.InterfaceIPConfigurationPropertiesFormat{
				Subnet: &armnetwork.Subnet{ID: subnet.ID}, PrivateIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic),
				PrivateIPAddress:                to.Ptr("10.0.255.5"),
				LoadBalancerBackendAddressPools: []*armnetwork.BackendAddressPool{{ID: to.Ptr(lbID + "/backendAddressPools/masters")}},
			}}}},
	}, nil)
	nic := done(t, p5, err)
	if _, err := nics.BeginCreateOrUpdate(ctx, testGroup, "master-1-nic", armnetwork.Interface{
		Location: to.Ptr(f.s.Location()),
		Properties: &armnetwork.InterfacePropertiesFormat{IPConfigurations: []*armnetwork.InterfaceIPConfiguration{{Name: to.Ptr("ip"),
			Properties: &armnetwork.InterfaceIPConfigurationPropertiesFormat{
				Subnet: &armnetwork.Subnet{ID: subnet.ID}, PrivateIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic),
				PrivateIPAddress: to.Ptr("10.0.255.5"),
			}}}},
	}, nil); err == nil || responseError(t, err).ErrorCode != "PrivateIPAddressInUse" {
		t.Errorf("a second NIC at the same address: %v", err)
	}

	vm := armcompute.VirtualMachine{
		Location: to.Ptr(f.s.Location()),
		Properties: &armcompute.VirtualMachineProperties{
			HardwareProfile: &armcompute.HardwareProfile{VMSize: to.Ptr(armcompute.VirtualMachineSizeTypesStandardD2SV3)},
			StorageProfile: &armcompute.StorageProfile{
				ImageReference: &armcompute.ImageReference{Publisher: to.Ptr("Canonical"), Offer: to.Ptr("ubuntu-24_04-lts"), SKU: to.Ptr("server"),
					Version: to.Ptr("latest")},
				OSDisk: &armcompute.OSDisk{CreateOption: to.Ptr(armcompute.DiskCreateOptionTypesFromImage),
					DeleteOption: to.Ptr(armcompute.DiskDeleteOptionTypesDelete)},
			},
			OSProfile: &armcompute.OSProfile{ComputerName: to.Ptr("master-0"), AdminUsername: to.Ptr("azureuser"),
				CustomData: to.Ptr(base64.StdEncoding.EncodeToString([]byte("#cloud-config\n"))),
				LinuxConfiguration: &armcompute.LinuxConfiguration{DisablePasswordAuthentication: to.Ptr(true),
					SSH: &armcompute.SSHConfiguration{PublicKeys: []*armcompute.SSHPublicKey{{
						Path: to.Ptr("/home/azureuser/.ssh/authorized_keys"), KeyData: to.Ptr("ssh-ed25519 " +
							"AAAAC3NzaC1lZDI1NTE5AAAAIB2HFqTTtm0ay9ddLsbbWcmXu8VPQh1jp4qZ/mX0nBBE"),
					}}}}},
			NetworkProfile:     &armcompute.NetworkProfile{NetworkInterfaces: []*armcompute.NetworkInterfaceReference{{ID: nic.ID}}},
			DiagnosticsProfile: &armcompute.DiagnosticsProfile{BootDiagnostics: &armcompute.BootDiagnostics{Enabled: to.Ptr(true)}},
		},
	}
	unknownImage := vm
	unknownImage.Properties = &armcompute.VirtualMachineProperties{HardwareProfile: vm.Properties.HardwareProfile,
		OSProfile: vm.Properties.OSProfile, NetworkProfile: vm.Properties.NetworkProfile,
		StorageProfile: &armcompute.StorageProfile{ImageReference: &armcompute.ImageReference{Publisher: to.Ptr("Nobody"), Offer: to.Ptr("x"),
			SKU: to.Ptr("y"), Version: to.Ptr("latest")}}}
	if _, err := vms.BeginCreateOrUpdate(ctx, testGroup, "master-0", unknownImage, nil); err == nil || responseError(t,
		err).ErrorCode != "PlatformImageNotFound" {
		t.Errorf("an unknown marketplace image: %v", err)
	}
	p6, err := vms.BeginCreateOrUpdate(ctx, testGroup, "master-0", vm, nil)
	created := done(t, p6, err)
	if created.Properties.OSProfile.CustomData != nil {
		t.Error("the VM's custom data is returned")
	}
	boots, err := f.booter.WaitBoots(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	in := boots[0]
	if !in.Linux || in.ComputerName != "master-0" || in.PrivateIP != netip.MustParseAddr("10.0.255.5") || string(in.CustomData) != "#cloud-config\n" ||
		in.ImageID != "Canonical:ubuntu-24_04-lts:server:latest" || !strings.HasSuffix(in.ID, "/virtualMachines/master-0") {
		t.Errorf("booted %+v", in)
	}

	p7, err := vms.BeginRunCommand(ctx, testGroup, "master-0", armcompute.RunCommandInput{CommandID: to.Ptr("RunShellScript"),
		Script: []*string{to.Ptr("echo hi")}}, nil)
	res := done(t, p7, err)
	if len(res.Value) != 1 || !strings.Contains(*res.Value[0].Code, "failed/127") || !strings.Contains(*res.Value[0].Message,
		"[stderr]\nsh: not found") {
		t.Errorf("run command result %+v", res.Value)
	}
	diag, err := vms.RetrieveBootDiagnosticsData(ctx, testGroup, "master-0", nil)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := f.s.HTTPClient().Get(*diag.SerialConsoleLogBlobURI)
	if err != nil || serial.StatusCode != http.StatusOK {
		t.Fatalf("serial console: %v %v", serial, err)
	}
	_ = serial.Body.Close()

	inUse := func(what string, err error, code string) {
		t.Helper()
		if err == nil || responseError(t, err).ErrorCode != code {
			t.Errorf("deleting %s in use: %v, want %s", what, err, code)
		}
	}
	_, err = nics.BeginDelete(ctx, testGroup, "master-0-nic", nil)
	inUse("the VM's NIC", err, "NicInUse")
	_, err = lbs.BeginDelete(ctx, testGroup, "apiserver", nil)
	inUse("the NIC's load balancer", err, "LoadBalancerInUseByVirtualMachineScaleSet")
	_, err = pips.BeginDelete(ctx, testGroup, "apiserver-ip", nil)
	inUse("the load balancer's address", err, "PublicIPAddressCannotBeDeleted")
	_, err = f.network.NewSecurityGroupsClient().BeginDelete(ctx, testGroup, "masters", nil)
	inUse("the subnet's security group", err, "InUseNetworkSecurityGroupCannotBeDeleted")

	// The pool lists the NIC's IP configuration; a PUT of the load balancer as read is refused,
	// its tags change through UpdateTags.
	got, err := lbs.Get(ctx, testGroup, "apiserver", nil)
	if err != nil {
		t.Fatal(err)
	}
	members := got.Properties.BackendAddressPools[0].Properties.BackendIPConfigurations
	if len(members) != 1 || *members[0].ID != *nic.ID+"/ipConfigurations/ip" {
		t.Errorf("pool members %v, want the NIC's IP configuration", members)
	}
	_, err = lbs.BeginCreateOrUpdate(ctx, testGroup, "apiserver", got.LoadBalancer, nil)
	if err == nil || responseError(t, err).ErrorCode != "ModificationOfNICIpConfigBackendPoolNotSupported" {
		t.Errorf("a PUT of the load balancer as read: %v", err)
	}
	tagged, err := lbs.UpdateTags(ctx, testGroup, "apiserver", armnetwork.TagsObject{Tags: map[string]*string{"a": to.Ptr("b")}}, nil)
	if err != nil || len(tagged.Tags) != 1 || *tagged.Tags["a"] != "b" {
		t.Errorf("UpdateTags: %v, %v", tagged.Tags, err)
	}

	p8, err := vms.BeginDelete(ctx, testGroup, "master-0", nil)
	done(t, p8, err)
	if got := f.booter.Shutdowns(); len(got) != 1 || got[0].ID != in.ID {
		t.Errorf("shut down %+v", got)
	}
	// The NIC stays reserved for the deleted VM for a while (Azure: 180 s).
	_, err = nics.BeginDelete(ctx, testGroup, "master-0-nic", nil)
	inUse("the NIC of a VM just deleted", err, "NicReservedForAnotherVm")
	time.Sleep(300 * time.Millisecond)
	p9, err := nics.BeginDelete(ctx, testGroup, "master-0-nic", nil)
	done(t, p9, err)
	p10, err := lbs.BeginDelete(ctx, testGroup, "apiserver", nil)
	done(t, p10, err)
	p11, err := pips.BeginDelete(ctx, testGroup, "apiserver-ip", nil)
	done(t, p11, err)
	p12, err := f.network.NewSubnetsClient().BeginCreateOrUpdate(ctx, testGroup, "vnet", "masters",
		armnetwork.Subnet{Properties: &armnetwork.SubnetPropertiesFormat{AddressPrefix: to.Ptr("10.0.255.0/24")}}, nil)
	done(t, p12, err)
	p13, err := f.network.NewSecurityGroupsClient().BeginDelete(ctx, testGroup, "masters", nil)
	done(t, p13, err)
	p14, err := f.network.NewVirtualNetworksClient().BeginDelete(ctx, testGroup, "vnet", nil)
	done(t, p14, err)
	if ids := f.s.ResourceIDs(testGroup); len(ids) != 0 {
		t.Errorf("left %v", ids)
	}
}
