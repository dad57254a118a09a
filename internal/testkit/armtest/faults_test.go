package armtest

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"
)

// requestsTo returns the logged requests with the method whose path contains part.
func requestsTo(s *Server, method, part string) []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Method == method && strings.Contains(strings.ToLower(r.Path), strings.ToLower(part)) {
			out = append(out, r)
		}
	}
	return out
}

func TestOperationPollsInProgress(t *testing.T) {
	f := newFixture(t, Options{InProgressPolls: 3, SettleAfter: time.Minute})
	ctx := testContext(t)
	p, err := f.compute.NewVirtualMachineScaleSetsClient().BeginCreateOrUpdate(ctx, testGroup, "win", f.windowsScaleSet(2, "cfg"), nil)
	if err != nil {
		t.Fatal(err)
	}
	// While the operation runs, the resource says Creating and its instances exist.
	got, err := f.compute.NewVirtualMachineScaleSetsClient().Get(ctx, testGroup, "win", nil)
	if err != nil {
		t.Fatal(err)
	}
	if *got.Properties.ProvisioningState != "Creating" || len(f.booter.Boots()) != 0 {
		t.Fatalf("during the operation: %s, %d boots", *got.Properties.ProvisioningState, len(f.booter.Boots()))
	}
	res, err := p.PollUntilDone(ctx, fast)
	if err != nil {
		t.Fatal(err)
	}
	if *res.Properties.ProvisioningState != "Succeeded" {
		t.Fatalf("after the operation: %s", *res.Properties.ProvisioningState)
	}
	polls := requestsTo(f.s, http.MethodGet, "/operations/")
	if len(polls) != 4 {
		t.Fatalf("%d polls, want 3 InProgress and 1 Succeeded", len(polls))
	}
	if _, err := f.booter.WaitBoots(ctx, 2); err != nil {
		t.Fatal(err)
	}
}

func TestThrottlingIsRetried(t *testing.T) {
	f := newFixture(t, Options{})
	f.createRouteTable(t, "pods")
	fault := f.s.Throttle(Match{Method: http.MethodPut, Path: `/routes/`, Times: 2}, 200*time.Millisecond)
	start := time.Now()
	if err := f.putRoute(t, "pods", "r1", podRoute("10.244.1.0/24", "10.0.1.4")); err != nil {
		t.Fatal(err)
	}
	if fault.Hits() != 2 {
		t.Fatalf("throttled %d times, want 2", fault.Hits())
	}
	if took := time.Since(start); took < 400*time.Millisecond {
		t.Fatalf("two Retry-After: 200ms answers were retried after %s", took)
	}
	var statuses []int
	for _, r := range requestsTo(f.s, http.MethodPut, "/routes/r1") {
		statuses = append(statuses, r.Status)
	}
	if len(statuses) != 3 || statuses[0] != 429 || statuses[1] != 429 || statuses[2] != 201 {
		t.Fatalf("route PUT statuses %v, want [429 429 201]", statuses)
	}
}

func TestServerErrorsAndResetsAreRetried(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := testContext(t)
	f.createScaleSet(t, "win", f.windowsScaleSet(1, "cfg"))
	unavailable := f.s.FailRequests(Match{Method: http.MethodGet, Path: `/virtualMachineScaleSets/win$`, Times: 2}, http.StatusServiceUnavailable,
		"ServiceUnavailable", "try later")
	if _, err := f.compute.NewVirtualMachineScaleSetsClient().Get(ctx, testGroup, "win", nil); err != nil {
		t.Fatal(err)
	}
	reset := f.s.ResetConnections(Match{Method: http.MethodGet, Path: `/virtualMachineScaleSets/win$`, Times: 1})
	if _, err := f.compute.NewVirtualMachineScaleSetsClient().Get(ctx, testGroup, "win", nil); err != nil {
		t.Fatal(err)
	}
	if unavailable.Hits() != 2 || reset.Hits() != 1 {
		t.Fatalf("503 applied %d times, reset %d times", unavailable.Hits(), reset.Hits())
	}
	// A poll may fail too: azcore retries it.
	f.s.FailRequests(Match{Method: http.MethodGet, Path: `/operations/`, Times: 1}, http.StatusInternalServerError, "InternalServerError", "boom")
	f.update(t, capacity(2))
}

