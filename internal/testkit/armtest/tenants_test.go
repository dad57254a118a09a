package armtest

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"
)

// sharedImage is a gallery image version in the subscription of another tenant, in which the
// start-up app is registered too.
func (f *fixture) sharedImage(t *testing.T) (Tenant, string) {
	t.Helper()
	other := f.s.AddTenant(Tenant{ClientIDs: []string{f.s.Credentials().ClientID}})
	image := "/subscriptions/" + other.SubscriptionID + "/resourceGroups/shared/providers/Microsoft.Compute/galleries/g/images/ws2022/versions/1.0.0"
	if err := f.s.AddImage(image, map[string]string{"kubewin.io/windows-build": "20348"}); err != nil {
		t.Fatal(err)
	}
	return other, image
}

// multiTenantCompute is a compute client of the server's subscription whose requests carry the
// auxiliary tokens of tenants, or else the header given.
func (f *fixture) multiTenantCompute(t *testing.T, tenants []string, header http.Header) *armcompute.ClientFactory {
	t.Helper()
	c := f.s.Credentials()
	opts := &arm.ClientOptions{ClientOptions: f.clientOptions(), AuxiliaryTenants: tenants}
	opts.PerCallPolicies = []policy.Policy{headerPolicy(header)}
	compute, err := armcompute.NewClientFactory(c.SubscriptionID, f.secretCredential(t, c.TenantID, c.ClientID, c.ClientSecret), opts)
	if err != nil {
		t.Fatal(err)
	}
	return compute
}

