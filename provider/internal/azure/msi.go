package azure

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
)

// msiAPIVersion is the version of the managed identity token API azurerm's custom endpoint
// (msi_endpoint) calls.
const msiAPIVersion = "2018-02-01"

// msiEndpointCredential gets a managed identity's tokens from an endpoint that serves them as
// the instance metadata service does
// (https://learn.microsoft.com/entra/identity/managed-identities-azure-resources/how-to-use-vm-token#get-a-token-using-http):
// GET <endpoint>?api-version=2018-02-01&resource=<resource>[&client_id=<ID>] with the header
// Metadata: true.
type msiEndpointCredential struct {
	endpoint *url.URL
	clientID string
	client   *http.Client
}

func newMSIEndpointCredential(endpoint, clientID string, opts azcore.ClientOptions) (*msiEndpointCredential, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("msi_endpoint %q is not an http(s) URL", endpoint)
	}
	client := &http.Client{Timeout: 30 * time.Second}
	if hc, ok := opts.Transport.(*http.Client); ok {
		client = hc
	}
	return &msiEndpointCredential{endpoint: u, clientID: clientID, client: client}, nil
}

// GetToken implements azcore.TokenCredential.
func (m *msiEndpointCredential) GetToken(ctx context.Context, opts policy.TokenRequestOptions) (azcore.AccessToken, error) {
	if len(opts.Scopes) != 1 {
		return azcore.AccessToken{}, fmt.Errorf("a managed identity token is for one resource, not %v", opts.Scopes)
	}
	u := *m.endpoint
	q := u.Query()
	q.Set("api-version", msiAPIVersion)
	q.Set("resource", strings.TrimSuffix(opts.Scopes[0], "/.default"))
	if m.clientID != "" {
		q.Set("client_id", m.clientID)
	}
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return azcore.AccessToken{}, err
	}
	req.Header.Set("Metadata", "true")
	resp, err := m.client.Do(req)
	if err != nil {
		return azcore.AccessToken{}, fmt.Errorf("managed identity endpoint %s: %w", m.endpoint.Host, err)
	}
	defer func() { _ = resp.Body.Close() }()
	var body struct {
		AccessToken string `json:"access_token"`
		ExpiresOn   string `json:"expires_on"` // seconds since the epoch, as a string
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&body); err != nil {
		return azcore.AccessToken{}, fmt.Errorf("managed identity endpoint %s: %s: %w", m.endpoint.Host, resp.Status, err)
	}
	if resp.StatusCode != http.StatusOK || body.AccessToken == "" {
		return azcore.AccessToken{}, fmt.Errorf("managed identity endpoint %s: %s: %s: %s", m.endpoint.Host, resp.Status, body.Error, body.Description)
	}
	secs, err := strconv.ParseInt(body.ExpiresOn, 10, 64)
	if err != nil {
		return azcore.AccessToken{}, fmt.Errorf("managed identity endpoint %s: expires_on %q is not a time", m.endpoint.Host, body.ExpiresOn)
	}
	return azcore.AccessToken{Token: body.AccessToken, ExpiresOn: time.Unix(secs, 0)}, nil
}
