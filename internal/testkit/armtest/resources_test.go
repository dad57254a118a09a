package armtest

import (
	"net/http"
	"slices"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/authorization/armauthorization/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources"
)

// Resources - List By Resource Group, read by a Reader over pages of 2, lists a group's virtual
// network, route table and user-assigned identity with their names, types, locations and tags,
// but not the subnet, the route or the role assignment (which ResourceIDs still reports); a
// gallery image version is listed with its names below the group; a group that does not exist is
// 404 ResourceGroupNotFound, and $filter is refused.
func TestListByResourceGroup(t *testing.T) {
	f := newFixture(t, Options{PageSize: 2})
	ctx := testContext(t)
	f.createRouteTable(t, "pods", &armnetwork.Route{Name: to.Ptr("r1"), Properties: podRoute("10.244.1.0/24", "10.0.1.4").Properties})
	msi, err := armmsi.NewClientFactory(testSubscription, f.cred, f.opts)
	if err != nil {
		t.Fatal(err)
	}
	made, err := msi.NewUserAssignedIdentitiesClient().CreateOrUpdate(ctx, testGroup, "ccm",
		armmsi.Identity{Location: to.Ptr(f.s.Location()), Tags: map[string]*string{"a": to.Ptr("b")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	auth, err := armauthorization.NewClientFactory(testSubscription, f.cred, f.opts)
	if err != nil {
		t.Fatal(err)
	}
	scope := f.s.ResourceGroupID(testGroup)
	const assignment = "5e3c0e1c-0000-4000-8000-000000000003"
	if _, err := auth.NewRoleAssignmentsClient().Create(ctx, scope, assignment, armauthorization.RoleAssignmentCreateParameters{
		Properties: &armauthorization.RoleAssignmentProperties{PrincipalID: made.Properties.PrincipalID, RoleDefinitionID: to.Ptr(networkContributor),
			PrincipalType: to.Ptr(armauthorization.PrincipalTypeServicePrincipal)}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.s.SetCallerRoles(f.s.Credentials().ClientID, "Reader"); err != nil {
		t.Fatal(err)
	}
	resources, err := armresources.NewClient(testSubscription, f.cred, f.opts)
	if err != nil {
		t.Fatal(err)
	}
	list := func(group string, opts *armresources.ClientListByResourceGroupOptions) ([]*armresources.GenericResourceExpanded, error) {
		var out []*armresources.GenericResourceExpanded
		pager := resources.NewListByResourceGroupPager(group, opts)
		for pager.More() {
			page, err := pager.NextPage(ctx)
			if err != nil {
				return nil, err
			}
			out = append(out, page.Value...)
		}
		return out, nil
	}

	got, err := list(testGroup, nil)
	if err != nil {
		t.Fatal(err)
	}
	type entry struct{ id, name, typ, location, tag string }
	var entries []entry
	for _, r := range got {
		e := entry{id: deref(r.ID), name: deref(r.Name), typ: deref(r.Type), location: deref(r.Location)}
		if r.Tags["a"] != nil {
			e.tag = *r.Tags["a"]
		}
		entries = append(entries, e)
	}
	loc := f.s.Location()
	want := []entry{
		{scope + "/providers/Microsoft.ManagedIdentity/userAssignedIdentities/ccm", "ccm", "Microsoft.ManagedIdentity/userAssignedIdentities", loc, "b"},
		{scope + "/providers/Microsoft.Network/routeTables/pods", "pods", "Microsoft.Network/routeTables", loc, ""},
		{scope + "/providers/Microsoft.Network/virtualNetworks/vnet", "vnet", "Microsoft.Network/virtualNetworks", loc, ""},
	}
	if !slices.Equal(entries, want) {
		t.Fatalf("listed %+v\nwant %+v", entries, want)
	}
	ids := f.s.ResourceIDs(testGroup)
	for _, id := range []string{scope + "/providers/Microsoft.Network/routeTables/pods/routes/r1",
		scope + "/providers/Microsoft.Authorization/roleAssignments/" + assignment} {
		if !slices.Contains(ids, id) {
			t.Errorf("ResourceIDs %v lacks %s", ids, id)
		}
	}

	images, err := list("images", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(images) != 1 || *images[0].ID != testImage || *images[0].Name != "kubewin/ws2022/1.0.0" ||
		*images[0].Type != "Microsoft.Compute/galleries/images/versions" || *images[0].Tags["kubewin.io/windows-build"] != "20348" {
		t.Fatalf("the images group lists %+v", images)
	}

	_, err = list("missing", nil)
	if re := responseError(t, err); re.StatusCode != http.StatusNotFound || re.ErrorCode != "ResourceGroupNotFound" {
		t.Fatalf("a group that does not exist: %v", err)
	}
	_, err = list(testGroup, &armresources.ClientListByResourceGroupOptions{Filter: to.Ptr("resourceType eq 'Microsoft.Network/virtualNetworks'")})
	if re := responseError(t, err); re.StatusCode != http.StatusBadRequest {
		t.Fatalf("a $filter: %v", err)
	}
}