func TestConflictIsSurfaced(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := testContext(t)
	f.createScaleSet(t, "win", f.windowsScaleSet(1, "cfg"))
	f.s.FailRequests(Match{Method: http.MethodPatch, Times: 1}, http.StatusConflict, "AnotherOperationInProgress",
		"Another operation on this or dependent resource is in progress.")
	_, err := f.compute.NewVirtualMachineScaleSetsClient().BeginUpdate(ctx, testGroup, "win", capacity(2), nil)
	if re := responseError(t, err); re.StatusCode != http.StatusConflict || re.ErrorCode != "AnotherOperationInProgress" {
		t.Fatalf("got %v", err)
	}
}

func TestWritesDuringAnOperationAreRefused(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := testContext(t)
	hold := f.s.HoldOperations(Match{Method: http.MethodPut})
	// Compute: 409 AnotherOperationInProgress.
	if _, err := f.compute.NewVirtualMachineScaleSetsClient().BeginCreateOrUpdate(ctx, testGroup, "win", f.windowsScaleSet(1, "cfg"), nil); err != nil {
		t.Fatal(err)
	}
	_, err := f.compute.NewVirtualMachineScaleSetsClient().BeginUpdate(ctx, testGroup, "win", capacity(2), nil)
	if re := responseError(t, err); re.StatusCode != http.StatusConflict || re.ErrorCode != "AnotherOperationInProgress" {
		t.Fatalf("update during a create: %v", err)
	}
	// Network: 429 RetryableError, retried by azcore until its retries run out.
	if _, err := f.network.NewRouteTablesClient().BeginCreateOrUpdate(ctx, testGroup, "pods",
		armnetwork.RouteTable{Location: to.Ptr(f.s.Location())}, nil); err != nil {
		t.Fatal(err)
	}
	hold.Remove()
	_, err = f.network.NewRoutesClient().BeginCreateOrUpdate(ctx, testGroup, "pods", "r1", podRoute("10.244.1.0/24", "10.0.1.4"), nil)
	if re := responseError(t, err); re.StatusCode != http.StatusTooManyRequests || re.ErrorCode != "RetryableError" {
		t.Fatalf("route during a route table write: %v", err)
	}
	if n := len(requestsTo(f.s, http.MethodPut, "/routes/r1")); n != 4 {
		t.Fatalf("%d route PUTs, want 1 and 3 retries", n)
	}
}

