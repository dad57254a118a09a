package armtest

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
)

// update applies u to scale set "win", the one the tests update.
func (f *fixture) update(t *testing.T, u armcompute.VirtualMachineScaleSetUpdate) armcompute.VirtualMachineScaleSet {
	t.Helper()
	ctx := testContext(t)
	p, err := f.compute.NewVirtualMachineScaleSetsClient().BeginUpdate(ctx, testGroup, "win", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.PollUntilDone(ctx, fast)
	if err != nil {
		t.Fatal(err)
	}
	return res.VirtualMachineScaleSet
}

func capacity(n int64) armcompute.VirtualMachineScaleSetUpdate {
	return armcompute.VirtualMachineScaleSetUpdate{SKU: &armcompute.SKU{Capacity: to.Ptr(n)}}
}

// instances lists a scale set's instances with their instance view, through every page.
func (f *fixture) instances(t *testing.T, name string) []*armcompute.VirtualMachineScaleSetVM {
	t.Helper()
	ctx := testContext(t)
	pager := f.compute.NewVirtualMachineScaleSetVMsClient().NewListPager(testGroup, name,
		&armcompute.VirtualMachineScaleSetVMsClientListOptions{Expand: to.Ptr("instanceView")})
	var out []*armcompute.VirtualMachineScaleSetVM
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page.Value...)
	}
	return out
}

// nicAddresses maps instance resource IDs to the private IP and IP forwarding of their NIC, as
// the network interface pager reports them.
func (f *fixture) nicAddresses(t *testing.T, name string) map[string]string {
	t.Helper()
	ctx := testContext(t)
	pager := f.network.NewInterfacesClient().NewListVirtualMachineScaleSetNetworkInterfacesPager(testGroup, name, nil)
	out := map[string]string{}
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, nic := range page.Value {
			p := nic.Properties
			if p == nil || p.VirtualMachine == nil || len(p.IPConfigurations) != 1 || p.EnableIPForwarding == nil || !*p.EnableIPForwarding {
				t.Fatalf("NIC %s: want a VM, one IP configuration and IP forwarding, got %+v", *nic.ID, p)
			}
			out[*p.VirtualMachine.ID] = *p.IPConfigurations[0].Properties.PrivateIPAddress
		}
	}
	return out
}

func names(ins []Instance) []string {
	var out []string
	for _, in := range ins {
		out = append(out, in.ComputerName)
	}
	return out
}

func TestScaleSetScalesOutAndIn(t *testing.T) {
	f := newFixture(t, Options{PageSize: 2})
	ctx := testContext(t)
	id := f.scaleSetID("win")

	created := f.createScaleSet(t, "win", f.windowsScaleSet(0, "config-v1"))
	if got := *created.Properties.ProvisioningState; got != "Succeeded" {
		t.Fatalf("provisioningState after create = %q", got)
	}
	if *created.ID != id || len(f.s.Instances(id)) != 0 {
		t.Fatalf("created %s with %d instances", *created.ID, len(f.s.Instances(id)))
	}

	f.update(t, capacity(3))
	if _, err := f.booter.WaitBoots(ctx, 3); err != nil {
		t.Fatal(err)
	}
	f.createScaleSet(t, "win", f.windowsScaleSet(5, "config-v1")) // PUT replaces: 3 → 5
	booted, err := f.booter.WaitBoots(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}

	vms := f.instances(t, "win")
	nics := f.nicAddresses(t, "win")
	if len(vms) != 5 || len(nics) != 5 {
		t.Fatalf("%d instances and %d NICs, want 5", len(vms), len(nics))
	}
	for i, vm := range vms {
		want := "kwwin00000" + string(rune('0'+i))
		p := vm.Properties
		if *vm.InstanceID != string(rune('0'+i)) || *p.OSProfile.ComputerName != want || !*p.LatestModelApplied || *p.ProvisioningState != "Succeeded" {
			t.Errorf("instance %d: id %s, name %s, latest model %v, state %s", i, *vm.InstanceID, *p.OSProfile.ComputerName, *p.LatestModelApplied,
				*p.ProvisioningState)
		}
		if p.OSProfile.AdminPassword != nil || p.OSProfile.CustomData != nil {
			t.Errorf("instance %d returns its secrets", i)
		}
		if iv := p.InstanceView; iv == nil || len(iv.Statuses) != 2 || *iv.Statuses[1].Code != "PowerState/running" {
			t.Errorf("instance %d: instance view %+v", i, iv)
		}
		ip := nics[*vm.ID]
		if wantIP := "10.0.1." + string(rune('4'+i)); ip != wantIP {
			t.Errorf("instance %d: NIC address %q, want %s (first usable address of 10.0.1.0/24 is .4)", i, ip, wantIP)
		}
	}
	for _, in := range booted {
		vmID := id + "/virtualMachines/" + in.InstanceID
		if string(in.CustomData) != "config-v1" || !in.IPForwarding || in.ImageID != testImage || in.PrivateIP.String() != nics[vmID] ||
			in.ScaleSetID != id {
			t.Errorf("booted %+v; NIC says %s", in, nics[vmID])
		}
	}

	// Scale in: the highest instance IDs go (default scale-in policy).
	f.update(t, capacity(3))
	if got := names(f.booter.Shutdowns()); strings.Join(got, ",") != "kwwin000003,kwwin000004" {
		t.Fatalf("shut down %v, want kwwin000003 and kwwin000004", got)
	}
	if got := names(f.s.Instances(id)); strings.Join(got, ",") != "kwwin000000,kwwin000001,kwwin000002" {
		t.Fatalf("instances after scale-in: %v", got)
	}
	// Instance IDs are never reused; freed addresses are.
	f.update(t, capacity(4))
	ins := f.s.Instances(id)
	if last := ins[len(ins)-1]; last.InstanceID != "5" || last.ComputerName != "kwwin000005" || last.PrivateIP.String() != "10.0.1.7" {
		t.Fatalf("new instance %+v, want ID 5, kwwin000005, 10.0.1.7", last)
	}
}

