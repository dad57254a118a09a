package armtest

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"
)

// schemasDir is the ARM template schema directory: $KUBEWIN_ARM_SCHEMAS, or shared/azure-schemas
// beside the repository (where CI and the workspace keep it).
func schemasDir(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv(EnvSchemas); dir != "" {
		return dir
	}
	dir, err := filepath.Abs("../../../../shared/azure-schemas")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "common-definitions.json")); err != nil {
		t.Skipf("no ARM template schemas: set %s (make arm-contract SCHEMAS=<dir>)", EnvSchemas)
	}
	return dir
}

func TestSchemaContract(t *testing.T) {
	f := newFixture(t, Options{SchemasDir: schemasDir(t)})
	ctx := testContext(t)

	// What the SDK builds passes.
	f.createScaleSet(t, "win", f.windowsScaleSet(1, "cfg"))
	f.update(t, capacity(2))
	f.createRouteTable(t, "pods")
	if err := f.putRoute(t, "pods", "r1", podRoute("10.244.1.0/24", "10.0.1.4")); err != nil {
		t.Fatal(err)
	}
	sn, err := f.network.NewSubnetsClient().Get(ctx, testGroup, "vnet", "nodes", nil)
	if err != nil {
		t.Fatal(err)
	}
	sn.Properties.RouteTable = &armnetwork.RouteTable{ID: to.Ptr(f.s.ResourceGroupID(testGroup) + "/providers/Microsoft.Network/routeTables/pods")}
	p, err := f.network.NewSubnetsClient().BeginCreateOrUpdate(ctx, testGroup, "vnet", "nodes", sn.Subnet, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.PollUntilDone(ctx, fast); err != nil {
		t.Fatal(err)
	}
	if n := f.s.SchemaValidations(); n != 5 {
		t.Fatalf("%d bodies validated, want 5", n)
	}

	base := "/subscriptions/" + f.s.SubscriptionID() + "/resourceGroups/" + testGroup + "/providers/"
	scaleSet := base + "Microsoft.Compute/virtualMachineScaleSets/win?api-version=" + ComputeAPIVersion
	route := base + "Microsoft.Network/routeTables/pods/routes/r2?api-version=" + NetworkAPIVersion
	for _, tt := range []struct {
		name, method, path, body, pointer, rule string
	}{
		// The template schemas accept "[...]" expressions everywhere; an API body must not.
		{"expression for a boolean", http.MethodPatch, scaleSet, `{"properties":{"overprovision":"[parameters('overprovision')]"}}`,
			"/properties/overprovision", "VirtualMachineScaleSetProperties/properties/overprovision/allOf/0/type"},
		{"wrong enum", http.MethodPatch, scaleSet, `{"properties":{"virtualMachineProfile":{"storageProfile":{"osDisk":{"caching":"Sometimes"}}}}}`,
			"/properties/virtualMachineProfile/storageProfile/osDisk/caching", "/enum"},
		{"expression for an object", http.MethodPut, route, `{"properties":"[variables('route')]"}`,
			"/properties", "/type"},
		{"missing required member", http.MethodPut, route, `{"properties":{"addressPrefix":"10.244.2.0/24"}}`,
			"/properties", "RoutePropertiesFormat/required"},
		{"wrong type in a route", http.MethodPut, route,
			`{"properties":{"addressPrefix":"10.244.2.0/24","nextHopType":"VirtualAppliance","nextHopIpAddress":10}}`,
			"/properties/nextHopIpAddress", "/type"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, body := f.rawRequest(t, tt.method, tt.path, tt.body)
			got := string(body)
			if status != http.StatusBadRequest || !strings.Contains(got, `"code":"InvalidRequestContent"`) ||
				!strings.Contains(got, "ARM template schema") || !strings.Contains(got, `"target":"`+tt.pointer+`"`) || !strings.Contains(got, tt.rule) {
				t.Fatalf("%s %s: %d %s; want 400 InvalidRequestContent at %s naming rule %s", tt.method, tt.body, status, got, tt.pointer, tt.rule)
			}
		})
	}
}

func TestUnknownAndIllTypedMembers(t *testing.T) {
	f := newFixture(t, Options{})
	path := "/subscriptions/" + f.s.SubscriptionID() + "/resourceGroups/" + testGroup +
		"/providers/Microsoft.Network/routeTables/pods?api-version=" + NetworkAPIVersion
	// Under make arm-contract the JSON Schemas see the ill-typed bodies first; either check names
	// the member.
	for _, tt := range []struct{ body, want string }{
		{`{"location":"westeurope","properties":{"disableBgpRoutePropagaton":true}}`,
			"could not find member 'disableBgpRoutePropagaton' of a RouteTable body (JSON pointer /properties/disableBgpRoutePropagaton)"},
		{`{"location":"westeurope","properties":{"disableBgpRoutePropagation":"yes"}}`, "disablebgproutepropagation"},
		{`[]`, "invalidrequestcontent"},
		{``, "the body is empty"},
	} {
		status, body := f.rawRequest(t, http.MethodPut, path, tt.body)
		if status != http.StatusBadRequest || !strings.Contains(string(body), "InvalidRequestContent") || !strings.Contains(string(body),
			tt.want) && !strings.Contains(strings.ToLower(string(body)), tt.want) {
			t.Errorf("PUT %s: %d %s; want 400 InvalidRequestContent with %q", tt.body, status, body, tt.want)
		}
	}
	for _, tt := range []struct {
		path   string
		status int
		code   string
	}{
		{"/subscriptions/" + f.s.SubscriptionID() + "/resourceGroups/" + testGroup +
			"/providers/Microsoft.Network/routeTables/pods?api-version=2023-09-01", http.StatusBadRequest, "InvalidApiVersionParameter"},
		{"/subscriptions/" + f.s.SubscriptionID() + "/resourceGroups/" + testGroup + "/providers/Microsoft.Network/routeTables/pods",
			http.StatusBadRequest, "MissingApiVersionParameter"},
		{"/subscriptions/" + f.s.SubscriptionID() + "/resourceGroups/nope/providers/Microsoft.Network/routeTables/pods?api-version=" +
			NetworkAPIVersion, http.StatusNotFound, "ResourceGroupNotFound"},
		{"/subscriptions/00000000-0000-0000-0000-00000000000f/resourceGroups/" + testGroup +
			"/providers/Microsoft.Network/routeTables/pods?api-version=" + NetworkAPIVersion, http.StatusNotFound, "SubscriptionNotFound"},
		{"/subscriptions/" + f.s.SubscriptionID() + "/resourceGroups/" + testGroup +
			"/providers/Microsoft.Network/applicationGateways/agw?api-version=" + NetworkAPIVersion, http.StatusNotFound, "InvalidResourceType"},
	} {
		status, body := f.rawRequest(t, http.MethodGet, tt.path, "")
		if status != tt.status || !strings.Contains(string(body), `"code":"`+tt.code+`"`) {
			t.Errorf("GET %s: %d %s; want %d %s", tt.path, status, body, tt.status, tt.code)
		}
	}
}
