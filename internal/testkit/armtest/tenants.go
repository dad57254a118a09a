package armtest

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// Other Microsoft Entra tenants, for what one tenant shares with another: a Compute Gallery image
// used by a scale set or virtual machine of the server's subscription
// (https://learn.microsoft.com/azure/virtual-machines/share-using-app-registration). The app that
// writes the scale set is registered in both tenants; ARM takes its token of the gallery's tenant
// as an auxiliary token, in the x-ms-authorization-auxiliary header
// (https://learn.microsoft.com/azure/azure-resource-manager/management/authenticate-multi-tenant).

// Tenant is another Entra tenant the server answers for, with one subscription.
type Tenant struct {
	// ID and SubscriptionID default to random UUIDs.
	ID, SubscriptionID string
	// ClientIDs are the apps (RegisterApp; the start-up app's is Credentials().ClientID) registered
	// in the tenant too, as a multi-tenant app is once the tenant consents to it: the tenant's token
	// endpoint serves them, with the credentials registered with the app. Every other app is refused
	// there (AADSTS700016).
	ClientIDs []string
}

// tenant is an added tenant: its subscription and its apps' service principals.
type tenant struct {
	id, subscription string
	principals       map[string]string // client ID → object ID
}

// AddTenant adds a tenant and returns it with its IDs. Its subscription holds the images AddImage
// seeds in it, which ARM serves to a token of the tenant, and nothing else.
func (s *Server) AddTenant(t Tenant) Tenant {
	if t.ID == "" {
		t.ID = newUUID()
	}
	if t.SubscriptionID == "" {
		t.SubscriptionID = newUUID()
	}
	t.ClientIDs = slices.Clone(t.ClientIDs)
	added := &tenant{id: t.ID, subscription: t.SubscriptionID, principals: map[string]string{}}
	for _, c := range t.ClientIDs {
		added.principals[c] = newUUID()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tenants[strings.ToLower(t.ID)] = added
	return t
}

// tenantOf returns the tenant of a subscription: the server's, an added one's, or "" for a
// subscription the server does not know; s.mu is held.
func (s *Server) tenantOf(subscription string) string {
	if strings.EqualFold(subscription, s.opts.SubscriptionID) {
		return s.opts.TenantID
	}
	for _, t := range s.tenants {
		if strings.EqualFold(t.subscription, subscription) {
			return t.id
		}
	}
	return ""
}

// knownTenant returns a tenant's ID as the server spells it, or "" for a tenant it does not
// know; s.mu is held.
func (s *Server) knownTenant(id string) string {
	if strings.EqualFold(id, s.opts.TenantID) {
		return s.opts.TenantID
	}
	if t := s.tenants[strings.ToLower(id)]; t != nil {
		return t.id
	}
	return ""
}

// servicePrincipal returns the object ID of app's service principal in a known tenant, and
// whether it has one there: every app does in the server's tenant; s.mu is held.
func (s *Server) servicePrincipal(tenantID string, app *App) (string, bool) {
	if strings.EqualFold(tenantID, s.opts.TenantID) {
		return app.objectID, true
	}
	id, ok := s.tenants[strings.ToLower(tenantID)].principals[app.ClientID]
	return id, ok
}

// auxiliaryHeader carries the tokens of other tenants, "Bearer <token>" each, separated by
// commas; it holds up to three (authenticate-multi-tenant).
const (
	auxiliaryHeader    = "x-ms-authorization-auxiliary"
	maxAuxiliaryTokens = 3
)

// checkLinkedImage checks a write of resource scope that references an image: one in a
// subscription of another tenant is read with the auxiliary token of that tenant, and without one
// ARM refuses the write with 403 LinkedAuthorizationFailed naming the linked subscription, as it
// refuses a scale set's create or update (Azure/AKS#2040, Azure/aad-pod-identity#752) or a
// virtual machine's (MicrosoftDocs/azure-docs#46908, Azure/bicep#17206). ARM checks the auxiliary
// tokens when a request references another tenant's resource, and every one must be valid and
// unexpired: one that is not gets 401 (authenticate-multi-tenant). s.mu is held.
func (s *Server) checkLinkedImage(q *armRequest, scope, imageID string) *apiError {
	im := s.images[strings.ToLower(imageID)]
	if im == nil {
		return nil // a marketplace image
	}
	subscription := strings.Split(imageID, "/")[2]
	owner := s.tenantOf(subscription)
	if strings.EqualFold(owner, s.opts.TenantID) {
		return nil
	}
	tenants, e := s.auxiliaryTenants(q.r.Header.Get(auxiliaryHeader))
	if e != nil {
		return e
	}
	if slices.ContainsFunc(tenants, func(t string) bool { return strings.EqualFold(t, owner) }) {
		return nil
	}
	action := "Microsoft.Compute/images/read"
	if im.version {
		action = "Microsoft.Compute/galleries/images/versions/read"
	}
	return newError(http.StatusForbidden, "LinkedAuthorizationFailed",
		"The client has permission to perform action '%s' on scope '%s', however the current tenant '%s' is not authorized to access linked "+
			"subscription '%s'.", action, scope, s.opts.TenantID, subscription)
}

// auxiliaryTenants checks the tokens of an x-ms-authorization-auxiliary header, each as ARM checks
// the primary token (checkToken), and returns their tenants. The header's limit of three tokens
// is documented, not ARM's answer past it: a fourth is refused as an invalid token. An
// EncryptedBearer token, which the header may also hold, is refused: armtest cannot read one.
func (s *Server) auxiliaryTenants(header string) ([]string, *apiError) {
	if header == "" {
		return nil, nil
	}
	parts := strings.Split(header, ",")
	if len(parts) > maxAuxiliaryTokens {
		return nil, newError(http.StatusUnauthorized, "InvalidAuthenticationToken",
			"The '%s' header holds %d tokens; it can hold up to %d.", auxiliaryHeader, len(parts), maxAuxiliaryTokens)
	}
	var tenants []string
	for _, p := range parts {
		token, ok := strings.CutPrefix(strings.TrimSpace(p), "Bearer ")
		if !ok {
			return nil, newError(http.StatusUnauthorized, "AuthenticationFailed",
				"Authentication failed. The '%s' header is provided in an invalid format (armtest reads 'Bearer <token>' entries only).", auxiliaryHeader)
		}
		c, e := s.checkToken(token)
		if e != nil {
			// The answer names the client and tenant of the token that is not valid.
			if c != nil {
				e.Message += fmt.Sprintf(" (auxiliary token of client '%s', tenant '%s')", c.AppID, c.TenantID)
			}
			return nil, e
		}
		tenants = append(tenants, c.TenantID)
	}
	return tenants, nil
}
