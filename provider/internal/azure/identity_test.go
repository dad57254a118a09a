package azure

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
)

// The cloud provider's identity and its role assignments are made through ARM (the assignments
// right after the identity, which ARM accepts for principalType ServicePrincipal before the
// identity has replicated), made again without error, and removed with the cluster.
func TestCloudProviderIdentity(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	group := "ccm-identity"
	server.AddResourceGroup(group)
	c := &Cluster{Client: secretClient(ctx, t), Spec: testClusterSpec(t, group, "ccm")}
	c.Spec.CloudProvider = &CloudProviderSpec{Version: "v1.37.5"}
	for range 2 {
		if err := c.ensureAll(ctx, c.identity(ctx, c.identityRoles())); err != nil {
			t.Fatal(err)
		}
	}
	ids, err := c.readIdentity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ids.TenantID != server.TenantID() {
		t.Errorf("the identity's tenant %q, want the subscription's %q", ids.TenantID, server.TenantID())
	}
	got := server.RoleAssignments(group)
	if len(got) != len(CloudProviderRoles) {
		t.Fatalf("role assignments %+v, want %d", got, len(CloudProviderRoles))
	}
	for i, r := range CloudProviderRoles {
		if got[i].PrincipalID != ids.PrincipalID || got[i].Scope != server.ResourceGroupID(group) {
			t.Errorf("assignment %+v is not the identity's on the resource group", got[i])
		}
		found := false
		for _, a := range got {
			found = found || a.Role == r.Name
		}
		if !found {
			t.Errorf("no %s assignment in %+v", r.Name, got)
		}
	}
	// The Azure File CSI driver turned on adds Storage Account Contributor, turned off takes it
	// away; with it on, the cluster's removal takes it too.
	roles := func() (names []string) {
		for _, a := range server.RoleAssignments(group) {
			names = append(names, a.Role)
		}
		slices.Sort(names)
		return names
	}
	for _, file := range []bool{true, false, true} {
		c.Spec.Storage = &StorageSpec{AzureDisk: true, AzureFile: file}
		if err := c.ensureIdentityRoles(ctx); err != nil {
			t.Fatal(err)
		}
		if got := slices.Contains(roles(), StorageAccountContributor.Name); got != file {
			t.Errorf("Azure File %t: roles %q", file, roles())
		}
	}
	// The identity has Storage Account Contributor from someone else (another name): turning
	// Azure File on is not refused (ARM answers RoleAssignmentExists), and turning it off
	// leaves that assignment.
	c.Spec.Storage = &StorageSpec{AzureDisk: true}
	if err := c.ensureIdentityRoles(ctx); err != nil {
		t.Fatal(err)
	}
	theirs := uuid.NewString()
	assignments := c.Client.authorization.NewRoleAssignmentsClient()
	if _, err := assignments.Create(ctx, server.ResourceGroupID(group), theirs,
		c.roleAssignmentBody(StorageAccountContributor, ids.PrincipalID), nil); err != nil {
		t.Fatal(err)
	}
	for _, file := range []bool{true, false} {
		c.Spec.Storage = &StorageSpec{AzureDisk: true, AzureFile: file}
		if err := c.ensureIdentityRoles(ctx); err != nil {
			t.Fatalf("Azure File %t, with the identity's role given by someone else: %v", file, err)
		}
		if !slices.Contains(roles(), StorageAccountContributor.Name) {
			t.Fatalf("Azure File %t: the role given by someone else was taken away: %q", file, roles())
		}
	}
	if _, err := assignments.Delete(ctx, server.ResourceGroupID(group), theirs, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if left := server.ResourceIDs(group); len(left) > 0 || len(roles()) > 0 {
		t.Errorf("left behind: %v", left)
	}
}
