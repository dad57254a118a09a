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
// or with an unknown identity or resource. It serves the identities AddManagedIdentity
// registered; a machine's user-assigned identities are served by its own instance metadata
// endpoint only (serveIMDSToken).
func (s *Server) serveManagedIdentity(w http.ResponseWriter, r *http.Request) {
	s.serveIdentityToken(w, r, func(clientID string) (string, string, bool) {
		s.mu.Lock()
		defer s.mu.Unlock()
		objectID, ok := s.identities[clientID]
		if clientID == "" && len(s.identities) == 1 {
			for clientID, objectID = range s.identities {
				ok = true
			}
		}
		return clientID, objectID, ok
	})
}

// serveIMDSToken answers a machine's token request at its instance metadata endpoint: only for
// the user-assigned identities the machine carries, by client_id, or without it when it carries
// exactly one. Any other gets IMDS's 400 "Identity not found" (Azure/azure-sdk-for-net#37278:
// "The requested identity has not been assigned to this resource").
func (s *Server) serveIMDSToken(w http.ResponseWriter, r *http.Request, carried []string) {
	s.serveIdentityToken(w, r, func(clientID string) (string, string, bool) {
		s.mu.Lock()
		defer s.mu.Unlock()
		var match *userIdentity
		for _, id := range carried {
			u := s.userIdentities[id]
			if u == nil {
				continue // deleted since: the machine keeps a reference that no longer works
			}
			if strings.EqualFold(u.clientID, clientID) || (clientID == "" && len(carried) == 1) {
				match = u
			}
		}
		if match == nil {
			return "", "", false
		}
		return match.clientID, match.principal, true
	})
}

// serveIdentityToken answers a token request as IMDS does, for the identity pick names (client ID and
// object ID) given the request's client_id.
func (s *Server) serveIdentityToken(w http.ResponseWriter, r *http.Request, pick func(clientID string) (string, string, bool)) {
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
	clientID, objectID, ok := pick(q.Get("client_id"))
	if !ok {
		fail(http.StatusBadRequest, "invalid_request", "Identity not found")
		return
	}
	tok, err := s.mintAccessToken(s.opts.TenantID, clientID, objectID, resource)
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
