package armtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Throttling as Azure does it, at two levels.
//
// Azure Resource Manager keeps a token bucket per subscription and kind of request: reads 250 tokens
// refilled at 25 a second, writes and deletes 200 refilled at 10 a second, and reports what is left
// in x-ms-ratelimit-remaining-subscription-reads (-writes, -deletes); an empty bucket answers 429
// SubscriptionRequestsThrottled with Retry-After
// (https://learn.microsoft.com/azure/azure-resource-manager/management/request-limits-and-throttling,
// "Regional throttling and token bucket algorithm"). The limits are per service principal there; the
// server's clients share them, as one principal's would.
//
// Compute then counts its own operation groups per subscription and region in windows of 3 and 30
// minutes, reports each group's remaining count in x-ms-ratelimit-remaining-resource
// ("Microsoft.Compute/HighCostGetVMScaleSet3Min;107,Microsoft.Compute/HighCostGetVMScaleSet30Min;827")
// and answers 429 OperationNotAllowed, naming the group, with a Retry-After of minutes (1200 s in the
// documented example) once one is spent
// (https://learn.microsoft.com/troubleshoot/azure/virtual-machines/troubleshooting-throttling-errors).
// Listing a scale set's instances counts against HighCostGetVMScaleSet: 190 calls per 3 minutes and
// 900 per 30 minutes (giantswarm/azure-operator#741, which read these budgets from the header;
// Azure/AKS#1187 and Azure/azure-rest-api-specs#270 for the 429s and Retry-After of 120 to 1200 s
// that listing with $expand=instanceView met). The server keeps every window in one region.

// armBucket is one of ARM's token buckets.
type armBucket struct {
	header       string // x-ms-ratelimit-remaining-subscription-<kind>
	kind         string // read, write, delete: as ARM's throttling message names it
	size, refill float64
	tokens       float64
	at           time.Time // Azure time of the last refill
}

// computeWindow is one of Compute's call-count windows of an operation group.
type computeWindow struct {
	name   string // HighCostGetVMScaleSet3Min
	length time.Duration
	limit  int
	start  time.Time // Azure time; zero before the first call
	count  int
}

// throttle holds the server's budgets; guarded by Server.mu.
type throttle struct {
	scale   float64
	origin  time.Time
	buckets map[string]*armBucket
	// highCostGetVMScaleSet are the windows of listing a scale set's instances.
	highCostGetVMScaleSet []*computeWindow
}

func newThrottle(scale float64) *throttle {
	bucket := func(kind string, size, refill float64) *armBucket {
		return &armBucket{header: "x-ms-ratelimit-remaining-subscription-" + kind + "s", kind: kind, size: size, refill: refill, tokens: size}
	}
	return &throttle{
		scale:  scale,
		origin: time.Now(),
		buckets: map[string]*armBucket{
			http.MethodGet: bucket("read", 250, 25), http.MethodHead: bucket("read", 250, 25),
			http.MethodDelete: bucket("delete", 200, 10),
			"":                bucket("write", 200, 10), // PUT, PATCH, POST
		},
		highCostGetVMScaleSet: []*computeWindow{
			{name: "HighCostGetVMScaleSet3Min", length: 3 * time.Minute, limit: 190},
			{name: "HighCostGetVMScaleSet30Min", length: 30 * time.Minute, limit: 900},
		},
	}
}

// now is Azure's time: it passes Options.TimeScale times faster than the wall clock.
func (t *throttle) now() time.Time {
	return t.origin.Add(time.Duration(float64(time.Since(t.origin)) * t.scale))
}

// real converts a span of Azure time to the wall-clock time it takes here.
func (t *throttle) real(d time.Duration) time.Duration { return time.Duration(float64(d) / t.scale) }

// admit counts an authenticated ARM request against its budgets, sets the rate-limit headers and
// returns the throttling error when a budget is spent; s.mu is held.
func (t *throttle) admit(h http.Header, method string, segs []string, subscription string) *apiError {
	now := t.now()
	b := t.buckets[method]
	if b == nil {
		b = t.buckets[""]
	}
	b.tokens = min(b.size, b.tokens+now.Sub(b.at).Seconds()*b.refill)
	b.at = now
	if b.tokens < 1 {
		h.Set(b.header, "0")
		wait := time.Duration((1 - b.tokens) / b.refill * float64(time.Second))
		e := newError(http.StatusTooManyRequests, "SubscriptionRequestsThrottled",
			"Number of '%s' requests for subscription '%s' actually exceeded the limit of '%d' for time interval '00:00:01'. Please try again after "+
				"'%d' seconds.",
			b.kind, subscription, int(b.refill), int((wait+time.Second-1)/time.Second))
		e.retryAfter = t.real(wait)
		return e
	}
	b.tokens--
	h.Set(b.header, strconv.Itoa(int(b.tokens)))
	if method == http.MethodGet && listsScaleSetInstances(segs) {
		return t.count(h, t.highCostGetVMScaleSet, now)
	}
	return nil
}

// listsScaleSetInstances reports whether a path lists a scale set's instances:
// /subscriptions/{}/resourceGroups/{}/providers/Microsoft.Compute/virtualMachineScaleSets/{}/virtualMachines.
func listsScaleSetInstances(segs []string) bool {
	return len(segs) == 9 && strings.EqualFold(segs[5], "Microsoft.Compute") &&
		strings.EqualFold(segs[6], "virtualMachineScaleSets") && strings.EqualFold(segs[8], "virtualMachines")
}

// count charges a call to an operation group's windows. A refused call counts too, as Compute's
// measuredRequestCount above allowedRequestCount shows.
func (t *throttle) count(h http.Header, windows []*computeWindow, now time.Time) *apiError {
	var spent *computeWindow
	remaining := make([]string, 0, len(windows))
	for _, w := range windows {
		if w.start.IsZero() || now.Sub(w.start) >= w.length {
			w.start, w.count = now, 0
		}
		w.count++
		if w.count > w.limit && (spent == nil || w.start.Add(w.length).After(spent.start.Add(spent.length))) {
			spent = w
		}
		remaining = append(remaining, fmt.Sprintf("Microsoft.Compute/%s;%d", w.name, max(0, w.limit-w.count)))
	}
	h.Set("x-ms-ratelimit-remaining-resource", strings.Join(remaining, ","))
	if spent == nil {
		return nil
	}
	end := spent.start.Add(spent.length)
	detail, _ := json.Marshal(map[string]any{
		"operationGroup": spent.name, "startTime": spent.start.UTC().Format(time.RFC3339Nano), "endTime": end.UTC().Format(time.RFC3339Nano),
		"allowedRequestCount": spent.limit, "measuredRequestCount": spent.count,
	})
	e := newError(http.StatusTooManyRequests, "OperationNotAllowed",
		"The server rejected the request because too many requests have been received for this subscription.")
	e.Details = []*apiError{{Code: "TooManyRequests", Target: spent.name, Message: string(detail)}}
	e.InnerError = &innerError{InternalErrorCode: "TooManyRequestsReceived"}
	e.retryAfter = t.real(end.Sub(now))
	return e
}
