package azure

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
)

// Images shared from a gallery of another tenant
// (https://learn.microsoft.com/azure/virtual-machines/share-using-app-registration), with the app
// registered in both tenants. ARM lets a write use such an image only when the request carries a
// token of the gallery's tenant among its auxiliary tokens (auxiliary_tenant_ids; without one: 403
// LinkedAuthorizationFailed), and serves the image itself only to a primary token of that tenant
// (401 InvalidAuthenticationTokenTenant), whose WWW-Authenticate challenge names the tenant
// (https://learn.microsoft.com/azure/azure-resource-manager/management/authenticate-multi-tenant).

// challengeTenant is the tenant an ARM 401 names: `Bearer authorization_uri="https://login.windows.net/{tenant}", ...`.
func challengeTenant(h http.Header) string {
	_, rest, ok := strings.Cut(h.Get("WWW-Authenticate"), `authorization_uri="`)
	if !ok {
		return ""
	}
	uri, _, _ := strings.Cut(rest, `"`)
	return uri[strings.LastIndex(uri, "/")+1:]
}

// subscriptionTenant asks ARM which tenant a subscription belongs to, with no token: ARM refuses the
// request, and its challenge names the tenant whatever the caller may access.
func (c *Client) subscriptionTenant(ctx context.Context, subscription string) (string, error) {
	u := c.armOptions.Cloud.Services[cloud.ResourceManager].Endpoint + "/subscriptions/" + url.PathEscape(subscription) + "?api-version=2022-12-01"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return "", err
	}
	_ = resp.Body.Close()
	if t := challengeTenant(resp.Header); resp.StatusCode == http.StatusUnauthorized && t != "" {
		return t, nil
	}
	return "", fmt.Errorf("GET %s without a token answered %s, naming no tenant", u, resp.Status)
}

// auxiliary reports whether the configuration gets tokens of tenant as auxiliary tokens.
func (c *Client) auxiliary(tenant string) bool {
	return slices.ContainsFunc(c.armOptions.AuxiliaryTenants, func(t string) bool { return strings.EqualFold(t, tenant) })
}

// auxiliaryTenantRemedy says what lets the provider use an image of a subscription of another
// tenant ("" when unknown).
func auxiliaryTenantRemedy(subscription, tenant string) string {
	if tenant == "" {
		tenant = "the tenant of subscription " + subscription
	}
	return fmt.Sprintf("The image is in subscription %s of another tenant, %s, and ARM uses it only with a token of that tenant: add %s to "+
		"auxiliary_tenant_ids in the provider's azure block (or to ARM_AUXILIARY_TENANT_IDS, separated by ';'), with the provider's app "+
		"registered in that tenant and allowed to read the image "+
		"(https://learn.microsoft.com/azure/virtual-machines/share-using-app-registration).", subscription, tenant, tenant)
}

// tenantCredential gets a credential's tokens of one tenant (one of its additionally allowed
// tenants: the auxiliary tenants).
type tenantCredential struct {
	azcore.TokenCredential
	tenant string
}

func (c tenantCredential) GetToken(ctx context.Context, opts policy.TokenRequestOptions) (azcore.AccessToken, error) {
	opts.TenantID = c.tenant
	return c.TokenCredential.GetToken(ctx, opts)
}
