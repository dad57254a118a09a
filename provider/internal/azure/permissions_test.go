package azure

import (
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/authorization/armauthorization/v2"
)

// Effective permissions as Azure RBAC evaluates them: a role's actions less its not-actions,
// wildcards matching without regard to case, "/*/" standing for any number of segments.
func TestPermitted(t *testing.T) {
	perm := func(actions []string, notActions ...string) *armauthorization.Permission {
		return &armauthorization.Permission{Actions: to.SliceOfPtrs(actions...), NotActions: to.SliceOfPtrs(notActions...)}
	}
	owner := perm([]string{"*"})
	contributor := perm([]string{"*"}, "Microsoft.Authorization/*/Delete", "Microsoft.Authorization/*/Write")
	reader := perm([]string{"*/read"})
	operator := perm([]string{"Microsoft.ManagedIdentity/userAssignedIdentities/*/assign/action"})
	const assign, roleWrite = "Microsoft.ManagedIdentity/userAssignedIdentities/assign/action", "Microsoft.Authorization/roleAssignments/write"
	for _, tc := range []struct {
		perms  []*armauthorization.Permission
		action string
		want   bool
	}{
		{[]*armauthorization.Permission{owner}, roleWrite, true},
		{[]*armauthorization.Permission{contributor}, roleWrite, false},
		{[]*armauthorization.Permission{contributor}, assign, true},
		{[]*armauthorization.Permission{contributor}, "Microsoft.Compute/virtualMachines/write", true},
		{[]*armauthorization.Permission{reader}, "Microsoft.Compute/virtualMachines/write", false},
		{[]*armauthorization.Permission{reader}, "Microsoft.Compute/virtualMachines/read", true},
		{[]*armauthorization.Permission{operator}, assign, true},
		{[]*armauthorization.Permission{operator}, "Microsoft.ManagedIdentity/userAssignedIdentities/write", false},
		// Another role assignment's actions add up; one's not-actions do not take away another's.
		{[]*armauthorization.Permission{contributor, perm([]string{"Microsoft.Authorization/*"})}, roleWrite, true},
		{nil, "Microsoft.Compute/virtualMachines/read", false},
	} {
		if got := permitted(tc.perms, tc.action); got != tc.want {
			t.Errorf("%s with %d permissions: %v, want %v", tc.action, len(tc.perms), got, tc.want)
		}
	}
}
