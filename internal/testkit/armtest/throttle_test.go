package armtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
)

// get sends an authenticated GET and returns the status, headers and ARM error code.
func (f *fixture) get(t *testing.T, path string) (int, http.Header, *apiError) {
	t.Helper()
	ctx := testContext(t)
	tok, err := f.cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{ManagementAudience + ".default"}})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.s.URL()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok.Token)
	resp, err := f.s.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var body struct{ Error *apiError }
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, resp.Header, body.Error
}

// Listing a scale set's instances spends Compute's HighCostGetVMScaleSet budgets (190 per 3 minutes,
// 900 per 30), reported call by call; the call past a budget is refused with Compute's throttling
// error and a Retry-After that ends with the window.
func TestThrottleScaleSetInstanceLists(t *testing.T) {
	// Two wall-clock seconds are a minute of Azure's time: the 3-minute window passes in 6 s.
	f := newFixture(t, Options{TimeScale: 30})
	f.createScaleSet(t, "win", f.windowsScaleSet(2, "cfg"))
	list := f.scaleSetID("win") + "/virtualMachines?api-version=" + ComputeAPIVersion
	for i := 1; i <= 190; i++ {
		status, h, e := f.get(t, list)
		want := fmt.Sprintf("Microsoft.Compute/HighCostGetVMScaleSet3Min;%d,Microsoft.Compute/HighCostGetVMScaleSet30Min;%d", 190-i, 900-i)
		if status != http.StatusOK || h.Get("x-ms-ratelimit-remaining-resource") != want {
			t.Fatalf("list %d: %d %v, remaining %q, want %q", i, status, e, h.Get("x-ms-ratelimit-remaining-resource"), want)
		}
		if h.Get("x-ms-ratelimit-remaining-subscription-reads") == "" {
			t.Fatalf("list %d: no x-ms-ratelimit-remaining-subscription-reads", i)
		}
	}
	status, h, e := f.get(t, list)
	if status != http.StatusTooManyRequests || e == nil || e.Code != "OperationNotAllowed" || len(e.Details) != 1 ||
		e.Details[0].Code != "TooManyRequests" || e.Details[0].Target != "HighCostGetVMScaleSet3Min" ||
		e.InnerError == nil || e.InnerError.InternalErrorCode != "TooManyRequestsReceived" {
		t.Fatalf("list 191: %d %+v", status, e)
	}
	var detail struct {
		OperationGroup                            string
		AllowedRequestCount, MeasuredRequestCount int
	}
	if err := json.Unmarshal([]byte(e.Details[0].Message),
		&detail); err != nil || detail.AllowedRequestCount != 190 || detail.MeasuredRequestCount != 191 {
		t.Errorf("detail %s: %v", e.Details[0].Message, err)
	}
	// Retry-After is the rest of the 3-minute window in Azure's time (whole seconds, rounded up),
	// here sped up 30 times.
	secs, _ := strconv.Atoi(h.Get("Retry-After"))
	ms, _ := strconv.Atoi(h.Get("retry-after-ms"))
	if secs < 1 || secs > 6 || ms <= 0 || ms > 6000 {
		t.Errorf("Retry-After %q, retry-after-ms %q: want the rest of a 6 s window", h.Get("Retry-After"), h.Get("retry-after-ms"))
	}
	if got := h.Get("x-ms-ratelimit-remaining-resource"); got != "Microsoft.Compute/HighCostGetVMScaleSet3Min;0,"+
		"Microsoft.Compute/HighCostGetVMScaleSet30Min;709" {
		t.Errorf("remaining when refused: %q", got)
	}
	// Once the window ends, listing works again; the 30-minute window still counts.
	time.Sleep(time.Duration(ms) * time.Millisecond)
	status, h, e = f.get(t, list)
	if status != http.StatusOK ||
		h.Get("x-ms-ratelimit-remaining-resource") != "Microsoft.Compute/HighCostGetVMScaleSet3Min;189,Microsoft.Compute/HighCostGetVMScaleSet30Min;708" {
		t.Errorf("after Retry-After: %d %v, remaining %q", status, e, h.Get("x-ms-ratelimit-remaining-resource"))
	}
	// Reading the scale set itself is not a high-cost list.
	if status, h, _ := f.get(t,
		f.scaleSetID("win")+"?api-version="+ComputeAPIVersion); status != http.StatusOK || h.Get("x-ms-ratelimit-remaining-resource") != "" {
		t.Errorf("GET scale set: %d, remaining %q", status, h.Get("x-ms-ratelimit-remaining-resource"))
	}
}

// ARM's read bucket holds 250 tokens: a burst past it is refused with SubscriptionRequestsThrottled
// until a token comes back, 1/25 s later in Azure's time.
func TestThrottleSubscriptionReads(t *testing.T) {
	// Azure's clock nearly stands still: no token comes back during the burst.
	f := newFixture(t, Options{TimeScale: 0.001})
	group := f.s.ResourceGroupID(testGroup) + "/providers/Microsoft.Network/virtualNetworks/vnet?api-version=" + NetworkAPIVersion
	// The credential's first token request and the fixture's own reads come before the count.
	_, _, _ = f.get(t, group)
	_, h, _ := f.get(t, group)
	left, err := strconv.Atoi(h.Get("x-ms-ratelimit-remaining-subscription-reads"))
	if err != nil || left < 200 || left > 248 {
		t.Fatalf("remaining reads %q", h.Get("x-ms-ratelimit-remaining-subscription-reads"))
	}
	for i := left - 1; i >= 0; i-- {
		if status, h, e := f.get(t, group); status != http.StatusOK || h.Get("x-ms-ratelimit-remaining-subscription-reads") != strconv.Itoa(i) {
			t.Fatalf("read: %d %v, remaining %q, want %d", status, e, h.Get("x-ms-ratelimit-remaining-subscription-reads"), i)
		}
	}
	status, h, e := f.get(t, group)
	if status != http.StatusTooManyRequests || e == nil || e.Code != "SubscriptionRequestsThrottled" ||
		h.Get("x-ms-ratelimit-remaining-subscription-reads") != "0" {
		t.Fatalf("read past the bucket: %d %+v, remaining %q", status, e, h.Get("x-ms-ratelimit-remaining-subscription-reads"))
	}
	// 1/25 s of Azure's time is 40 s of the wall clock at this scale.
	if got := h.Get("Retry-After"); got != "40" {
		t.Errorf("Retry-After %q, want 40", got)
	}
}
