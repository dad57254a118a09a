package armtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// ARM answers: errors and JSON bodies.

// apiError is an ARM error: {"error": {"code", "message", "target", "details"}}.
type apiError struct {
	status     int
	retryAfter time.Duration
	effect     failureEffect // what an operation that ends with it leaves (computefaults.go)
	Code       string        `json:"code"`
	Message    string        `json:"message"`
	Target     string        `json:"target,omitempty"`
	Details    []*apiError   `json:"details,omitempty"`
	InnerError *innerError   `json:"innererror,omitempty"`
}

// innerError is the innererror of Compute's throttling answers.
type innerError struct {
	InternalErrorCode string `json:"internalErrorCode"`
}

func newError(status int, code, format string, args ...any) *apiError {
	return &apiError{status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

// invalidParameter is Compute's answer to a bad value, naming the property in target.
func invalidParameter(target, format string, args ...any) *apiError {
	e := newError(http.StatusBadRequest, "InvalidParameter", format, args...)
	e.Target = target
	return e
}

func writeError(w http.ResponseWriter, e *apiError) {
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("x-ms-error-code", e.Code)
	if e.retryAfter > 0 {
		setRetryAfter(h, e.retryAfter)
	}
	w.WriteHeader(e.status)
	_ = json.NewEncoder(w).Encode(map[string]*apiError{"error": e})
}

// setRetryAfter writes Retry-After in whole seconds (rounded up, as ARM sends it) and, for a
// delay that is not a whole number of seconds, retry-after-ms, which azcore reads first, rounded
// up too: a client that waits exactly what it is told must not arrive before the budget is back.
func setRetryAfter(h http.Header, d time.Duration) {
	h.Set("Retry-After", strconv.Itoa(int((d+time.Second-1)/time.Second)))
	if d%time.Second != 0 {
		h.Set("retry-after-ms", strconv.FormatInt(int64((d+time.Millisecond-1)/time.Millisecond), 10))
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func changeNotAllowed(property string) *apiError {
	e := newError(http.StatusConflict, "PropertyChangeNotAllowed", "Changing property '%s' is not allowed.", property)
	e.Target = property
	return e
}

// errParentNotFound is ARM's answer to a write on a child of a missing resource.
func errParentNotFound(childType, parentID string) *apiError {
	return newError(http.StatusNotFound, "ParentResourceNotFound",
		"Failed to perform 'write' on resource(s) of type '%s', because the parent resource '%s' could not be found.", childType, parentID)
}

func errResourceNotFound(typ, name, group string) *apiError {
	return newError(http.StatusNotFound, "ResourceNotFound",
		"The Resource '%s/%s' under resource group '%s' was not found. For more details please go to https://aka.ms/ARMResourceNotFoundFix", typ, name,
		group)
}

// errReference is the answer to a reference to a missing resource or one in another region.
func errReference(referenced, by string) *apiError {
	return newError(http.StatusBadRequest, "InvalidResourceReference",
		"Resource %s referenced by resource %s was not found. Please make sure that the referenced resource exists, and that both resources are in "+
			"the same region.", referenced, by)
}
