package armtest

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/authorization/armauthorization/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
)

const networkContributor = "/subscriptions/" + testSubscription +
	"/providers/Microsoft.Authorization/roleDefinitions/4d97b98b-1d4f-4787-a291-c67834d212e7"

// A user-assigned identity made through ARM gets client and principal IDs; a role assignment to
// it is refused (PrincipalNotFound) while it replicates unless principalType says it is a
// service principal, and always for a principal that does not exist; the same role twice under
// another name is RoleAssignmentExists; the identity's tokens are served by client ID, and once
// it is deleted they are not.
func TestIdentityAndRoleAssignments(t *testing.T) {
	f := newFixture(t, Options{PrincipalReplication: time.Hour})
	ctx := context.Background()
	msi, err := armmsi.NewClientFactory(testSubscription, f.cred, f.opts)
	if err != nil {
		t.Fatal(err)
	}
	auth, err := armauthorization.NewClientFactory(testSubscription, f.cred, f.opts)
	if err != nil {
		t.Fatal(err)
	}
	ids := msi.NewUserAssignedIdentitiesClient()
	if _, err := ids.CreateOrUpdate(ctx, testGroup, "ccm", armmsi.Identity{}, nil); responseError(t, err).ErrorCode != "LocationRequired" {
		t.Fatalf("an identity without a location: %v", err)
	}
	created, err := ids.CreateOrUpdate(ctx, testGroup, "ccm", armmsi.Identity{Location: to.Ptr(f.s.Location())}, nil)
	if err != nil {
		t.Fatal(err)
	}
	principal, clientID := *created.Properties.PrincipalID, *created.Properties.ClientID
	tagged := armmsi.Identity{Location: to.Ptr(f.s.Location()), Tags: map[string]*string{"a": to.Ptr("b")}}
	again, err := ids.CreateOrUpdate(ctx, testGroup, "ccm", tagged, nil)
	if err != nil || *again.Properties.PrincipalID != principal || *again.Properties.ClientID != clientID {
		t.Fatalf("updating an identity changed its IDs: %v", err)
	}

	ras := auth.NewRoleAssignmentsClient()
	scope := f.s.ResourceGroupID(testGroup)
	assign := func(name, principal string, typ *armauthorization.PrincipalType) error {
		_, err := ras.Create(ctx, scope, name, armauthorization.RoleAssignmentCreateParameters{Properties: &armauthorization.RoleAssignmentProperties{
			PrincipalID: to.Ptr(principal), RoleDefinitionID: to.Ptr(networkContributor), PrincipalType: typ,
		}}, nil)
		return err
	}
	sp := to.Ptr(armauthorization.PrincipalTypeServicePrincipal)
	const name, other = "5e3c0e1c-0000-4000-8000-000000000001", "5e3c0e1c-0000-4000-8000-000000000002"
	for _, tc := range []struct {
		what, name, principal string
		typ                   *armauthorization.PrincipalType
		status                int
		code                  string
	}{
		{"a new identity without principalType", name, principal, nil, http.StatusBadRequest, "PrincipalNotFound"},
		{"a principal that does not exist", name, "00000000-1111-2222-3333-444444444444", sp, http.StatusBadRequest, "PrincipalNotFound"},
		{"a name that is not a GUID", "ccm-network", principal, sp, http.StatusBadRequest, "InvalidRoleAssignmentId"},
		{"a new identity as a service principal", name, principal, sp, 0, ""},
		{"the same assignment again", name, principal, sp, 0, ""},
		{"the same role under another name", other, principal, sp, http.StatusConflict, "RoleAssignmentExists"},
	} {
		err := assign(tc.name, tc.principal, tc.typ)
		if tc.code == "" {
			if err != nil {
				t.Fatalf("%s: %v", tc.what, err)
			}
			continue
		}
		if re := responseError(t, err); re.StatusCode != tc.status || re.ErrorCode != tc.code {
			t.Fatalf("%s: got %d %s, want %d %s", tc.what, re.StatusCode, re.ErrorCode, tc.status, tc.code)
		}
	}
	if _, err := ras.Create(ctx, scope, other, armauthorization.RoleAssignmentCreateParameters{Properties: &armauthorization.RoleAssignmentProperties{
		PrincipalID: to.Ptr(principal), RoleDefinitionID: to.Ptr(networkContributor + "0"), PrincipalType: sp,
	}}, nil); responseError(t, err).ErrorCode != "RoleDefinitionDoesNotExist" {
		t.Fatalf("an unknown role definition: %v", err)
	}
	want := []RoleAssignment{{Scope: scope, PrincipalID: principal, Role: "Network Contributor"}}
	if got := f.s.RoleAssignments(testGroup); len(got) != 1 || got[0] != want[0] {
		t.Fatalf("role assignments %+v, want %+v", got, want)
	}
	if _, err := ras.Delete(ctx, scope, name, nil); err != nil {
		t.Fatal(err)
	}

	token := func() int {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.s.URL()+ManagedIdentityPath+"?api-version=2018-02-01&client_id="+clientID+
			"&resource="+url.QueryEscape(ManagementAudience), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Metadata", "true")
		resp, err := f.s.HTTPClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	if got := token(); got != http.StatusOK {
		t.Fatalf("a token of the identity: %d", got)
	}
	if _, err := ids.Delete(ctx, testGroup, "ccm", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ids.Get(ctx, testGroup, "ccm", nil); responseError(t, err).StatusCode != http.StatusNotFound {
		t.Fatalf("a deleted identity: %v", err)
	}
	if got := token(); got != http.StatusBadRequest {
		t.Fatalf("a token of a deleted identity: %d", got)
	}
	for _, id := range f.s.ResourceIDs(testGroup) {
		if strings.Contains(id, "Microsoft.ManagedIdentity") || strings.Contains(id, "Microsoft.Authorization") {
			t.Errorf("left behind: %s", id)
		}
	}
}
