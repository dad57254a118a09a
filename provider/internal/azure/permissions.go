package azure

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/authorization/armauthorization/v2"
)

// permissionsAPIVersion is the version of Microsoft.Authorization's permissions API, which
// armauthorization/v2 calls for resource groups and resources.
const permissionsAPIVersion = "2022-04-01"

// MissingActions returns the actions of want the client's credential may not perform in a
// resource group of a subscription: at the group when it exists, else at the subscription,
// whose roles a group made later inherits. It reads the credential's effective permissions there
// (GET {scope}/providers/Microsoft.Authorization/permissions: each role assignment's actions and
// not-actions, https://learn.microsoft.com/rest/api/authorization/permissions/list-for-resource-group).
// The scope read is returned, for the message.
func (c *Client) MissingActions(ctx context.Context, subscriptionID, group string, want ...string) (missing []string, scope string, err error) {
	scope = "/subscriptions/" + subscriptionID + "/resourceGroups/" + group
	perms, err := c.permissions(ctx, scope)
	if notFound(err) {
		scope = "/subscriptions/" + subscriptionID
		perms, err = c.permissions(ctx, scope)
	}
	if err != nil {
		return nil, scope, fmt.Errorf("read the credential's permissions at %s: %w", scope, err)
	}
	for _, a := range want {
		if !permitted(perms, a) {
			missing = append(missing, a)
		}
	}
	return missing, scope, nil
}

// permissions reads the credential's permissions at a scope.
func (c *Client) permissions(ctx context.Context, scope string) ([]*armauthorization.Permission, error) {
	cl, err := arm.NewClient("kubewin", "v1.0.0", c.cred, c.armOptions)
	if err != nil {
		return nil, err
	}
	req, err := runtime.NewRequest(ctx, http.MethodGet, runtime.JoinPaths(cl.Endpoint(), scope, "providers/Microsoft.Authorization/permissions"))
	if err != nil {
		return nil, err
	}
	q := req.Raw().URL.Query()
	q.Set("api-version", permissionsAPIVersion)
	req.Raw().URL.RawQuery = q.Encode()
	resp, err := cl.Pipeline().Do(req)
	if err != nil {
		return nil, err
	}
	if !runtime.HasStatusCode(resp, http.StatusOK) {
		return nil, runtime.NewResponseError(resp)
	}
	var r armauthorization.PermissionGetResult
	if err := runtime.UnmarshalAsJSON(resp, &r); err != nil {
		return nil, err
	}
	return r.Value, nil
}

// permitted is whether one of the permissions allows the action: one of its actions matches and
// none of its not-actions does
// (https://learn.microsoft.com/azure/role-based-access-control/overview#how-azure-rbac-determines-if-a-user-has-access-to-a-resource).
func permitted(perms []*armauthorization.Permission, action string) bool {
	matches := func(patterns []*string) bool {
		return slices.ContainsFunc(patterns, func(p *string) bool { return p != nil && actionPattern(*p).MatchString(action) })
	}
	return slices.ContainsFunc(perms, func(p *armauthorization.Permission) bool {
		return p != nil && matches(p.Actions) && !matches(p.NotActions)
	})
}

// actionPattern is an action with '*' wildcards as a case-insensitive expression; a "/*/"
// segment matches any number of segments, none included (the Managed Identity Operator's
// Microsoft.ManagedIdentity/userAssignedIdentities/*/assign/action grants
// Microsoft.ManagedIdentity/userAssignedIdentities/assign/action).
func actionPattern(p string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("(?i)^")
	for i, seg := range strings.Split(p, "/") {
		switch {
		case seg == "*" && i > 0:
			b.WriteString("(/[^/]+)*")
		default:
			if i > 0 {
				b.WriteString("/")
			}
			b.WriteString(strings.ReplaceAll(regexp.QuoteMeta(seg), `\*`, ".*"))
		}
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}