func TestFailedOperation(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := testContext(t)
	f.s.FailOperations(Match{Method: http.MethodPut, Path: `/virtualMachineScaleSets/win$`}, "AllocationFailed",
		"Allocation failed. We do not have sufficient capacity for the requested VM size in this region.")
	p, err := f.compute.NewVirtualMachineScaleSetsClient().BeginCreateOrUpdate(ctx, testGroup, "win", f.windowsScaleSet(2, "cfg"), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.PollUntilDone(ctx, fast)
	if re := responseError(t, err); re.ErrorCode != "AllocationFailed" || !strings.Contains(err.Error(), "sufficient capacity") {
		t.Fatalf("got %v", err)
	}
	got, err := f.compute.NewVirtualMachineScaleSetsClient().Get(ctx, testGroup, "win", nil)
	if err != nil {
		t.Fatal(err)
	}
	if *got.Properties.ProvisioningState != "Failed" || len(f.booter.Boots()) != 0 {
		t.Fatalf("after a failed create: %s, %d boots", *got.Properties.ProvisioningState, len(f.booter.Boots()))
	}
}

func TestPollerResumesFromToken(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := testContext(t)
	hold := f.s.HoldOperations(Match{Method: http.MethodPut})
	type begun struct {
		p   *runtime.Poller[armcompute.VirtualMachineScaleSetsClientCreateOrUpdateResponse]
		err error
	}
	started := make(chan begun, 1)
	go func() {
		p, err := f.compute.NewVirtualMachineScaleSetsClient().BeginCreateOrUpdate(ctx, testGroup, "win", f.windowsScaleSet(2, "cfg"), nil)
		started <- begun{p, err}
	}()
	if err := hold.WaitHits(ctx, 1); err != nil {
		t.Fatal(err)
	}
	b := <-started
	p, err := b.p, b.err
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := p.Poll(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if p.Done() {
		t.Fatal("a held operation ended")
	}
	token, err := p.ResumeToken()
	if err != nil {
		t.Fatal(err)
	}
	// A new client (a provider run after the one that was killed) resumes the operation.
	client, err := armcompute.NewVirtualMachineScaleSetsClient(f.s.SubscriptionID(), f.cred, f.opts)
	if err != nil {
		t.Fatal(err)
	}
	resumed, err := client.BeginCreateOrUpdate(ctx, "", "", armcompute.VirtualMachineScaleSet{},
		&armcompute.VirtualMachineScaleSetsClientBeginCreateOrUpdateOptions{ResumeToken: token})
	if err != nil {
		t.Fatal(err)
	}
	hold.Remove()
	res, err := resumed.PollUntilDone(ctx, fast)
	if err != nil {
		t.Fatal(err)
	}
	if *res.ID != f.scaleSetID("win") || *res.Properties.ProvisioningState != "Succeeded" {
		t.Fatalf("resumed result %s %s", *res.ID, *res.Properties.ProvisioningState)
	}
}

func TestUnpolledOperationsSettle(t *testing.T) {
	f := newFixture(t, Options{InProgressPolls: 100, SettleAfter: 100 * time.Millisecond})
	ctx := testContext(t)
	if _, err := f.compute.NewVirtualMachineScaleSetsClient().BeginCreateOrUpdate(ctx, testGroup, "win", f.windowsScaleSet(1, "cfg"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := f.booter.WaitBoots(ctx, 1); err != nil {
		t.Fatal(err)
	}
	got, err := f.compute.NewVirtualMachineScaleSetsClient().Get(ctx, testGroup, "win", nil)
	if err != nil {
		t.Fatal(err)
	}
	if *got.Properties.ProvisioningState != "Succeeded" {
		t.Fatalf("state %s", *got.Properties.ProvisioningState)
	}
}

func TestWriteCountsAndLog(t *testing.T) {
	f := newFixture(t, Options{})
	f.createScaleSet(t, "win", f.windowsScaleSet(1, "cfg"))
	f.update(t, capacity(3))
	f.createRouteTable(t, "pods")
	if err := f.putRoute(t, "pods", "r1", podRoute("10.244.1.0/24", "10.0.1.4")); err != nil {
		t.Fatal(err)
	}
	f.s.FailRequests(Match{Method: http.MethodPut, Path: "/routes/r2", Times: 1}, http.StatusBadRequest, "Nope", "refused")
	if err := f.putRoute(t, "pods", "r2", podRoute("10.244.2.0/24", "10.0.1.5")); err == nil {
		t.Fatal("the fault did not apply")
	}
	w := f.s.Writes()
	want := map[string]int{typeScaleSet: 2, typeRouteTable: 1, typeRoute: 1}
	if w.Total != 4 || len(w.ByType) != len(want) {
		t.Fatalf("writes %+v, want %v", w, want)
	}
	for typ, n := range want {
		if w.ByType[typ] != n {
			t.Errorf("%s: %d writes, want %d", typ, w.ByType[typ], n)
		}
	}
	patches := requestsTo(f.s, http.MethodPatch, "/virtualMachineScaleSets/win")
	if len(patches) != 1 || patches[0].APIVersion != ComputeAPIVersion || patches[0].Status != http.StatusOK ||
		!strings.Contains(string(patches[0].Body), `"capacity":3`) {
		t.Fatalf("logged PATCH %+v", patches)
	}
	f.s.Reset()
	if w := f.s.Writes(); w.Total != 0 || len(f.s.Requests()) != 0 {
		t.Fatalf("after Reset: %+v, %d requests", w, len(f.s.Requests()))
	}
}
