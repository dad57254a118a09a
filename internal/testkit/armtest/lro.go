package armtest

import (
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Long-running operations follow ARM's asynchronous operation protocol
// (github.com/Azure/azure-resource-manager-rpc, v1.0/async-api-reference.md), as azcore's pollers
// (sdk/azcore/internal/pollers/async and loc) consume it:
//
//   - PUT and PATCH answer 201 (create) or 200 (replace, update) with the resource, whose
//     provisioningState is Creating or Updating, and an Azure-AsyncOperation header;
//   - DELETE and POST answer 202 with Azure-AsyncOperation and Location headers;
//   - every answer carries Retry-After;
//   - the Azure-AsyncOperation URL answers 200 {"status":"InProgress"} Options.InProgressPolls
//     times, then {"status":"Succeeded"}, {"status":"Failed","error":{...}} or, for an operation
//     a more recent one preempted, {"status":"Canceled","error":{...}};
//   - the Location URL answers 202 while the operation runs, then 204.
//
// The state change an operation makes is applied when it ends: at the poll that sees its end, or
// Options.SettleAfter after it began when nobody polls.

const (
	statusInProgress = "InProgress"
	statusSucceeded  = "Succeeded"
	statusFailed     = "Failed"
	statusCanceled   = "Canceled"
)

type operation struct {
	id         string
	namespace  string // provider namespace of its URLs, e.g. Microsoft.Compute
	resource   string // lower-case ID of the resource it changes
	apiVersion string
	started    time.Time
	polls      int    // InProgress answers left
	hold       *Fault // non-nil while a HoldOperations fault keeps it going
	failure    *apiError
	// commit changes the server's state as the operation ends (failure is nil on success). It
	// runs with s.mu held and returns work to do once s.mu is released (booting and shutting
	// down machines), or nil.
	commit func(failure *apiError) (after func())
	once   sync.Once
	// working, when set, is closed once the work the operation stands for (a run command) is
	// done: the operation ends no earlier.
	working chan struct{}
	// result is the body its Location URL answers once it succeeded (POST actions with a
	// result); nil: 204 No Content.
	result any

	// guarded by s.mu
	status string
	ended  time.Time
}

// startOperation registers the operation of a request that changes resource; s.mu is held.
// Faults may make it fail or hold it.
func (s *Server) startOperation(q *armRequest, resource string, commit func(*apiError) func()) *operation {
	namespace := "Microsoft.Resources" // a resource group's own operations
	if len(q.route.segs) > 5 {
		namespace = q.route.segs[5]
	}
	op := &operation{
		id:         newUUID(),
		namespace:  namespace,
		resource:   strings.ToLower(resource),
		apiVersion: q.apiVersion,
		started:    time.Now(),
		polls:      s.opts.InProgressPolls,
		commit:     commit,
		status:     statusInProgress,
	}
	if f := s.matchFault(q.r.Method, q.r.URL.Path, faultFailOperation, faultHoldOperation); f != nil {
		if f.kind == faultHoldOperation {
			op.hold = f
		} else {
			failure := *f.err
			op.failure = &failure // commit may name the machine in it
		}
	}
	s.ops[op.id] = op
	time.AfterFunc(s.opts.SettleAfter, func() {
		s.mu.Lock()
		held, working := op.hold != nil, op.working
		s.mu.Unlock()
		if working != nil {
			<-working
		}
		if !held {
			s.finish(op)
		}
	})
	return op
}

// isWorking reports whether op's work is still going on; s.mu is held.
func (op *operation) isWorking() bool {
	if op.working == nil {
		return false
	}
	select {
	case <-op.working:
		return false
	default:
		return true
	}
}

// finish ends op once: it commits its state change and runs the work that follows.
func (s *Server) finish(op *operation) {
	op.once.Do(func() {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return
		}
		after := op.commit(op.failure)
		s.mu.Unlock()
		if after != nil {
			after()
		}
		s.mu.Lock()
		op.status, op.ended = statusSucceeded, time.Now()
		switch {
		case op.failure != nil && op.failure.effect == effectPreempted:
			op.status = statusCanceled
		case op.failure != nil:
			op.status = statusFailed
		}
		s.mu.Unlock()
	})
}

// busy returns an unfinished operation on resource, on a resource it contains or on one that
// contains it; s.mu is held. ARM refuses a write while such an operation runs.
func (s *Server) busy(resource string) *operation {
	r := strings.ToLower(resource)
	for _, op := range s.ops {
		if op.status == statusInProgress &&
			(op.resource == r || strings.HasPrefix(op.resource, r+"/") || strings.HasPrefix(r, op.resource+"/")) {
			return op
		}
	}
	return nil
}

