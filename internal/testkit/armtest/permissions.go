package armtest

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
)

// Azure RBAC for the callers of ARM: every request is an action on a scope
// (https://learn.microsoft.com/azure/role-based-access-control/resource-provider-operations),
// which ARM refuses with 403 AuthorizationFailed unless one of the caller's roles allows it
// (https://learn.microsoft.com/azure/role-based-access-control/troubleshooting). A write that
// links another resource needs that resource's action too: a machine carrying a user-assigned
// identity needs .../userAssignedIdentities/assign/action on it, refused with 403
// LinkedAuthorizationFailed
// (https://learn.microsoft.com/azure/role-based-access-control/built-in-roles/identity#managed-identity-operator).
//
// A caller holds the roles SetCallerRoles gave it on the subscription; one never given any is
// the subscription's Owner, as the tests' start-up app and identities are.

// rolePermissions are built-in roles' actions and not-actions, as the built-in roles page lists
// them (https://learn.microsoft.com/azure/role-based-access-control/built-in-roles), the parts
// that bear on the APIs the server serves.
var rolePermissions = map[string]struct{ actions, notActions []string }{
	"Owner": {actions: []string{"*"}},
	"Contributor": {actions: []string{"*"}, notActions: []string{"Microsoft.Authorization/*/Delete", "Microsoft.Authorization/*/Write",
		"Microsoft.Authorization/elevateAccess/Action"}},
	"Reader":                    {actions: []string{"*/read"}},
	"User Access Administrator": {actions: []string{"*/read", "Microsoft.Authorization/*"}},
	// Disks read, write and delete only, not disks/* (built-in-roles/compute#virtual-machine-contributor):
	// no snapshots, no beginGetAccess.
	"Virtual Machine Contributor": {actions: []string{"Microsoft.Compute/virtualMachines/*", "Microsoft.Compute/virtualMachineScaleSets/*",
		"Microsoft.Compute/locations/*", "Microsoft.Compute/disks/read", "Microsoft.Compute/disks/write", "Microsoft.Compute/disks/delete",
		"Microsoft.Network/networkInterfaces/*", "Microsoft.Network/virtualNetworks/read",
		"Microsoft.Network/virtualNetworks/subnets/join/action", "Microsoft.Resources/subscriptions/resourceGroups/read",
		"Microsoft.Authorization/*/read", "Microsoft.Storage/storageAccounts/listKeys/action", "Microsoft.Storage/storageAccounts/read"}},
	// built-in-roles/storage#storage-account-contributor.
	"Storage Account Contributor": {actions: []string{"Microsoft.Storage/storageAccounts/*", "Microsoft.Authorization/*/read",
		"Microsoft.Network/virtualNetworks/subnets/joinViaServiceEndpoint/action", "Microsoft.Resources/subscriptions/resourceGroups/read",
		"Microsoft.Resources/deployments/*", "Microsoft.Insights/alertRules/*", "Microsoft.Insights/diagnosticSettings/*", "Microsoft.Support/*"}},
	"Managed Identity Operator": {actions: []string{"Microsoft.ManagedIdentity/userAssignedIdentities/*/read",
		"Microsoft.ManagedIdentity/userAssignedIdentities/*/assign/action", "Microsoft.Authorization/*/read",
		"Microsoft.Resources/subscriptions/resourceGroups/read"}},
}

