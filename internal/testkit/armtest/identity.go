package armtest

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Managed identities: the server serves their tokens at <URL>/metadata/identity/oauth2/token as
// the instance metadata service does
// (https://learn.microsoft.com/entra/identity/managed-identities-azure-resources/how-to-use-vm-token#get-a-token-using-http),
// for clients given a managed identity endpoint (azurerm's msi_endpoint).

// ManagedIdentityPath is the path of the managed identity token endpoint.
const ManagedIdentityPath = "/metadata/identity/oauth2/token"

// managedIdentityAPIVersions are the versions the endpoint accepts (those the IMDS docs list
// for the token API).
var managedIdentityAPIVersions = []string{"2018-02-01", "2019-08-01"}

// AddManagedIdentity registers a user-assigned managed identity and returns its client ID. The
// endpoint serves its tokens when a request names it by client_id, and a request without
// client_id when it is the only one (IMDS picks the system-assigned or the sole user-assigned
// identity, and refuses to choose among several).
func (s *Server) AddManagedIdentity() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := newUUID()
	s.identities[id] = newUUID()
	return id
}

// serveManagedIdentity answers a token request as IMDS does: 400 without the Metadata header
// or with an unknown identity or resource.
func (s *Server) serveManagedIdentity(w http.ResponseWriter, r *http.Request) {
	fail := func(status int, code, text string) {
		writeJSON(w, status, map[string]string{"error": code, "error_description": text})
	}
	q := r.URL.Query()
	switch {
	case r.Method != http.MethodGet:
		fail(http.StatusMethodNotAllowed, "invalid_request", "Only GET is allowed")
		return
	case r.Header.Get("Metadata") != "true":
		fail(http.StatusBadRequest, "invalid_request", "Required metadata header not specified")
		return
	case !contains(managedIdentityAPIVersions, q.Get("api-version")):
		fail(http.StatusBadRequest, "invalid_request", "Invalid API version "+q.Get("api-version"))
		return
	}
	resource := q.Get("resource")
	known := false
	for _, a := range s.audiences() {
		known = known || strings.TrimSuffix(a, "/") == strings.TrimSuffix(resource, "/")
	}
	if !known {
		fail(http.StatusBadRequest, "invalid_resource", "AADSTS500011: The resource principal named "+resource+" was not found in the tenant.")
		return
	}
	s.mu.Lock()
	clientID := q.Get("client_id")
	objectID, ok := s.identities[clientID]
	if clientID == "" && len(s.identities) == 1 {
		for clientID, objectID = range s.identities {
			ok = true
		}
	}
	s.mu.Unlock()
	if !ok {
		fail(http.StatusBadRequest, "invalid_request", "Identity not found")
		return
	}
	tok, err := s.mintAccessToken(clientID, objectID, resource)
	if err != nil {
		fail(http.StatusInternalServerError, "server_error", err.Error())
		return
	}
	expires := time.Now().Add(s.opts.TokenLifetime)
	secs := strconv.Itoa(int(s.opts.TokenLifetime / time.Second))
	writeJSON(w, http.StatusOK, map[string]string{
		"access_token": tok, "client_id": clientID, "expires_in": secs, "expires_on": strconv.FormatInt(expires.Unix(), 10),
		"ext_expires_in": secs, "not_before": strconv.FormatInt(time.Now().Unix(), 10), "resource": resource, "token_type": "Bearer",
	})
}
