package armtest

import (
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/authorization/armauthorization/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
)

// A caller holds its roles: a Contributor makes an identity but no role assignment
// (AuthorizationFailed naming the action and the scope) and lists its permissions with
// Microsoft.Authorization writes among its not-actions; a Virtual Machine Contributor cannot make
// a scale set carry an identity (LinkedAuthorizationFailed) until it is also a Managed Identity
// Operator; without roles set it is the Owner again.
func TestCallerRoles(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := testContext(t)
	app := f.s.Credentials().ClientID
	if err := f.s.SetCallerRoles(app, "Contributor"); err != nil {
		t.Fatal(err)
	}
	msi, err := armmsi.NewClientFactory(testSubscription, f.cred, f.opts)
	if err != nil {
		t.Fatal(err)
	}
	auth, err := armauthorization.NewClientFactory(testSubscription, f.cred, f.opts)
	if err != nil {
		t.Fatal(err)
	}
	made, err := msi.NewUserAssignedIdentitiesClient().CreateOrUpdate(ctx, testGroup, "kubelet", armmsi.Identity{Location: to.Ptr(f.s.Location())}, nil)
	if err != nil {
		t.Fatalf("a Contributor makes an identity: %v", err)
	}
	scope := f.s.ResourceGroupID(testGroup)
	_, err = auth.NewRoleAssignmentsClient().Create(ctx, scope, "00000000-0000-0000-0000-0000000000aa", armauthorization.RoleAssignmentCreateParameters{
		Properties: &armauthorization.RoleAssignmentProperties{PrincipalID: made.Properties.PrincipalID, RoleDefinitionID: to.Ptr(networkContributor),
			PrincipalType: to.Ptr(armauthorization.PrincipalTypeServicePrincipal)}}, nil)
	if re := responseError(t, err); re.ErrorCode != "AuthorizationFailed" ||
		!strings.Contains(err.Error(), "'Microsoft.Authorization/roleAssignments/write'") || !strings.Contains(err.Error(), scope) {
		t.Fatalf("a Contributor's role assignment: %v", err)
	}
	page, err := auth.NewPermissionsClient().NewListForResourceGroupPager(testGroup, nil).NextPage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Value) != 1 || len(page.Value[0].NotActions) == 0 || *page.Value[0].NotActions[1] != "Microsoft.Authorization/*/Write" {
		t.Fatalf("a Contributor's permissions: %+v", page.Value)
	}

	carrying := f.windowsScaleSet(1, "")
	carrying.Identity = &armcompute.VirtualMachineScaleSetIdentity{Type: to.Ptr(armcompute.ResourceIdentityTypeUserAssigned),
		UserAssignedIdentities: map[string]*armcompute.UserAssignedIdentitiesValue{*made.ID: {}}}
	if err := f.s.SetCallerRoles(app, "Virtual Machine Contributor"); err != nil {
		t.Fatal(err)
	}
	_, err = f.compute.NewVirtualMachineScaleSetsClient().BeginCreateOrUpdate(ctx, testGroup, "win", carrying, nil)
	if re := responseError(t, err); re.ErrorCode != "LinkedAuthorizationFailed" ||
		!strings.Contains(err.Error(), "'Microsoft.ManagedIdentity/userAssignedIdentities/assign/action'") {
		t.Fatalf("a scale set carrying an identity its maker may not assign: %v", err)
	}
	if err := f.s.SetCallerRoles(app, "Virtual Machine Contributor", "Managed Identity Operator"); err != nil {
		t.Fatal(err)
	}
	f.createScaleSet(t, "win", carrying)
	if err := f.s.SetCallerRoles(app, "Author"); err == nil {
		t.Error("a role armtest does not know was accepted")
	}
	if err := f.s.SetCallerRoles(app); err != nil {
		t.Fatal(err)
	}
	if _, err := auth.NewRoleAssignmentsClient().Create(ctx, scope, "00000000-0000-0000-0000-0000000000aa",
		armauthorization.RoleAssignmentCreateParameters{Properties: &armauthorization.RoleAssignmentProperties{
			PrincipalID: made.Properties.PrincipalID, RoleDefinitionID: to.Ptr(networkContributor),
			PrincipalType: to.Ptr(armauthorization.PrincipalTypeServicePrincipal)}}, nil); err != nil {
		t.Fatalf("the Owner's role assignment: %v", err)
	}
}

// The built-in roles hold what Azure's built-in roles page lists for them: Virtual Machine
// Contributor reads, writes and deletes disks but makes no snapshots and no storage accounts,
// which Storage Account Contributor makes.
func TestBuiltInRoleActions(t *testing.T) {
	for _, tc := range []struct {
		role, action string
		want         bool
	}{
		{"Virtual Machine Contributor", "Microsoft.Compute/disks/write", true},
		{"Virtual Machine Contributor", "Microsoft.Compute/disks/delete", true},
		{"Virtual Machine Contributor", "Microsoft.Compute/disks/beginGetAccess/action", false},
		{"Virtual Machine Contributor", "Microsoft.Compute/snapshots/write", false},
		{"Virtual Machine Contributor", "Microsoft.Storage/storageAccounts/listKeys/action", true},
		{"Virtual Machine Contributor", "Microsoft.Storage/storageAccounts/write", false},
		{"Storage Account Contributor", "Microsoft.Storage/storageAccounts/write", true},
		{"Storage Account Contributor", "Microsoft.Storage/storageAccounts/fileServices/shares/write", true},
		{"Storage Account Contributor", "Microsoft.Compute/disks/write", false},
	} {
		if got := allows([]string{tc.role}, tc.action); got != tc.want {
			t.Errorf("%s allows %s: %v, want %v", tc.role, tc.action, got, tc.want)
		}
	}
}
