package armtest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/authorization/armauthorization/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
)

const networkContributor = "/subscriptions/" + testSubscription +
	"/providers/Microsoft.Authorization/roleDefinitions/4d97b98b-1d4f-4787-a291-c67834d212e7"

// A user-assigned identity made through ARM gets client and principal IDs; a role assignment to
// it is refused (PrincipalNotFound) while it replicates unless principalType says it is a
// service principal, and always for a principal that does not exist; the same role twice under
// another name is RoleAssignmentExists; the global managed identity endpoint does not serve its
// tokens (only the instance metadata endpoint of a machine that carries it does:
// TestIMDSTokenOnlyForCarriedIdentity).
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
	if got := token(); got != http.StatusBadRequest {
		t.Fatalf("a token of a user-assigned identity no machine carries, from the global endpoint: %d", got)
	}
	if _, err := ids.Delete(ctx, testGroup, "ccm", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ids.Get(ctx, testGroup, "ccm", nil); responseError(t, err).StatusCode != http.StatusNotFound {
		t.Fatalf("a deleted identity: %v", err)
	}
	for _, id := range f.s.ResourceIDs(testGroup) {
		if strings.Contains(id, "Microsoft.ManagedIdentity") || strings.Contains(id, "Microsoft.Authorization") {
			t.Errorf("left behind: %s", id)
		}
	}
}

// A machine's instance metadata endpoint serves tokens of the user-assigned identities it
// carries (by client_id, or without one when it carries one), whose object ID is the identity's
// principal, and "Identity not found" for any other, as IMDS does; a scale set naming an identity
// that does not exist is refused.
func TestIMDSTokenOnlyForCarriedIdentity(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := testContext(t)
	msi, err := armmsi.NewClientFactory(testSubscription, f.cred, f.opts)
	if err != nil {
		t.Fatal(err)
	}
	ids := msi.NewUserAssignedIdentitiesClient()
	made := map[string]armmsi.Identity{}
	for _, name := range []string{"carried", "other"} {
		r, err := ids.CreateOrUpdate(ctx, testGroup, name, armmsi.Identity{Location: to.Ptr(f.s.Location())}, nil)
		if err != nil {
			t.Fatal(err)
		}
		made[name] = r.Identity
	}
	carrying := func(id string) armcompute.VirtualMachineScaleSet {
		m := f.windowsScaleSet(1, "")
		m.Identity = &armcompute.VirtualMachineScaleSetIdentity{Type: to.Ptr(armcompute.ResourceIdentityTypeUserAssigned),
			UserAssignedIdentities: map[string]*armcompute.UserAssignedIdentitiesValue{id: {}}}
		return m
	}
	missing := f.s.ResourceGroupID(testGroup) + "/providers/Microsoft.ManagedIdentity/userAssignedIdentities/missing"
	if _, err := f.compute.NewVirtualMachineScaleSetsClient().BeginCreateOrUpdate(ctx, testGroup, "bad", carrying(missing), nil); err == nil ||
		responseError(t, err).ErrorCode != "FailedIdentityOperation" {
		t.Fatalf("a scale set carrying an identity that does not exist: %v", err)
	}
	f.createScaleSet(t, "win", carrying(*made["carried"].ID))
	booted, err := f.booter.WaitBoots(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	token := func(clientID string) (int, string) {
		u := booted[0].MetadataEndpoint + ManagedIdentityPath + "?api-version=2018-02-01&resource=" + url.QueryEscape(ManagementAudience)
		if clientID != "" {
			u += "&client_id=" + clientID
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Metadata", "true")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		var body struct {
			AccessToken string `json:"access_token"`
			Error       string `json:"error_description"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body.AccessToken + body.Error
	}
	for _, clientID := range []string{*made["carried"].Properties.ClientID, ""} {
		code, tok := token(clientID)
		if code != http.StatusOK {
			t.Fatalf("the carried identity's token (client_id %q): %d %s", clientID, code, tok)
		}
		var c claims
		parts := strings.Split(tok, ".")
		payload, err := base64.RawURLEncoding.DecodeString(parts[min(1, len(parts)-1)])
		if err == nil {
			err = json.Unmarshal(payload, &c)
		}
		if err != nil || c.ObjectID != *made["carried"].Properties.PrincipalID {
			t.Errorf("the token's claims %+v (%v), want oid %s", c, err, *made["carried"].Properties.PrincipalID)
		}
	}
	if code, msg := token(*made["other"].Properties.ClientID); code != http.StatusBadRequest || msg != "Identity not found" {
		t.Errorf("another identity's token: %d %s", code, msg)
	}
}

// A PATCH's identity type applies as Compute's does: None removes the identity, a type without
// UserAssigned removes the user-assigned ones, and a null removes one of them.
func TestPatchIdentity(t *testing.T) {
	const doc = `{"identity":{"type":"SystemAssigned, UserAssigned","userAssignedIdentities":{"/a":{},"/b":{}}},"location":"x"}`
	for _, c := range []struct{ patch, want string }{
		{`{"identity":{"type":"None"}}`, `{"location":"x"}`},
		{`{"identity":{"type":"SystemAssigned"}}`, `{"identity":{"type":"SystemAssigned"},"location":"x"}`},
		{`{"identity":{"type":"UserAssigned","userAssignedIdentities":{"/b":null}}}`,
			`{"identity":{"type":"UserAssigned","userAssignedIdentities":{"/a":{}}},"location":"x"}`},
		{`{"location":"x"}`, doc},
	} {
		var d, p any
		if err := json.Unmarshal([]byte(doc), &d); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(c.patch), &p); err != nil {
			t.Fatal(err)
		}
		got, err := json.Marshal(patchIdentity(p, mergePatch(d, p)))
		if err != nil || string(got) != c.want {
			t.Errorf("PATCH %s: %s, %v; want %s", c.patch, got, err, c.want)
		}
	}
}
