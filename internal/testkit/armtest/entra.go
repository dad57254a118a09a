package armtest

import (
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Entra ID as MSAL and azidentity use it with a custom authority host and instance discovery
// disabled: the tenant's OpenID configuration, its signing keys, and the token endpoint for the
// client credentials grant with a client secret, a certificate-signed client assertion or a
// federated OIDC token (workload identity federation).

// TokenExchangeAudience is the audience Entra expects in federated tokens unless a federated
// credential names others.
const TokenExchangeAudience = "api://AzureADTokenExchange"

const (
	assertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
	tokenKeyID    = "armtest-token-signing"
	// clockSkew is the leeway Entra allows on assertion times.
	clockSkew = 5 * time.Minute
)

// App is an Entra app registration (service principal) allowed to get tokens.
type App struct {
	// ClientID is the application (client) ID; RegisterApp makes a random one when empty.
	ClientID string
	// Secret is a client secret; empty: none.
	Secret string
	// Certificates sign client assertions (azidentity's ClientCertificateCredential).
	Certificates []*x509.Certificate
	// Federated are the federated identity credentials that trust external OIDC issuers.
	Federated []FederatedCredential
	objectID  string
}

// FederatedCredential trusts tokens of an external OIDC issuer, as an Entra federated identity
// credential does: the assertion's iss and sub must equal Issuer and Subject exactly
// (case-sensitive), and its aud must hold one of Audiences.
type FederatedCredential struct {
	Issuer  string // e.g. "https://app.terraform.io" or Server.Issuer().URL()
	Subject string // e.g. "organization:acme:project:default:workspace:nodes:run_phase:apply"
	// Audiences default to [TokenExchangeAudience].
	Audiences []string
}

// RegisterApp registers (or replaces, by client ID) an app and returns it as registered.
func (s *Server) RegisterApp(app App) App {
	if app.ClientID == "" {
		app.ClientID = newUUID()
	}
	app.objectID = newUUID()
	app.Certificates = append([]*x509.Certificate(nil), app.Certificates...)
	app.Federated = append([]FederatedCredential(nil), app.Federated...)
	for i := range app.Federated {
		if len(app.Federated[i].Audiences) == 0 {
			app.Federated[i].Audiences = []string{TokenExchangeAudience}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	stored := app
	s.apps[app.ClientID] = &stored
	return app
}

// serveEntra serves /{tenant}/v2.0/.well-known/openid-configuration,
// /{tenant}/discovery/v2.0/keys and /{tenant}/oauth2/v2.0/token.
func (s *Server) serveEntra(w http.ResponseWriter, r *http.Request) {
	segs := split(r.URL.Path)
	if len(segs) != 4 {
		http.NotFound(w, r)
		return
	}
	rest := strings.Join(segs[1:], "/")
	if rest != "v2.0/.well-known/openid-configuration" && rest != "discovery/v2.0/keys" && rest != "oauth2/v2.0/token" {
		http.NotFound(w, r)
		return
	}
	s.mu.Lock()
	tenant := s.knownTenant(segs[0])
	s.mu.Unlock()
	if tenant == "" {
		writeEntraError(w, http.StatusBadRequest, "invalid_request", 90002,
			"Tenant '%s' not found. Check to make sure you have the correct tenant ID and are signing into the correct cloud.", segs[0])
		return
	}
	base := s.url + "/" + tenant
	switch {
	case rest == "oauth2/v2.0/token" && r.Method == http.MethodPost:
		s.serveToken(w, r, tenant)
	case r.Method != http.MethodGet:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	case rest == "discovery/v2.0/keys":
		// Entra signs the tokens of every tenant with the same keys.
		writeJSON(w, http.StatusOK, jwks{Keys: []jwk{rsaJWK(&s.tokenKey.PublicKey, tokenKeyID)}})
	default:
		writeJSON(w, http.StatusOK, map[string]any{
			"issuer":                                base + "/v2.0",
			"authorization_endpoint":                base + "/oauth2/v2.0/authorize",
			"token_endpoint":                        base + "/oauth2/v2.0/token",
			"device_authorization_endpoint":         base + "/oauth2/v2.0/devicecode",
			"end_session_endpoint":                  base + "/oauth2/v2.0/logout",
			"jwks_uri":                              base + "/discovery/v2.0/keys",
			"token_endpoint_auth_methods_supported": []string{"client_secret_post", "private_key_jwt", "client_secret_basic"},
			"response_modes_supported":              []string{"query", "fragment", "form_post"},
			"response_types_supported":              []string{"code", "id_token", "code id_token", "id_token token"},
			"subject_types_supported":               []string{"pairwise"},
			"id_token_signing_alg_values_supported": []string{"RS256"},
			"scopes_supported":                      []string{"openid", "profile", "email", "offline_access"},
			"tenant_region_scope":                   "EU",
			"cloud_instance_name":                   s.host,
		})
	}
}

// entraError is a token endpoint error: Entra's OAuth error and AADSTS code and text.
type entraError struct {
	status int
	oauth  string // OAuth 2.0 error code: invalid_client, invalid_request, ...
	code   int    // AADSTS number
	text   string
}

func aadsts(status int, oauth string, code int, format string, args ...any) *entraError {
	return &entraError{status: status, oauth: oauth, code: code, text: fmt.Sprintf(format, args...)}
}

func writeEntraError(w http.ResponseWriter, status int, oauth string, code int, format string, args ...any) {
	e := aadsts(status, oauth, code, format, args...)
	now := time.Now().UTC().Format("2006-01-02 15:04:05Z")
	trace, corr := newUUID(), newUUID()
	writeJSON(w, e.status, map[string]any{
		"error":             e.oauth,
		"error_description": fmt.Sprintf("AADSTS%d: %s\r\nTrace ID: %s\r\nCorrelation ID: %s\r\nTimestamp: %s", e.code, e.text, trace, corr, now),
		"error_codes":       []int{e.code},
		"timestamp":         now,
		"trace_id":          trace,
		"correlation_id":    corr,
		"error_uri":         fmt.Sprintf("https://login.microsoftonline.com/error?code=%d", e.code),
	})
}

func (s *Server) serveToken(w http.ResponseWriter, r *http.Request, tenant string) {
	token, e := s.issueToken(r, tenant)
	if e != nil {
		writeEntraError(w, e.status, e.oauth, e.code, "%s", e.text)
		return
	}
	w.Header().Set("Cache-Control", "no-store, no-cache")
	secs := int(s.opts.TokenLifetime / time.Second)
	writeJSON(w, http.StatusOK, map[string]any{
		"token_type": "Bearer", "expires_in": secs, "ext_expires_in": secs, "access_token": token,
	})
}

// issueToken checks a client credentials request to a tenant and returns an access token.
func (s *Server) issueToken(r *http.Request, tenant string) (string, *entraError) {
	if err := r.ParseForm(); err != nil {
		return "", aadsts(http.StatusBadRequest, "invalid_request", 900144, "The request body must be application/x-www-form-urlencoded: %v", err)
	}
	f := r.PostForm
	if g := f.Get("grant_type"); g != "client_credentials" {
		return "", aadsts(http.StatusBadRequest, "unsupported_grant_type", 70003, "The app requested an unsupported grant type '%s'.", g)
	}
	clientID := f.Get("client_id")
	if clientID == "" {
		return "", aadsts(http.StatusBadRequest, "invalid_request", 900144, "The request body must contain the following parameter: 'client_id'.")
	}
	s.mu.Lock()
	app := s.apps[clientID]
	var objectID string
	registered := app != nil
	if registered {
		objectID, registered = s.servicePrincipal(tenant, app)
	}
	s.mu.Unlock()
	if !registered {
		return "", aadsts(http.StatusBadRequest, "unauthorized_client", 700016,
			"Application with identifier '%s' was not found in the directory '%s'. This can happen if the application has not been installed by the "+
				"administrator of the tenant or consented to by any user in the tenant. You may have sent your authentication request to the wrong tenant.",
			clientID, tenant)
	}
	resource, e := s.scopeResource(f.Get("scope"), tenant)
	if e != nil {
		return "", e
	}
	switch {
	case f.Get("client_secret") != "":
		if app.Secret == "" || f.Get("client_secret") != app.Secret {
			return "", aadsts(http.StatusUnauthorized, "invalid_client", 7000215,
				"Invalid client secret provided. Ensure the secret being sent in the request is the client secret value, not the client secret ID, for a "+
					"secret added to app '%s'.", clientID)
		}
	case f.Get("client_assertion") != "":
		if t := f.Get("client_assertion_type"); t != assertionType {
			return "", aadsts(http.StatusBadRequest, "invalid_request", 50027,
				"JWT token is invalid or malformed: client_assertion_type is '%s', not '%s'.", t, assertionType)
		}
		if e := s.checkAssertion(app, f.Get("client_assertion"), tenant); e != nil {
			return "", e
		}
	default:
		return "", aadsts(http.StatusUnauthorized, "invalid_client", 7000216,
			"'client_assertion', 'client_secret' or 'request' is required for the 'client_credentials' grant type.")
	}
	tok, err := s.mintAccessToken(tenant, app.ClientID, objectID, resource)
	if err != nil {
		return "", aadsts(http.StatusInternalServerError, "server_error", 90000, "signing the token: %v", err)
	}
	return tok, nil
}

// mintAccessToken signs an access token of a tenant for an app or identity and a resource.
func (s *Server) mintAccessToken(tenant, clientID, objectID, resource string) (string, error) {
	now := time.Now()
	return signJWT(s.tokenKey, tokenKeyID, claims{
		Issuer:    s.url + "/" + tenant + "/v2.0",
		Subject:   objectID,
		Audience:  audience{resource},
		IssuedAt:  numericDate(now.Unix()),
		NotBefore: numericDate(now.Unix()),
		Expiry:    numericDate(now.Add(s.opts.TokenLifetime).Unix()),
		ID:        newUUID(),
		TenantID:  tenant,
		AppID:     clientID,
		ObjectID:  objectID,
		Version:   "1.0",
	})
}

// scopeResource returns the resource (token audience) of a client credentials scope, which must
// be one resource's "/.default" scope; MSAL adds the OpenID Connect scopes, which do not count.
func (s *Server) scopeResource(scope, tenant string) (string, *entraError) {
	var resources []string
	for _, sc := range strings.Fields(scope) {
		switch sc {
		case "openid", "offline_access", "profile", "email":
		default:
			resources = append(resources, sc)
		}
	}
	var resource string
	ok := len(resources) == 1
	if ok {
		resource, ok = strings.CutSuffix(resources[0], "/.default")
	}
	if !ok {
		return "", aadsts(http.StatusBadRequest, "invalid_scope", 1002012,
			"The provided value for scope %s is not valid. Client credential flows must have a scope value with /.default suffixed to the resource "+
				"identifier (application ID URI).", scope)
	}
	for _, a := range s.audiences() {
		if strings.TrimSuffix(a, "/") == strings.TrimSuffix(resource, "/") {
			return resource, nil
		}
	}
	return "", aadsts(http.StatusBadRequest, "invalid_resource", 500011,
		"The resource principal named %s was not found in the tenant named %s. This can happen if the application has not been installed by the "+
			"administrator of the tenant or consented to by any user in the tenant. You might have sent your authentication request to the wrong tenant.",
		resource, tenant)
}

// checkAssertion checks a client assertion: one the app signed with a registered certificate
// (iss = sub = client ID), or a token of an external issuer one of its federated credentials
// trusts.
func (s *Server) checkAssertion(app *App, assertion, tenant string) *entraError {
	p, err := parseJWT(assertion)
	if err != nil {
		return aadsts(http.StatusBadRequest, "invalid_request", 50027, "JWT token is invalid or malformed: %v.", err)
	}
	if p.claims.Issuer == app.ClientID {
		return s.checkCertificateAssertion(app, p, tenant)
	}
	return s.checkFederatedToken(app, p)
}

func (s *Server) checkCertificateAssertion(app *App, p *parsedJWT, tenant string) *entraError {
	thumb, sha256Thumb := decodeThumbprint(p.header.X5t), decodeThumbprint(p.header.X5tS256)
	var cert *x509.Certificate
	for _, c := range app.Certificates {
		s1, s2 := sha1.Sum(c.Raw), sha256.Sum256(c.Raw)
		if (thumb != nil && string(thumb) == string(s1[:])) || (sha256Thumb != nil && string(sha256Thumb) == string(s2[:])) {
			cert = c
		}
	}
	if cert == nil {
		return aadsts(http.StatusUnauthorized, "invalid_client", 700027,
			"The certificate with identifier used to sign the client assertion is not registered on application. [Reason - The key was not found., "+
				"Thumbprint of key used by client: '%s']",
			strings.ToUpper(hex.EncodeToString(append(thumb, sha256Thumb...))))
	}
	pub, ok := cert.PublicKey.(*rsa.PublicKey)
	if !ok || p.verify(pub) != nil {
		return aadsts(http.StatusUnauthorized, "invalid_client", 700027, "Client assertion failed signature validation.")
	}
	if p.claims.Subject != app.ClientID {
		return aadsts(http.StatusUnauthorized, "invalid_client", 700021,
			"Client assertion application identifier doesn't match 'client_id' parameter: sub is '%s'.", p.claims.Subject)
	}
	endpoint := s.url + "/" + tenant + "/oauth2/v2.0/token"
	if !p.claims.Audience.contains(endpoint) {
		return aadsts(http.StatusUnauthorized, "invalid_client", 700027,
			"Client assertion contains an invalid audience %q: it must be the token endpoint %s.", []string(p.claims.Audience), endpoint)
	}
	return checkAssertionTime(p)
}

// decodeThumbprint decodes an x5t or x5t#S256 header (standard or URL base64; MSAL sends
// standard).
func decodeThumbprint(v string) []byte {
	if v == "" {
		return nil
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(v); err == nil {
			return b
		}
	}
	return nil
}

func checkAssertionTime(p *parsedJWT) *entraError {
	now := time.Now()
	exp, nbf := p.claims.Expiry.time(), p.claims.NotBefore.time()
	if p.claims.Expiry == 0 || now.After(exp.Add(clockSkew)) || (p.claims.NotBefore != 0 && now.Add(clockSkew).Before(nbf)) {
		return aadsts(http.StatusUnauthorized, "invalid_client", 700024,
			"Client assertion is not within its valid time range. Current time: %s, assertion valid from %s, expiry time of assertion %s. Review the "+
				"documentation at https://learn.microsoft.com/entra/identity-platform/certificate-credentials .",
			now.UTC().Format(time.RFC3339), nbf.Format(time.RFC3339), exp.Format(time.RFC3339))
	}
	return nil
}

// checkFederatedToken matches an external token against the app's federated credentials (issuer,
// then subject, then audience, as Entra reports them), then checks its signature with the keys
// the issuer publishes and its lifetime.
func (s *Server) checkFederatedToken(app *App, p *parsedJWT) *entraError {
	c := p.claims
	const check = "Check your federated identity credential Subject, Audience and Issuer against the presented assertion. " +
		"https://learn.microsoft.com/entra/workload-id/workload-identity-federation"
	var byIssuer, bySubject []FederatedCredential
	for _, fc := range app.Federated {
		if fc.Issuer == c.Issuer {
			byIssuer = append(byIssuer, fc)
		}
	}
	if len(byIssuer) == 0 {
		return aadsts(http.StatusUnauthorized, "invalid_client", 700211,
			"No matching federated identity record found for presented assertion issuer '%s'. %s", c.Issuer, check)
	}
	for _, fc := range byIssuer {
		if fc.Subject == c.Subject {
			bySubject = append(bySubject, fc)
		}
	}
	if len(bySubject) == 0 {
		return aadsts(http.StatusUnauthorized, "invalid_client", 700213,
			"No matching federated identity record found for presented assertion subject '%s'. %s", c.Subject, check)
	}
	matched := false
	for _, fc := range bySubject {
		for _, a := range fc.Audiences {
			matched = matched || c.Audience.contains(a)
		}
	}
	if !matched {
		return aadsts(http.StatusUnauthorized, "invalid_client", 700212,
			"No matching federated identity record found for presented assertion audience '%s'. Please note that the matching is done using a "+
				"case-sensitive comparison. %s", strings.Join(c.Audience, "', '"), check)
	}
	key, err := s.issuerKey(c.Issuer, p.header.Kid)
	if err != nil {
		return aadsts(http.StatusUnauthorized, "invalid_client", 50166, "Request to External OIDC endpoint failed: %v.", err)
	}
	if p.verify(key) != nil {
		return aadsts(http.StatusUnauthorized, "invalid_client", 700027, "Client assertion failed signature validation.")
	}
	return checkAssertionTime(p)
}

// issuerKey fetches the issuer's signing key kid by OIDC discovery, as Entra does: the issuer's
// /.well-known/openid-configuration names its jwks_uri.
func (s *Server) issuerKey(issuer, kid string) (*rsa.PublicKey, error) {
	var conf struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := s.getJSON(strings.TrimSuffix(issuer, "/")+"/.well-known/openid-configuration", &conf); err != nil {
		return nil, err
	}
	if conf.Issuer != issuer {
		return nil, fmt.Errorf("the OpenID configuration of %s names issuer %q", issuer, conf.Issuer)
	}
	var set jwks
	if err := s.getJSON(conf.JWKSURI, &set); err != nil {
		return nil, err
	}
	for _, k := range set.Keys {
		if k.Kid == kid || (kid == "" && len(set.Keys) == 1) {
			return k.rsaKey()
		}
	}
	return nil, fmt.Errorf("the issuer %s publishes no key %q", issuer, kid)
}

func (s *Server) getJSON(url string, v any) error {
	resp, err := s.client.Get(url)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// authenticate checks an ARM request's bearer token as ARM does, for a subscription of tenant.
// A refusal's WWW-Authenticate names the tenant's authority, whatever the token, as ARM's does: a
// client learns a subscription's tenant from it without any token (an unauthenticated
// GET https://management.azure.com/subscriptions/{id}?api-version=2022-12-01 answers 401 with
// `Bearer authorization_uri="https://login.windows.net/{tenant}"`).
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request, tenant string) (*claims, *apiError) {
	c, e := s.checkBearer(r.Header.Get("Authorization"), tenant)
	if e != nil {
		w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer authorization_uri="%s/%s", error="invalid_token", error_description=%q`,
			s.url, tenant, e.Message))
	}
	return c, e
}

// checkBearer checks an Authorization header: a valid token (checkToken) of the tenant that
// holds the subscription. A token of another tenant is refused, auxiliary tokens or not: "the
// primary token ... must be from a tenant that can manage the subscription"
// (https://learn.microsoft.com/azure/azure-resource-manager/management/authenticate-multi-tenant).
func (s *Server) checkBearer(header, tenant string) (*claims, *apiError) {
	if header == "" {
		return nil, newError(http.StatusUnauthorized, "AuthenticationFailed", "Authentication failed. The 'Authorization' header is missing.")
	}
	token, ok := strings.CutPrefix(header, "Bearer ")
	if !ok {
		return nil, newError(http.StatusUnauthorized, "AuthenticationFailed",
			"Authentication failed. The 'Authorization' header is provided in an invalid format.")
	}
	c, e := s.checkToken(token)
	if e != nil {
		return nil, e
	}
	if !strings.EqualFold(c.TenantID, tenant) {
		return nil, newError(http.StatusUnauthorized, "InvalidAuthenticationTokenTenant",
			"The access token is from the wrong issuer '%s'. It must match the tenant '%s/%s' associated with this subscription. Please use the "+
				"authority (URL) '%s/%s' to get the token.", c.Issuer, s.url, tenant, s.url, tenant)
	}
	return c, nil
}

// checkToken checks an access token as ARM does: signed by Entra, unexpired, for ARM's audience.
// It returns the token's claims, also with an error once they could be read.
func (s *Server) checkToken(token string) (*claims, *apiError) {
	p, err := parseJWT(token)
	if err != nil || p.verify(&s.tokenKey.PublicKey) != nil {
		return nil, newError(http.StatusUnauthorized, "InvalidAuthenticationToken", "The access token is invalid.")
	}
	now := time.Now()
	if exp := p.claims.Expiry.time(); now.After(exp) {
		return &p.claims, newError(http.StatusUnauthorized, "ExpiredAuthenticationToken",
			"The access token expiry UTC time '%s' is earlier than current UTC time '%s'.", exp.Format(time.RFC1123), now.UTC().Format(time.RFC1123))
	}
	allowed := false
	for _, a := range s.audiences() {
		for _, got := range p.claims.Audience {
			allowed = allowed || strings.TrimSuffix(a, "/") == strings.TrimSuffix(got, "/")
		}
	}
	if !allowed {
		return &p.claims, newError(http.StatusUnauthorized, "InvalidAuthenticationTokenAudience",
			"The access token has been obtained for wrong audience or resource '%s'. It should exactly match with one of the allowed audiences '%s'.",
			strings.Join(p.claims.Audience, ","), strings.Join(s.audiences(), "','"))
	}
	return &p.claims, nil
}

// serveMetadata serves the cloud metadata document in the format of
// https://management.azure.com/metadata/endpoints?api-version=2022-09-01, which
// hashicorp/go-azure-sdk (azurerm's metadata_host) reads, pointing login and resource manager at
// this server.
func (s *Server) serveMetadata(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeError(w, newError(http.StatusMethodNotAllowed, "MethodNotAllowed", "Use GET."))
		return
	}
	switch v := r.URL.Query().Get("api-version"); v {
	case MetadataAPIVersion:
		writeJSON(w, http.StatusOK, s.metadata())
	case metadataListAPIVersion:
		writeJSON(w, http.StatusOK, []map[string]any{s.metadata()})
	default:
		writeError(w, newError(http.StatusBadRequest, "InvalidApiVersionParameter",
			"The api-version '%s' is invalid. The supported versions are '%s', '%s'.", v, MetadataAPIVersion, metadataListAPIVersion))
	}
}

// metadataListAPIVersion is the api-version whose answer is a list of clouds, each in the
// document's format (Azure/msrestazure-for-python#165: the newer versions return "a set of
// clouds"; Azure/azure-cli#14483 lists clouds from api-version=2019-05-01), which
// cloud-provider-azure's azclient reads for a custom cloud's resourceManagerEndpoint and picks by
// name (pkg/azclient/cloud.go OverrideAzureCloudConfigAndEnvConfigFromMetadataService).
const metadataListAPIVersion = "2019-05-01"

// metadata is the cloud metadata document. Services the server does not implement point at
// names under the .invalid top-level domain, which never resolve.
func (s *Server) metadata() map[string]any {
	const none = "https://armtest.invalid/"
	return map[string]any{
		"name":   "ArmTest",
		"portal": none,
		"authentication": map[string]any{
			"loginEndpoint":    s.url,
			"audiences":        s.audiences(),
			"tenant":           "common",
			"identityProvider": "AAD",
		},
		"resourceManager":                       s.url + "/",
		"microsoftGraphResourceId":              none,
		"graph":                                 none,
		"graphAudience":                         none,
		"media":                                 none,
		"batch":                                 none,
		"sqlManagement":                         none,
		"activeDirectoryDataLake":               none,
		"vmImageAliasDoc":                       none,
		"appInsightsResourceId":                 none,
		"appInsightsTelemetryChannelResourceId": none,
		"attestationResourceId":                 none,
		"synapseAnalyticsResourceId":            none,
		"logAnalyticsResourceId":                none,
		"ossrDbmsResourceId":                    none,
		"suffixes": map[string]any{
			"storage":                             "storage.armtest.invalid",
			"keyVaultDns":                         "vault.armtest.invalid",
			"mhsmDns":                             "managedhsm.armtest.invalid",
			"acrLoginServer":                      "azurecr.armtest.invalid",
			"sqlServerHostname":                   "database.armtest.invalid",
			"mysqlServerEndpoint":                 "mysql.armtest.invalid",
			"postgresqlServerEndpoint":            "postgres.armtest.invalid",
			"mariadbServerEndpoint":               "mariadb.armtest.invalid",
			"azureFrontDoorEndpointSuffix":        "azurefd.armtest.invalid",
			"storageSyncEndpointSuffix":           "afs.armtest.invalid",
			"synapseAnalytics":                    "synapse.armtest.invalid",
			"attestationEndpoint":                 "attest.armtest.invalid",
			"azureDataLakeStoreFileSystem":        "datalake.armtest.invalid",
			"azureDataLakeAnalyticsCatalogAndJob": "datalakeanalytics.armtest.invalid",
		},
	}
}
