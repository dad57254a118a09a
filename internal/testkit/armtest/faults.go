package armtest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"
	"time"
)

// Match selects the requests a fault applies to.
type Match struct {
	// Method is the HTTP method; empty matches every method.
	Method string
	// Path is a regular expression matched, case-insensitively and unanchored, against the URL
	// path (e.g. `/virtualMachineScaleSets/pool1$` or `/routes/`); empty matches every path.
	// An invalid expression panics, as regexp.MustCompile does.
	Path string
	// Times is how many matching requests the fault applies to; 0 or less means every one until
	// the fault is removed.
	Times int
}

// InGroup is a Match path for the requests to a resource group's resources whose paths end as
// suffix (a regular expression) says: tests that share a server in parallel match their own
// resources only.
func InGroup(group, suffix string) string {
	return "/resourceGroups/" + regexp.QuoteMeta(group) + "/.*(?:" + suffix + ")"
}

type faultKind int

const (
	faultAnswer        faultKind = iota // answer with an ARM error
	faultReset                          // reset the connection
	faultFailOperation                  // accept the request, end its operation Failed
	faultHoldOperation                  // accept the request, keep its operation InProgress
	faultLoseResponse                   // serve the request, then reset the connection
)

// Fault is an injected failure. Faults are consulted in the order they were added; the first
// one that matches a request applies.
type Fault struct {
	s       *Server
	kind    faultKind
	method  string
	path    *regexp.Regexp
	times   int
	err     *apiError     // faultAnswer, faultFailOperation
	hits    int           // guarded by s.mu
	changed chan struct{} // closed and replaced on every hit; guarded by s.mu
}

// Throttle answers matching requests with ARM's throttling error: 429
// SubscriptionRequestsThrottled with Retry-After.
func (s *Server) Throttle(m Match, retryAfter time.Duration) *Fault {
	secs := int((retryAfter + time.Second - 1) / time.Second)
	e := newError(http.StatusTooManyRequests, "SubscriptionRequestsThrottled",
		"Number of 'write' requests for subscription '%s' actually exceeded the limit of '1200' for time interval '01:00:00'. Please try again after "+
			"'%d' seconds.",
		s.opts.SubscriptionID, secs)
	e.retryAfter = retryAfter
	return s.addFault(m, faultAnswer, e)
}

// FailRequests answers matching requests with an ARM error of the given status, code and message,
// e.g. 500 InternalServerError, 503 ServiceUnavailable or 409 AnotherOperationInProgress.
func (s *Server) FailRequests(m Match, status int, code, message string) *Fault {
	return s.addFault(m, faultAnswer, newError(status, code, "%s", message))
}

// ResetConnections resets the TCP connection of matching requests without answering.
func (s *Server) ResetConnections(m Match) *Fault {
	return s.addFault(m, faultReset, nil)
}

// LoseResponses serves matching requests, then resets their connection instead of answering: the
// request took effect, and the client sees a connection error. azcore's retry policy sends a
// request again after a connection error or timeout whatever its method, POST included
// (sdk/azcore/runtime/policy_retry.go), so a POST whose answer was lost runs twice unless the
// client checks before sending it again.
func (s *Server) LoseResponses(m Match) *Fault {
	return s.addFault(m, faultLoseResponse, nil)
}

// FailOperations lets matching requests that start a long-running operation succeed, and ends
// their operation Failed with an error of the given code and message. The resource's
// provisioningState becomes Failed.
func (s *Server) FailOperations(m Match, code, message string) *Fault {
	return s.addFault(m, faultFailOperation, newError(http.StatusOK, code, "%s", message))
}

// HoldOperations keeps the operations that matching requests start InProgress, whatever the
// number of polls and however long, until the fault is removed.
func (s *Server) HoldOperations(m Match) *Fault {
	return s.addFault(m, faultHoldOperation, nil)
}

func (s *Server) addFault(m Match, kind faultKind, e *apiError) *Fault {
	f := &Fault{
		s:       s,
		kind:    kind,
		method:  strings.ToUpper(m.Method),
		path:    regexp.MustCompile("(?i)" + m.Path),
		times:   m.Times,
		err:     e,
		changed: make(chan struct{}),
	}
	s.mu.Lock()
	s.faults = append(s.faults, f)
	s.mu.Unlock()
	return f
}

// Hits is the number of requests the fault applied to.
func (f *Fault) Hits() int {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	return f.hits
}

// WaitHits waits until the fault applied to at least n requests.
func (f *Fault) WaitHits(ctx context.Context, n int) error {
	for {
		f.s.mu.Lock()
		hits, changed := f.hits, f.changed
		f.s.mu.Unlock()
		if hits >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("fault applied to %d requests, waiting for %d: %w", hits, n, ctx.Err())
		}
	}
}

// Remove takes the fault out: it applies to no further request, and the operations it holds go
// on (they end at their next poll, or at once when they are older than Options.SettleAfter).
func (f *Fault) Remove() {
	s := f.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropFault(f)
	if f.kind != faultHoldOperation {
		return
	}
	for _, op := range s.ops {
		if op.hold == f {
			op.hold = nil
			if time.Since(op.started) >= s.opts.SettleAfter {
				go s.finish(op)
			}
		}
	}
}

// dropFault removes f from the list; s.mu is held.
func (s *Server) dropFault(f *Fault) {
	for i, g := range s.faults {
		if g == f {
			s.faults = append(s.faults[:i], s.faults[i+1:]...)
			return
		}
	}
}

// matchFault returns the first fault of one of kinds matching the request and counts the hit;
// s.mu is held.
func (s *Server) matchFault(method, path string, kinds ...faultKind) *Fault {
	for _, f := range s.faults {
		if !containsKind(kinds, f.kind) || (f.method != "" && f.method != method) || !f.path.MatchString(path) {
			continue
		}
		f.hits++
		close(f.changed)
		f.changed = make(chan struct{})
		if f.times > 0 && f.hits >= f.times {
			s.dropFault(f)
		}
		return f
	}
	return nil
}

func containsKind(kinds []faultKind, k faultKind) bool {
	for _, v := range kinds {
		if v == k {
			return true
		}
	}
	return false
}

// requestFault returns the fault that answers the request in place of the server, if any.
func (s *Server) requestFault(method, path string) *Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.matchFault(method, path, faultAnswer, faultReset, faultLoseResponse)
}

// lostResponse is where the answer of a request whose response a fault loses goes.
type lostResponse struct{ header http.Header }

func (l *lostResponse) Header() http.Header         { return l.header }
func (l *lostResponse) Write(b []byte) (int, error) { return len(b), nil }
func (l *lostResponse) WriteHeader(int)             {}

// serve answers a request the fault took over.
func (f *Fault) serve(w http.ResponseWriter, _ *http.Request, defaultRetryAfter time.Duration) {
	if f.kind == faultReset {
		resetConnection(w)
		return
	}
	e := *f.err
	if e.status >= 500 && e.retryAfter == 0 {
		e.retryAfter = defaultRetryAfter
	}
	writeError(w, &e)
}

// resetConnection closes the request's TCP connection with a reset (SO_LINGER 0).
func resetConnection(w http.ResponseWriter) {
	h, ok := w.(http.Hijacker)
	if !ok {
		return
	}
	conn, _, err := h.Hijack()
	if err != nil {
		return
	}
	raw := conn
	if nc, ok := conn.(interface{ NetConn() net.Conn }); ok {
		raw = nc.NetConn()
	}
	if tcp, ok := raw.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	_ = raw.Close()
}