// SetCallerRoles makes the roles on the subscription the only ones of the application (client)
// ID's tokens; none restores the default, Owner.
func (s *Server) SetCallerRoles(clientID string, roles ...string) error {
	for _, r := range roles {
		if _, ok := rolePermissions[r]; !ok {
			return fmt.Errorf("armtest knows the built-in roles %v, not %q", sortedKeys(rolePermissions), r)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(roles) == 0 {
		delete(s.callerRoles, clientID)
	} else {
		s.callerRoles[clientID] = roles
	}
	return nil
}

// rolesOf are a caller's roles; s.mu is held.
func (s *Server) rolesOf(c *claims) []string {
	if roles, ok := s.callerRoles[c.AppID]; ok {
		return roles
	}
	return []string{"Owner"}
}

// allows reports whether one of roles allows action: an action pattern matches it, and no
// not-action pattern of the same role does. Patterns hold '*' wildcards and match without regard
// to case.
func allows(roles []string, action string) bool {
	return slices.ContainsFunc(roles, func(r string) bool {
		p := rolePermissions[r]
		match := func(pattern string) bool { return wildcard(pattern).MatchString(action) }
		return slices.ContainsFunc(p.actions, match) && !slices.ContainsFunc(p.notActions, match)
	})
}

// wildcard is an action pattern as a regular expression. A "/*/" segment stands for any number
// of segments, none included: the Managed Identity Operator's
// Microsoft.ManagedIdentity/userAssignedIdentities/*/assign/action grants
// Microsoft.ManagedIdentity/userAssignedIdentities/assign/action.
func wildcard(pattern string) *regexp.Regexp {
	parts := strings.Split(pattern, "*")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	re := strings.ReplaceAll(strings.Join(parts, ".*"), "/.*/", "/(?:.*/)?")
	return regexp.MustCompile("(?i)^" + re + "$")
}

// action is the operation a request performs: <type>/read, write or delete, or a POST's
// <type>/<name>/action.
func (q *armRequest) action() string {
	typ := q.route.typ
	if typ == "" {
		typ = "Microsoft.Resources/subscriptions/resourceGroups" // operation status reads
	}
	switch q.r.Method {
	case http.MethodGet:
		return typ + "/read"
	case http.MethodDelete:
		return typ + "/delete"
	case http.MethodPost:
		return typ + "/" + q.segs[len(q.segs)-1] + "/action"
	}
	return typ + "/write"
}

// authorize refuses a request none of the caller's roles allows.
func (s *Server) authorize(q *armRequest) *apiError {
	s.mu.Lock()
	roles := s.rolesOf(q.caller)
	s.mu.Unlock()
	if action := q.action(); !allows(roles, action) {
		return newError(http.StatusForbidden, "AuthorizationFailed", "The client '%s' with object id '%s' does not have authorization to perform "+
			"action '%s' over scope '%s' or the scope is invalid. If access was recently granted, please refresh your credentials.",
			q.caller.AppID, q.caller.ObjectID, action, q.resourceID())
	}
	return nil
}

// checkLinkedIdentities refuses a machine's write that makes it carry user-assigned identities
// the caller may not assign; s.mu is held.
func (s *Server) checkLinkedIdentities(q *armRequest, identities []string) *apiError {
	const assign = "Microsoft.ManagedIdentity/userAssignedIdentities/assign/action"
	if len(identities) == 0 || allows(s.rolesOf(q.caller), assign) {
		return nil
	}
	return newError(http.StatusForbidden, "LinkedAuthorizationFailed", "The client '%s' with object id '%s' has permission to perform action "+
		"'%s' on scope '%s'; however, it does not have permission to perform action(s) '%s' on the linked scope(s) '%s' (respectively) or "+
		"the linked scope(s) are invalid.", q.caller.AppID, q.caller.ObjectID, q.action(), q.resourceID(), assign, strings.Join(identities, ","))
}

// PermissionsAPIVersion is the version of the permissions API armauthorization/v2 calls.
const PermissionsAPIVersion = "2022-04-01"

// permissionRoutes list the caller's permissions on a resource group
// (https://learn.microsoft.com/rest/api/authorization/permissions/list-for-resource-group) or the
// subscription (the same API at the subscription's scope): one entry per role.
var permissionRoutes = []armRoute{
	{segs: split("subscriptions/{}/providers/Microsoft.Authorization/permissions"), typ: "Microsoft.Authorization/permissions",
		versions: []string{PermissionsAPIVersion}, methods: map[string]armHandler{http.MethodGet: (*Server).listPermissions}},
	{segs: split("subscriptions/{}/resourcegroups/{}/providers/Microsoft.Authorization/permissions"), typ: "Microsoft.Authorization/permissions",
		versions: []string{PermissionsAPIVersion},
		methods:  map[string]armHandler{http.MethodGet: (*Server).listPermissions}},
}

func (s *Server) listPermissions(w http.ResponseWriter, q *armRequest) *apiError {
	s.mu.Lock()
	roles := s.rolesOf(q.caller)
	s.mu.Unlock()
	value := make([]map[string][]string, 0, len(roles))
	for _, r := range roles {
		p := rolePermissions[r]
		value = append(value, map[string][]string{"actions": p.actions, "notActions": append([]string{}, p.notActions...),
			"dataActions": {}, "notDataActions": {}})
	}
	writeJSON(w, http.StatusOK, map[string]any{"value": value})
	return nil
}