func TestNewInstancesGetTheCurrentModel(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := testContext(t)
	f.createScaleSet(t, "win", f.windowsScaleSet(2, "config-v1"))
	f.update(t, armcompute.VirtualMachineScaleSetUpdate{
		SKU: &armcompute.SKU{Capacity: to.Ptr[int64](3)},
		Properties: &armcompute.VirtualMachineScaleSetUpdateProperties{
			VirtualMachineProfile: &armcompute.VirtualMachineScaleSetUpdateVMProfile{
				OSProfile: &armcompute.VirtualMachineScaleSetUpdateOSProfile{CustomData: to.Ptr(base64.StdEncoding.EncodeToString([]byte("config-v2")))},
			},
		},
	})
	booted, err := f.booter.WaitBoots(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range booted {
		want := map[string]string{"0": "config-v1", "1": "config-v1", "2": "config-v2"}[in.InstanceID]
		if string(in.CustomData) != want {
			t.Errorf("instance %s booted with custom data %q, want %q", in.InstanceID, in.CustomData, want)
		}
	}
	for _, vm := range f.instances(t, "win") {
		if want := *vm.InstanceID == "2"; *vm.Properties.LatestModelApplied != want {
			t.Errorf("instance %s: latestModelApplied %v, want %v", *vm.InstanceID, *vm.Properties.LatestModelApplied, want)
		}
	}
	// A capacity-only change keeps the model: the instances stay as they are.
	f.update(t, capacity(4))
	for _, vm := range f.instances(t, "win") {
		if want := *vm.InstanceID >= "2"; *vm.Properties.LatestModelApplied != want {
			t.Errorf("after scaling: instance %s latestModelApplied %v, want %v", *vm.InstanceID, *vm.Properties.LatestModelApplied, want)
		}
	}
}

// With the Manual upgrade policy each custom data change is a model its older instances keep:
// at 10 live models Compute refuses another change until manualupgrade brings them to the latest.
func TestModelLimit(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := testContext(t)
	vmss := f.compute.NewVirtualMachineScaleSetsClient()
	f.createScaleSet(t, "win", f.windowsScaleSet(1, "config-1"))
	scaleOut := func(n int) error {
		u := armcompute.VirtualMachineScaleSetUpdate{
			SKU: &armcompute.SKU{Capacity: to.Ptr(int64(n))},
			Properties: &armcompute.VirtualMachineScaleSetUpdateProperties{VirtualMachineProfile: &armcompute.VirtualMachineScaleSetUpdateVMProfile{
				OSProfile: &armcompute.VirtualMachineScaleSetUpdateOSProfile{
					CustomData: to.Ptr(base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("config-%d", n)))),
				},
			}},
		}
		p, err := vmss.BeginUpdate(ctx, testGroup, "win", u, nil)
		if err == nil {
			_, err = p.PollUntilDone(ctx, fast)
		}
		return err
	}
	for n := 2; n <= 10; n++ {
		if err := scaleOut(n); err != nil {
			t.Fatalf("model change %d: %v", n, err)
		}
	}
	err := scaleOut(11)
	if re := responseError(t, err); re.StatusCode != http.StatusConflict || !strings.Contains(err.Error(), "limit of 10 models") {
		t.Fatalf("an 11th model: %v", err)
	}
	var ids []string
	for i := range 10 {
		ids = append(ids, strconv.Itoa(i))
	}
	p, err := vmss.BeginUpdateInstances(ctx, testGroup, "win",
		armcompute.VirtualMachineScaleSetVMInstanceRequiredIDs{InstanceIDs: to.SliceOfPtrs(ids...)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.PollUntilDone(ctx, fast); err != nil {
		t.Fatal(err)
	}
	for _, vm := range f.instances(t, "win") {
		if !*vm.Properties.LatestModelApplied {
			t.Errorf("instance %s is not on the latest model after manualupgrade", *vm.InstanceID)
		}
	}
	// The machines keep the custom data they booted with.
	if in := f.s.Instances(f.scaleSetID("win"))[0]; string(in.CustomData) != "config-1" {
		t.Errorf("instance 0 has custom data %q after manualupgrade, want config-1", in.CustomData)
	}
	if err := scaleOut(11); err != nil {
		t.Fatalf("a model change after manualupgrade: %v", err)
	}
}

func TestDeleteInstances(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := testContext(t)
	vmss := f.compute.NewVirtualMachineScaleSetsClient()
	id := f.scaleSetID("win")
	f.createScaleSet(t, "win", f.windowsScaleSet(5, "cfg"))
	if _, err := f.booter.WaitBoots(ctx, 5); err != nil {
		t.Fatal(err)
	}

	p, err := vmss.BeginDeleteInstances(ctx, testGroup, "win",
		armcompute.VirtualMachineScaleSetVMInstanceRequiredIDs{InstanceIDs: to.SliceOfPtrs("1", "3")},
		&armcompute.VirtualMachineScaleSetsClientBeginDeleteInstancesOptions{ForceDeletion: to.Ptr(true)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.PollUntilDone(ctx, fast); err != nil {
		t.Fatal(err)
	}
	if got := names(f.booter.Shutdowns()); strings.Join(got, ",") != "kwwin000001,kwwin000003" {
		t.Fatalf("shut down %v, want kwwin000001,kwwin000003", got)
	}
	if got := names(f.s.Instances(id)); strings.Join(got, ",") != "kwwin000000,kwwin000002,kwwin000004" {
		t.Fatalf("instances left: %v", got)
	}
	got, err := vmss.Get(ctx, testGroup, "win", nil)
	if err != nil {
		t.Fatal(err)
	}
	if *got.SKU.Capacity != 3 {
		t.Fatalf("capacity after deleting 2 of 5 = %d", *got.SKU.Capacity)
	}

	// Deleting an ID that is gone is refused.
	_, err = vmss.BeginDeleteInstances(ctx, testGroup, "win",
		armcompute.VirtualMachineScaleSetVMInstanceRequiredIDs{InstanceIDs: to.SliceOfPtrs("3")}, nil)
	if re := responseError(t, err); re.StatusCode != http.StatusBadRequest || !strings.Contains(err.Error(), "instanceId 3 is not an active") {
		t.Fatalf("deleting a deleted instance: %v", err)
	}

	// One instance by the VMs API.
	dp, err := f.compute.NewVirtualMachineScaleSetVMsClient().BeginDelete(ctx, testGroup, "win", "0", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dp.PollUntilDone(ctx, fast); err != nil {
		t.Fatal(err)
	}
	if got := names(f.s.Instances(id)); strings.Join(got, ",") != "kwwin000002,kwwin000004" {
		t.Fatalf("instances left: %v", got)
	}

	// The whole scale set.
	sp, err := vmss.BeginDelete(ctx, testGroup, "win", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sp.PollUntilDone(ctx, fast); err != nil {
		t.Fatal(err)
	}
	if n := len(f.booter.Shutdowns()); n != 5 {
		t.Fatalf("%d shutdowns after deleting the scale set, want 5", n)
	}
	_, err = vmss.Get(ctx, testGroup, "win", nil)
	if re := responseError(t, err); re.StatusCode != http.StatusNotFound || re.ErrorCode != "ResourceNotFound" {
		t.Fatalf("GET of a deleted scale set: %v", err)
	}
}

func TestSecretsAreNotReturned(t *testing.T) {
	f := newFixture(t, Options{})
	customData := base64.StdEncoding.EncodeToString([]byte("bootstrap-token-abcdef"))
	res := f.createScaleSet(t, "win", f.windowsScaleSet(1, "bootstrap-token-abcdef"))
	if os := res.Properties.VirtualMachineProfile.OSProfile; os.AdminPassword != nil || os.CustomData != nil {
		t.Fatal("the create result holds adminPassword or customData")
	}
	for _, path := range []string{
		"/subscriptions/" + f.s.SubscriptionID() + "/resourceGroups/" + testGroup +
			"/providers/Microsoft.Compute/virtualMachineScaleSets/win?api-version=" + ComputeAPIVersion,
		"/subscriptions/" + f.s.SubscriptionID() + "/resourceGroups/" + testGroup +
			"/providers/Microsoft.Compute/virtualMachineScaleSets?api-version=" + ComputeAPIVersion,
		"/subscriptions/" + f.s.SubscriptionID() + "/resourceGroups/" + testGroup +
			"/providers/Microsoft.Compute/virtualMachineScaleSets/win/virtualMachines?api-version=" + ComputeAPIVersion,
	} {
		status, body := f.rawRequest(t, http.MethodGet, path, "")
		if status != http.StatusOK || strings.Contains(string(body), testPassword) || strings.Contains(string(body),
			customData) || strings.Contains(string(body), "adminPassword") {
			t.Errorf("GET %s: %d %s", path, status, body)
		}
	}
	// A PUT without the secrets (a read-modify-write) keeps them: new instances still get the data.
	m := f.windowsScaleSet(2, "")
	m.Properties.VirtualMachineProfile.OSProfile.AdminPassword, m.Properties.VirtualMachineProfile.OSProfile.CustomData = nil, nil
	f.createScaleSet(t, "win", m)
	ins := f.s.Instances(f.scaleSetID("win"))
	if string(ins[1].CustomData) != "bootstrap-token-abcdef" {
		t.Fatalf("instance created after a PUT without customData got %q", ins[1].CustomData)
	}
}

// A Windows instance's serial log is the Special Administration Console's: what the machine
// writes to COM1 is not in it.
func TestBootDiagnosticsSerialLog(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := testContext(t)
	f.createScaleSet(t, "win", f.windowsScaleSet(1, "cfg"))
	res, err := f.compute.NewVirtualMachineScaleSetVMsClient().RetrieveBootDiagnosticsData(ctx, testGroup, "win", "0",
		&armcompute.VirtualMachineScaleSetVMsClientRetrieveBootDiagnosticsDataOptions{SasURIExpirationTimeInMinutes: to.Ptr[int32](5)})
	if err != nil {
		t.Fatal(err)
	}
	uri := *res.SerialConsoleLogBlobURI
	resp, err := f.s.HTTPClient().Get(uri) // a SAS URI: no bearer token
	if err != nil {
		t.Fatal(err)
	}
	log, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(log) != sacBanner {
		t.Fatalf("GET %s: %d %q", uri, resp.StatusCode, log)
	}
	resp, err = f.s.HTTPClient().Get(strings.Replace(uri, "/bootdiagnostics/", "/bootdiagnostics/x", 1))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("GET of a forged URI: %d, want 403", resp.StatusCode)
	}
}

func TestScaleSetChecks(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := testContext(t)
	vmss := f.compute.NewVirtualMachineScaleSetsClient()
	tests := []struct {
		name     string
		change   func(*armcompute.VirtualMachineScaleSet)
		status   int
		code     string
		contains string
	}{
		{"overprovision", func(m *armcompute.VirtualMachineScaleSet) { m.Properties.Overprovision = to.Ptr(true) },
			http.StatusBadRequest, "InvalidParameter", "Set properties.overprovision to false"},
		{"overprovision unset", func(m *armcompute.VirtualMachineScaleSet) { m.Properties.Overprovision = nil },
			http.StatusBadRequest, "InvalidParameter", "overprovision is true or unset"},
		{"custom data too large", func(m *armcompute.VirtualMachineScaleSet) {
			m.Properties.VirtualMachineProfile.OSProfile.CustomData = to.Ptr(base64.StdEncoding.EncodeToString(make([]byte, 65536)))
		}, http.StatusBadRequest, "InvalidParameter", "maximum length of 87380 characters"},
		{"custom data not base64", func(m *armcompute.VirtualMachineScaleSet) {
			m.Properties.VirtualMachineProfile.OSProfile.CustomData = to.Ptr("not base64!")
		}, http.StatusBadRequest, "InvalidParameter", "must be in Base64 encoding"},
		{"unknown image", func(m *armcompute.VirtualMachineScaleSet) {
			m.Properties.VirtualMachineProfile.StorageProfile.ImageReference.ID = to.Ptr(strings.Replace(testImage, "1.0.0", "9.9.9", 1))
		}, http.StatusNotFound, "NotFound", "9.9.9' cannot be found"},
		{"prefix too long", func(m *armcompute.VirtualMachineScaleSet) {
			m.Properties.VirtualMachineProfile.OSProfile.ComputerNamePrefix = to.Ptr("windowspool")
		}, http.StatusBadRequest, "InvalidParameter", "must be 1 to 9 characters"},
		{"weak password", func(m *armcompute.VirtualMachineScaleSet) {
			m.Properties.VirtualMachineProfile.OSProfile.AdminPassword = to.Ptr("password")
		}, http.StatusBadRequest, "InvalidParameter", "3 of password complexity requirements"},
		{"unknown subnet", func(m *armcompute.VirtualMachineScaleSet) {
			nic := m.Properties.VirtualMachineProfile.NetworkProfile.NetworkInterfaceConfigurations[0]
			nic.Properties.IPConfigurations[0].Properties.Subnet.ID = to.Ptr(f.subnetID + "x")
		}, http.StatusBadRequest, "InvalidResourceReference", "was not found"},
		{"flexible", func(m *armcompute.VirtualMachineScaleSet) {
			m.Properties.OrchestrationMode = to.Ptr(armcompute.OrchestrationModeFlexible)
		}, http.StatusBadRequest, "InvalidParameter", "Uniform scale sets only"},
		{"subnet too small", func(m *armcompute.VirtualMachineScaleSet) {
			m.SKU.Capacity, m.Properties.SinglePlacementGroup = to.Ptr[int64](252), to.Ptr(false)
		}, http.StatusBadRequest, "SubnetIsFull", "does not have enough capacity"},
		{"over 100 in a single placement group", func(m *armcompute.VirtualMachineScaleSet) { m.SKU.Capacity = to.Ptr[int64](101) },
			http.StatusBadRequest, "InvalidParameter", "singlePlacementGroup true (the default) holds at most 100"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := f.windowsScaleSet(1, "cfg")
			tt.change(&m)
			_, err := vmss.BeginCreateOrUpdate(ctx, testGroup, "bad", m, nil)
			re := responseError(t, err)
			if re.StatusCode != tt.status || re.ErrorCode != tt.code || !strings.Contains(err.Error(), tt.contains) {
				t.Fatalf("got %d %s: %v; want %d %s containing %q", re.StatusCode, re.ErrorCode, err, tt.status, tt.code, tt.contains)
			}
			if strings.Contains(err.Error(), testPassword) {
				t.Fatal("the error shows the admin password")
			}
		})
	}
	if len(f.s.Instances(f.scaleSetID("bad"))) != 0 || len(f.s.subnetsAddresses()) != 0 {
		t.Fatal("a rejected scale set left instances or addresses behind")
	}

	// Immutable properties.
	f.createScaleSet(t, "win", f.windowsScaleSet(0, "cfg"))
	m := f.windowsScaleSet(0, "cfg")
	m.Properties.VirtualMachineProfile.OSProfile.ComputerNamePrefix = to.Ptr("other")
	_, err := vmss.BeginCreateOrUpdate(ctx, testGroup, "win", m, nil)
	if re := responseError(t, err); re.StatusCode != http.StatusConflict || re.ErrorCode != "PropertyChangeNotAllowed" {
		t.Fatalf("changing computerNamePrefix: %v", err)
	}
}

func TestImages(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := testContext(t)
	managed := f.s.ResourceGroupID("images") + "/providers/Microsoft.Compute/images/ws2022-base"
	if err := f.s.AddImage(managed, map[string]string{"kubewin.io/windows-build": "20348"}); err != nil {
		t.Fatal(err)
	}
	if err := f.s.AddImage(strings.Replace(testImage, "1.0.0", "1.10.0", 1), nil); err != nil {
		t.Fatal(err)
	}
	if err := f.s.AddImage("/subscriptions/x/resourceGroups/y/providers/Microsoft.Compute/disks/z", nil); err == nil {
		t.Fatal("AddImage accepted a disk ID")
	}
	img, err := f.compute.NewImagesClient().Get(ctx, "images", "ws2022-base", nil)
	if err != nil {
		t.Fatal(err)
	}
	if *img.ID != managed || *img.Tags["kubewin.io/windows-build"] != "20348" {
		t.Fatalf("managed image %s tags %v", *img.ID, img.Tags)
	}
	ver, err := f.compute.NewGalleryImageVersionsClient().Get(ctx, "images", "kubewin", "ws2022", "1.0.0", nil)
	if err != nil {
		t.Fatal(err)
	}
	if *ver.ID != testImage || *ver.Tags["kubewin.io/windows-build"] != "20348" ||
		*ver.Properties.ProvisioningState != armcompute.GalleryProvisioningStateSucceeded {
		t.Fatalf("gallery image version %+v", ver)
	}
	_, err = f.compute.NewGalleryImageVersionsClient().Get(ctx, "images", "kubewin", "ws2022", "2.0.0", nil)
	if re := responseError(t, err); re.StatusCode != http.StatusNotFound {
		t.Fatalf("GET of a missing version: %v", err)
	}

	// The image definition's ID picks its highest version (1.10.0 > 1.0.0).
	m := f.windowsScaleSet(1, "cfg")
	m.Properties.VirtualMachineProfile.StorageProfile.ImageReference.ID = to.Ptr(strings.TrimSuffix(testImage, "/versions/1.0.0"))
	f.createScaleSet(t, "latest", m)
	if got := f.s.Instances(f.scaleSetID("latest"))[0].ImageID; !strings.HasSuffix(got, "/versions/1.10.0") {
		t.Fatalf("instance image %s, want version 1.10.0", got)
	}
	m.Properties.VirtualMachineProfile.StorageProfile.ImageReference.ID = to.Ptr(managed)
	f.createScaleSet(t, "managed", m)
	if got := f.s.Instances(f.scaleSetID("managed"))[0].ImageID; got != managed {
		t.Fatalf("instance image %s, want %s", got, managed)
	}
}

// subnetsAddresses returns every allocated address of every subnet.
func (s *Server) subnetsAddresses() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, v := range s.vnets {
		for _, sn := range v.subnets {
			for a := range sn.used {
				out = append(out, a.String())
			}
		}
	}
	return out
}

// What an update may change of an existing scale set: zones only added, priority and a subnet's
// virtual network never, and tags replaced as a whole by a PATCH.
func TestScaleSetUpdateRules(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := testContext(t)
	vmss := f.compute.NewVirtualMachineScaleSetsClient()
	m := f.windowsScaleSet(1, "cfg")
	m.Zones, m.Tags = to.SliceOfPtrs("1"), map[string]*string{"a": to.Ptr("1"), "b": to.Ptr("2")}
	f.createScaleSet(t, "win", m)

	refused := func(what string, u armcompute.VirtualMachineScaleSetUpdate) {
		t.Helper()
		_, err := vmss.BeginUpdate(ctx, testGroup, "win", u, nil)
		if re := responseError(t, err); re.StatusCode != http.StatusConflict || re.ErrorCode != "PropertyChangeNotAllowed" {
			t.Fatalf("%s: %v", what, err)
		}
	}
	refused("replacing zone 1", armcompute.VirtualMachineScaleSetUpdate{Zones: to.SliceOfPtrs("2")})
	other, err := f.s.AddVirtualNetwork(VirtualNetwork{ResourceGroup: testGroup, Name: "other", AddressPrefixes: []string{"10.9.0.0/16"},
		Subnets: map[string]string{"nodes": "10.9.0.0/24"}})
	if err != nil {
		t.Fatal(err)
	}
	refused("a subnet of another virtual network", armcompute.VirtualMachineScaleSetUpdate{
		Properties: &armcompute.VirtualMachineScaleSetUpdateProperties{
			VirtualMachineProfile: &armcompute.VirtualMachineScaleSetUpdateVMProfile{NetworkProfile: &armcompute.VirtualMachineScaleSetUpdateNetworkProfile{
				NetworkInterfaceConfigurations: []*armcompute.VirtualMachineScaleSetUpdateNetworkConfiguration{{
					Name: m.Properties.VirtualMachineProfile.NetworkProfile.NetworkInterfaceConfigurations[0].Name,
					Properties: &armcompute.VirtualMachineScaleSetUpdateNetworkConfigurationProperties{
						IPConfigurations: []*armcompute.VirtualMachineScaleSetUpdateIPConfiguration{{
							Name: m.Properties.VirtualMachineProfile.NetworkProfile.NetworkInterfaceConfigurations[0].Properties.IPConfigurations[0].Name,
							Properties: &armcompute.VirtualMachineScaleSetUpdateIPConfigurationProperties{
								Subnet: &armcompute.APIEntityReference{ID: to.Ptr(other + "/subnets/nodes")},
							},
						}},
					},
				}},
			}},
		}})
	spot := f.windowsScaleSet(1, "cfg")
	spot.Zones = m.Zones
	spot.Properties.VirtualMachineProfile.Priority = to.Ptr(armcompute.VirtualMachinePriorityTypesSpot)
	if _, err := vmss.BeginCreateOrUpdate(ctx, testGroup, "win", spot, nil); responseError(t, err).ErrorCode != "PropertyChangeNotAllowed" {
		t.Fatalf("changing the priority: %v", err)
	}

	got := f.update(t, armcompute.VirtualMachineScaleSetUpdate{Zones: to.SliceOfPtrs("1", "2"), Tags: map[string]*string{"a": to.Ptr("1")}})
	if len(got.Zones) != 2 || len(got.Tags) != 1 || got.Tags["a"] == nil {
		t.Fatalf("after adding zone 2 and dropping tag b: zones %v, tags %v", got.Zones, got.Tags)
	}
	got = f.update(t, capacity(2))
	var zones []string
	for _, vm := range f.instances(t, "win") {
		zones = append(zones, *vm.Zones[0])
	}
	if fmt.Sprint(zones) != "[1 2]" || len(got.Tags) != 1 {
		t.Fatalf("instances' zones %v (want the new one in zone 2), tags %v", zones, got.Tags)
	}
}

// scriptBooter answers every run command with out on standard output.
type scriptBooter struct {
	RecordingBooter
	out []byte
}

func (b *scriptBooter) RunCommand(context.Context, Instance, string) ([]byte, []byte, int, error) {
	return b.out, []byte("warning\n"), 1, nil
}

// A scale set instance runs RunPowerShellScript on Windows (not RunShellScript), one status per
// stream, succeeded whatever the exit code, each stream cut to its last 4,096 bytes.
func TestInstanceRunCommand(t *testing.T) {
	out := []byte(strings.Repeat("x", 5000) + "the end\n")
	b := &scriptBooter{out: out}
	f := newFixture(t, Options{Booter: b})
	ctx := testContext(t)
	f.createScaleSet(t, "win", f.windowsScaleSet(1, "cfg"))
	vms := f.compute.NewVirtualMachineScaleSetVMsClient()
	_, err := vms.BeginRunCommand(ctx, testGroup, "win", "0", armcompute.RunCommandInput{CommandID: to.Ptr("RunShellScript"),
		Script: []*string{to.Ptr("echo hi")}}, nil)
	if re := responseError(t, err); re.ErrorCode != "InvalidParameter" {
		t.Fatalf("RunShellScript on Windows: %v, want InvalidParameter", err)
	}
	p, err := vms.BeginRunCommand(ctx, testGroup, "win", "0", armcompute.RunCommandInput{CommandID: to.Ptr("RunPowerShellScript"),
		Script: []*string{to.Ptr("Write-Output hi")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := p.PollUntilDone(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Value) != 2 || deref(r.Value[0].Code) != "ComponentStatus/StdOut/succeeded" ||
		deref(r.Value[1].Code) != "ComponentStatus/StdErr/succeeded" {
		t.Fatalf("result %+v", r.Value)
	}
	if got := deref(r.Value[0].Message); got != string(out[len(out)-maxRunCommandOutput:]) {
		t.Errorf("standard output: %d bytes ending %q, want the last %d", len(got), got[max(0, len(got)-10):], maxRunCommandOutput)
	}
	if got := deref(r.Value[1].Message); got != "warning\n" {
		t.Errorf("standard error %q", got)
	}
}
