package armtest

import (
	"net/http"
	"sort"
	"time"
)

// Request is one ARM request as the server saw it.
type Request struct {
	Time       time.Time
	Method     string
	Path       string
	APIVersion string
	Status     int
	// Body is the request body as received. It holds what the client sent, secrets included
	// (osProfile.adminPassword, customData): it stays in memory for the test to inspect.
	Body []byte
	// ResourceType is the type the path addresses, e.g. Microsoft.Compute/virtualMachineScaleSets
	// (empty when no ARM route matched).
	ResourceType string
}

// WriteCounts counts the ARM writes (PUT, PATCH, POST, DELETE) the server accepted: answered with
// a status below 400. Rejected and fault-injected requests appear only in the request log. Token,
// metadata and polling requests are not writes.
type WriteCounts struct {
	Total int
	// ByType counts writes by resource type, e.g. "Microsoft.Network/routeTables/routes". A POST
	// action counts for the type it acts on (deleteInstances for virtualMachineScaleSets).
	ByType map[string]int
}

func isWrite(method string) bool {
	switch method {
	case http.MethodPut, http.MethodPatch, http.MethodPost, http.MethodDelete:
		return true
	}
	return false
}

func (s *Server) record(r *http.Request, body []byte, rec *statusRecorder) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, Request{
		Time:         time.Now(),
		Method:       r.Method,
		Path:         r.URL.Path,
		APIVersion:   r.URL.Query().Get("api-version"),
		Status:       rec.status,
		Body:         body,
		ResourceType: rec.resourceType,
	})
	if isWrite(r.Method) && rec.status < 400 && rec.resourceType != "" {
		s.writes[rec.resourceType]++
	}
}

// Writes returns the ARM write counts since start or the last Reset.
func (s *Server) Writes() WriteCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := WriteCounts{ByType: make(map[string]int, len(s.writes))}
	for t, n := range s.writes {
		c.ByType[t] = n
		c.Total += n
	}
	return c
}

// Requests returns the ARM requests since start or the last Reset, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Reset clears the write counts and the request log. Resources, apps and faults stay.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
	s.writes = map[string]int{}
}

// SchemaValidations is the number of request bodies validated against the JSON Schemas.
func (s *Server) SchemaValidations() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.validated
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
