package armtest

import (
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
)

// scaleOut raises scale set "win"'s capacity and returns the operation's error.
func (f *fixture) scaleOut(t *testing.T, n int64) error {
	t.Helper()
	ctx := testContext(t)
	p, err := f.compute.NewVirtualMachineScaleSetsClient().BeginUpdate(ctx, testGroup, "win", capacity(n), nil)
	if err != nil {
		return err
	}
	_, err = p.PollUntilDone(ctx, fast)
	return err
}

// states are the instances' provisioning and power states, in instance ID order.
func (f *fixture) states(t *testing.T, name string) []string {
	t.Helper()
	var out []string
	for _, vm := range f.instances(t, name) {
		st := *vm.Properties.ProvisioningState
		for _, s := range vm.Properties.InstanceView.Statuses {
			if strings.HasPrefix(*s.Code, "PowerState/") || strings.HasPrefix(*s.Code, "ProvisioningState/failed/") {
				st += " " + *s.Code
			}
		}
		out = append(out, st)
	}
	return out
}

func TestComputeFailures(t *testing.T) {
	f := newFixture(t, Options{})
	f.createScaleSet(t, "win", f.windowsScaleSet(1, "cfg"))
	id := f.scaleSetID("win")

	// AllocationFailed: the new instances are Failed and never start.
	f.s.FailAllocation(Match{Method: http.MethodPatch, Path: `/win$`, Times: 1})
	err := f.scaleOut(t, 3)
	if re := responseError(t, err); re.ErrorCode != "AllocationFailed" || !strings.Contains(err.Error(), "aka.ms/allocation-guidance") {
		t.Fatalf("allocation failure: %v", err)
	}
	if got := strings.Join(f.states(t, "win"), "; "); got != "Succeeded PowerState/running; Failed ProvisioningState/failed/AllocationFailed; "+
		"Failed ProvisioningState/failed/AllocationFailed" {
		t.Fatalf("after AllocationFailed: %s", got)
	}

	// OSProvisioningTimedOut: the first new instance is Failed but runs, the other succeeded.
	f.s.TimeOutProvisioning(Match{Method: http.MethodPatch, Path: `/win$`, Times: 1})
	err = f.scaleOut(t, 5)
	if re := responseError(t, err); re.ErrorCode != "OSProvisioningTimedOut" ||
		!strings.Contains(err.Error(), "OS Provisioning for VM 'win_3' did not finish") {
		t.Fatalf("provisioning time-out: %v", err)
	}
	if got := f.states(t, "win")[3:]; got[0] != "Failed ProvisioningState/failed/OSProvisioningTimedOut PowerState/running" ||
		got[1] != "Succeeded PowerState/running" {
		t.Fatalf("after OSProvisioningTimedOut: %v", got)
	}
	if len(f.s.Instances(id)) != 5 {
		t.Fatalf("%d instances, want 5", len(f.s.Instances(id)))
	}

	// A preempted scale-out ends Canceled and changes nothing.
	f.s.PreemptOperations(Match{Method: http.MethodPatch, Path: `/win$`, Times: 1})
	err = f.scaleOut(t, 7)
	if re := responseError(t, err); re.ErrorCode != "OperationPreempted" {
		t.Fatalf("preemption: %v", err)
	}
	if n := len(f.s.Instances(id)); n != 5 {
		t.Fatalf("a preempted scale-out left %d instances, want 5", n)
	}
	if ss, _ := f.compute.NewVirtualMachineScaleSetsClient().Get(testContext(t), testGroup, "win", nil); *ss.SKU.Capacity != 5 {
		t.Fatalf("a preempted scale-out left capacity %d, want 5", *ss.SKU.Capacity)
	}

	// The core quota: 5 machines of 4 vCPUs use 20; 2 more need 8.
	f.s.LimitCores("standardDSv5Family", 24)
	err = f.scaleOut(t, 7)
	if re := responseError(t, err); re.StatusCode != http.StatusConflict || re.ErrorCode != "OperationNotAllowed" ||
		!strings.Contains(err.Error(), "exceeding approved standardDSv5Family Cores quota") ||
		!strings.Contains(err.Error(), "Current Limit: 24, Current Usage: 20, Additional Required: 8, (Minimum) New Limit Required: 28") {
		t.Fatalf("quota: %v", err)
	}
	if err := f.scaleOut(t, 6); err != nil {
		t.Fatalf("a scale-out within the quota: %v", err)
	}
	f.s.LimitCores("standardDSv5Family", -1)
}

func TestSpotEviction(t *testing.T) {
	f := newFixture(t, Options{})
	m := f.windowsScaleSet(2, "cfg")
	f.createScaleSet(t, "reg", f.windowsScaleSet(1, "cfg"))
	vp := m.Properties.VirtualMachineProfile
	vp.Priority = to.Ptr(armcompute.VirtualMachinePriorityTypesSpot)
	vp.EvictionPolicy = to.Ptr(armcompute.VirtualMachineEvictionPolicyTypesDelete)
	vp.BillingProfile = &armcompute.BillingProfile{MaxPrice: to.Ptr(-1.0)}
	f.createScaleSet(t, "spot", m)
	if _, err := f.booter.WaitBoots(testContext(t), 3); err != nil {
		t.Fatal(err)
	}
	if err := f.s.Evict(f.scaleSetID("reg"), "0"); err == nil {
		t.Fatal("a Regular instance was evicted")
	}
	if err := f.s.Evict(f.scaleSetID("spot"), "1"); err != nil {
		t.Fatal(err)
	}
	ins := f.s.Instances(f.scaleSetID("spot"))
	if len(ins) != 1 || ins[0].InstanceID != "0" {
		t.Fatalf("after the eviction: %v", names(ins))
	}
	ss, err := f.compute.NewVirtualMachineScaleSetsClient().Get(testContext(t), testGroup, "spot", nil)
	if err != nil || *ss.SKU.Capacity != 1 {
		t.Fatalf("capacity after the eviction: %v %v", ss.SKU, err)
	}
}