// secretCredential is a client secret credential of a tenant that also gets tokens of others.
func (f *fixture) secretCredential(t *testing.T, tenant, clientID, secret string) azcore.TokenCredential {
	t.Helper()
	cred, err := azidentity.NewClientSecretCredential(tenant, clientID, secret, &azidentity.ClientSecretCredentialOptions{
		ClientOptions: f.clientOptions(), DisableInstanceDiscovery: true, AdditionallyAllowedTenants: []string{"*"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return cred
}

// headerPolicy sets headers on every request.
type headerPolicy http.Header

func (h headerPolicy) Do(req *policy.Request) (*http.Response, error) {
	for k, v := range h {
		req.Raw().Header[k] = v
	}
	return req.Next()
}

// A scale set or virtual machine of the server's subscription made from another tenant's gallery
// image needs that tenant's auxiliary token: without it, or with another tenant's, ARM refuses the
// write (create or update) with 403 LinkedAuthorizationFailed; an auxiliary token that is not
// valid is refused with 401.
func TestLinkedImageNeedsAuxiliaryToken(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := testContext(t)
	other, image := f.sharedImage(t)
	third := f.s.AddTenant(Tenant{ClientIDs: []string{f.s.Credentials().ClientID}})
	m := f.windowsScaleSet(1, "config")
	m.Properties.VirtualMachineProfile.StorageProfile.ImageReference.ID = to.Ptr(image)
	linkedRefusal := "however the current tenant '" + f.s.TenantID() + "' is not authorized to access linked subscription '" +
		other.SubscriptionID + "'"
	create := func(compute *armcompute.ClientFactory) error {
		p, err := compute.NewVirtualMachineScaleSetsClient().BeginCreateOrUpdate(ctx, testGroup, "shared", m, nil)
		if err == nil {
			_, err = p.PollUntilDone(ctx, fast)
		}
		return err
	}
	for _, tt := range []struct {
		name    string
		tenants []string
	}{{"no auxiliary token", nil}, {"another tenant's token", []string{third.ID}}, {"the server's tenant's token", []string{f.s.TenantID()}}} {
		err := create(f.multiTenantCompute(t, tt.tenants, nil))
		if re := responseError(t, err); re.StatusCode != http.StatusForbidden || re.ErrorCode != "LinkedAuthorizationFailed" ||
			!strings.Contains(err.Error(), linkedRefusal) {
			t.Errorf("%s: %v", tt.name, err)
		}
	}

	now := time.Now()
	expired, err := signJWT(f.s.tokenKey, tokenKeyID, claims{Audience: audience{ManagementAudience}, TenantID: other.ID, AppID: "some-app",
		IssuedAt: numericDate(now.Add(-2 * time.Hour).Unix()), Expiry: numericDate(now.Add(-time.Hour).Unix())})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, header, code, text string }{
		{"an expired token", "Bearer " + expired, "ExpiredAuthenticationToken", "(auxiliary token of client 'some-app', tenant '" + other.ID + "')"},
		{"a token that is not Entra's", "Bearer " + expired[:strings.LastIndex(expired, ".")] + ".c2ln", "InvalidAuthenticationToken", ""},
		{"four tokens", strings.Repeat("Bearer "+expired+", ", 3) + "Bearer " + expired, "InvalidAuthenticationToken", "up to 3"},
		{"no scheme", expired, "AuthenticationFailed", "invalid format"},
	} {
		err := create(f.multiTenantCompute(t, nil, http.Header{"X-Ms-Authorization-Auxiliary": {tt.header}}))
		if re := responseError(t, err); re.StatusCode != http.StatusUnauthorized || re.ErrorCode != tt.code || !strings.Contains(err.Error(), tt.text) {
			t.Errorf("%s: %v", tt.name, err)
		}
	}

	if err := create(f.multiTenantCompute(t, []string{third.ID, other.ID}, nil)); err != nil {
		t.Fatalf("with the gallery's tenant's token: %v", err)
	}
	// An update of the scale set reads the image again.
	_, err = f.compute.NewVirtualMachineScaleSetsClient().BeginUpdate(ctx, testGroup, "shared", capacity(2), nil)
	if re := responseError(t, err); re.ErrorCode != "LinkedAuthorizationFailed" {
		t.Errorf("an update without the auxiliary token: %v", err)
	}
	p, err := f.multiTenantCompute(t, []string{other.ID}, nil).NewVirtualMachineScaleSetsClient().BeginUpdate(ctx, testGroup, "shared", capacity(2), nil)
	if err == nil {
		_, err = p.PollUntilDone(ctx, fast)
	}
	if err != nil {
		t.Errorf("an update with the auxiliary token: %v", err)
	}

	pn, err := f.network.NewInterfacesClient().BeginCreateOrUpdate(ctx, testGroup, "vm-nic", armnetwork.Interface{
		Location: to.Ptr(f.s.Location()),
		Properties: &armnetwork.InterfacePropertiesFormat{IPConfigurations: []*armnetwork.InterfaceIPConfiguration{{Name: to.Ptr("ip"),
			Properties: &armnetwork.InterfaceIPConfigurationPropertiesFormat{Subnet: &armnetwork.Subnet{ID: to.Ptr(f.subnetID)}}}}},
	}, nil)
	nic := done(t, pn, err)
	vm := armcompute.VirtualMachine{Location: to.Ptr(f.s.Location()), Properties: &armcompute.VirtualMachineProperties{
		HardwareProfile: &armcompute.HardwareProfile{VMSize: to.Ptr(armcompute.VirtualMachineSizeTypesStandardD2SV3)},
		StorageProfile:  &armcompute.StorageProfile{ImageReference: &armcompute.ImageReference{ID: to.Ptr(image)}},
		OSProfile:       &armcompute.OSProfile{ComputerName: to.Ptr("vm0"), AdminUsername: to.Ptr("kwadmin"), AdminPassword: to.Ptr(testPassword)},
		NetworkProfile:  &armcompute.NetworkProfile{NetworkInterfaces: []*armcompute.NetworkInterfaceReference{{ID: nic.ID}}},
	}}
	_, err = f.compute.NewVirtualMachinesClient().BeginCreateOrUpdate(ctx, testGroup, "vm0", vm, nil)
	if re := responseError(t, err); re.ErrorCode != "LinkedAuthorizationFailed" || !strings.Contains(err.Error(), linkedRefusal) {
		t.Errorf("a virtual machine without the auxiliary token: %v", err)
	}
}

// Another tenant's Entra serves its apps only; ARM serves the images of its subscription to its
// tokens only, and names the tenant to whoever asks without one.
func TestOtherTenant(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := testContext(t)
	other, image := f.sharedImage(t)
	c := f.s.Credentials()
	readImage := func(cred azcore.TokenCredential) (armcompute.GalleryImageVersionsClientGetResponse, error) {
		compute, err := armcompute.NewClientFactory(other.SubscriptionID, cred, f.opts)
		if err != nil {
			t.Fatal(err)
		}
		return compute.NewGalleryImageVersionsClient().Get(ctx, "shared", "g", "ws2022", "1.0.0", nil)
	}

	got, err := readImage(f.secretCredential(t, other.ID, c.ClientID, c.ClientSecret))
	if err != nil || got.ID == nil || *got.ID != image || *got.Tags["kubewin.io/windows-build"] != "20348" {
		t.Errorf("the image with a token of its tenant: %+v, %v", got, err)
	}
	_, err = readImage(f.cred)
	if re := responseError(t, err); re.StatusCode != http.StatusUnauthorized || re.ErrorCode != "InvalidAuthenticationTokenTenant" ||
		!strings.Contains(re.RawResponse.Header.Get("WWW-Authenticate"), `authorization_uri="`+f.s.URL()+"/"+other.ID+`"`) {
		t.Errorf("the image with a token of the server's tenant: %v", err)
	}
	stranger := f.s.RegisterApp(App{Secret: "s3cret"})
	_, err = readImage(f.secretCredential(t, other.ID, stranger.ClientID, stranger.Secret))
	if err == nil || !strings.Contains(err.Error(), "AADSTS700016: Application with identifier '"+stranger.ClientID+"' was not found in the directory '"+
		other.ID+"'") {
		t.Errorf("an app not registered in the tenant: %v", err)
	}

	// No token at all: the answer names the subscription's tenant.
	resp, err := f.s.HTTPClient().Get(f.s.URL() + "/subscriptions/" + other.SubscriptionID + "?api-version=2022-12-01")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "/"+other.ID+`"`) {
		t.Errorf("unauthenticated: %s %q", resp.Status, resp.Header.Get("WWW-Authenticate"))
	}
	// The other subscription holds the seeded images only.
	compute, err := armcompute.NewClientFactory(other.SubscriptionID, f.secretCredential(t, other.ID, c.ClientID, c.ClientSecret), f.opts)
	if err != nil {
		t.Fatal(err)
	}
	_, err = compute.NewVirtualMachineScaleSetsClient().Get(ctx, "shared", "win", nil)
	if re := responseError(t, err); re.ErrorCode != "InvalidResourceType" {
		t.Errorf("a scale set in the other subscription: %v", err)
	}
	if err := f.s.AddImage("/subscriptions/"+newUUID()+"/resourceGroups/g/providers/Microsoft.Compute/images/i", nil); err == nil {
		t.Error("an image in a subscription the server does not know was seeded")
	}
}