// conflict is the answer to a write on a busy resource. Network answers 429 RetryableError with
// Retry-After (kubernetes/kubernetes#88151 shows it for route tables); Compute answers 409.
func (s *Server) conflict(op *operation, resource string) *apiError {
	if op.namespace == "Microsoft.Network" {
		e := newError(http.StatusTooManyRequests, "RetryableError",
			"A retryable error occurred. Operation %s is updating resource %s. The call can be retried in %d seconds.",
			op.id, op.resource, int((s.opts.RetryAfter+time.Second-1)/time.Second))
		e.Details = []*apiError{{Code: "RetryableErrorDueToAnotherOperation", Message: "Operation " + op.id + " is updating resource " + op.resource + "."}}
		e.retryAfter = s.opts.RetryAfter
		return e
	}
	return newError(http.StatusConflict, "AnotherOperationInProgress",
		"Another operation on this or dependent resource is in progress. To retrieve status of the operation use uri: %s. Resource: %s.",
		s.operationURL(op, "operations"), resource)
}

func (s *Server) operationURL(op *operation, kind string) string {
	return s.absoluteURL("/subscriptions/"+s.opts.SubscriptionID+"/providers/"+op.namespace+"/locations/"+s.opts.Location+"/"+kind+"/"+op.id,
		url.Values{"api-version": {op.apiVersion}})
}

// writeStarted answers the request that started op: PUT and PATCH with the resource and status
// (200 or 201), DELETE and POST with 202 and no body.
func (s *Server) writeStarted(w http.ResponseWriter, op *operation, status int, resource any) {
	h := w.Header()
	h.Set("Azure-AsyncOperation", s.operationURL(op, "operations"))
	setRetryAfter(h, s.opts.RetryAfter)
	if resource == nil {
		h.Set("Location", s.operationURL(op, "operationResults"))
		w.WriteHeader(http.StatusAccepted)
		return
	}
	writeJSON(w, status, resource)
}

// operationStatus is the document at an Azure-AsyncOperation URL.
type operationStatus struct {
	Name      string     `json:"name"`
	Status    string     `json:"status"`
	StartTime time.Time  `json:"startTime"`
	EndTime   *time.Time `json:"endTime,omitempty"`
	Error     *apiError  `json:"error,omitempty"`
}

// poll counts a poll of op and returns its status, ending it when its InProgress answers are
// used up and nothing holds it.
func (s *Server) poll(q *armRequest) (*operation, *apiError) {
	s.mu.Lock()
	op := s.ops[q.name(3)]
	if op == nil {
		s.mu.Unlock()
		return nil, newError(http.StatusNotFound, "OperationNotFound", "The operation '%s' could not be found.", q.name(3))
	}
	if op.status == statusInProgress && (op.hold != nil || op.polls > 0 || op.isWorking()) {
		if op.hold == nil && op.polls > 0 {
			op.polls--
		}
		s.mu.Unlock()
		return op, nil
	}
	s.mu.Unlock()
	s.finish(op)
	return op, nil
}

func (s *Server) getOperationStatus(w http.ResponseWriter, q *armRequest) *apiError {
	op, e := s.poll(q)
	if e != nil {
		return e
	}
	s.mu.Lock()
	st := operationStatus{Name: op.id, Status: op.status, StartTime: op.started.UTC()}
	if op.status != statusInProgress {
		end := op.ended.UTC()
		st.EndTime = &end
	}
	if op.status == statusFailed || op.status == statusCanceled {
		st.Error = op.failure
	}
	s.mu.Unlock()
	if st.Status == statusInProgress {
		setRetryAfter(w.Header(), s.opts.RetryAfter)
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

func (s *Server) getOperationResult(w http.ResponseWriter, q *armRequest) *apiError {
	op, e := s.poll(q)
	if e != nil {
		return e
	}
	s.mu.Lock()
	status, result := op.status, op.result
	s.mu.Unlock()
	switch {
	case status == statusInProgress:
		w.Header().Set("Location", s.operationURL(op, "operationResults"))
		setRetryAfter(w.Header(), s.opts.RetryAfter)
		w.WriteHeader(http.StatusAccepted)
	case status == statusSucceeded && result != nil:
		writeJSON(w, http.StatusOK, result)
	case status == statusSucceeded:
		w.WriteHeader(http.StatusNoContent)
	default:
		e := *op.failure
		e.status = http.StatusBadRequest
		return &e
	}
	return nil
}
