package armtest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"
)

// The tests drive the server with the real azure-sdk-for-go clients over HTTPS, trusting the
// server's CA, with credentials from azidentity against the server's Entra endpoints, and a cloud
// configuration built from the server's metadata document.

const (
	testGroup        = "kubewin-test"
	testPassword     = "Kw-test-Passw0rd!"
	testSubscription = "00000000-0000-0000-0000-000000000000"
	testImage        = "/subscriptions/" + testSubscription +
		"/resourceGroups/images/providers/Microsoft.Compute/galleries/kubewin/images/ws2022/versions/1.0.0"
)

// fixture is a server with a resource group, a virtual network (subnet "nodes", 10.0.1.0/24), a
// gallery image and SDK clients authenticated with the start-up app's client secret.
type fixture struct {
	s        *Server
	booter   *RecordingBooter
	cloud    cloud.Configuration
	cred     azcore.TokenCredential
	opts     *arm.ClientOptions
	subnetID string
	compute  *armcompute.ClientFactory
	network  *armnetwork.ClientFactory
}

func newFixture(t *testing.T, opts Options) *fixture {
	t.Helper()
	f := &fixture{booter: &RecordingBooter{}}
	if opts.Booter == nil {
		opts.Booter = f.booter
	}
	if opts.SubscriptionID == "" {
		opts.SubscriptionID = testSubscription
	}
	if opts.RetryAfter == 0 {
		opts.RetryAfter = 10 * time.Millisecond
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	f.s = s
	s.AddResourceGroup(testGroup)
	vnet, err := s.AddVirtualNetwork(VirtualNetwork{
		ResourceGroup: testGroup, Name: "vnet", AddressPrefixes: []string{"10.0.0.0/16"},
		Subnets: map[string]string{"nodes": "10.0.1.0/24"},
	})
	if err != nil {
		t.Fatal(err)
	}
	f.subnetID = vnet + "/subnets/nodes"
	if err := s.AddImage(testImage, map[string]string{"kubewin.io/windows-build": "20348"}); err != nil {
		t.Fatal(err)
	}
	f.cloud = cloudFromMetadata(t, s)
	f.opts = &arm.ClientOptions{ClientOptions: f.clientOptions()}
	c := s.Credentials()
	f.cred, err = azidentity.NewClientSecretCredential(c.TenantID, c.ClientID, c.ClientSecret, &azidentity.ClientSecretCredentialOptions{
		ClientOptions: f.clientOptions(), DisableInstanceDiscovery: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if f.compute, err = armcompute.NewClientFactory(c.SubscriptionID, f.cred, f.opts); err != nil {
		t.Fatal(err)
	}
	if f.network, err = armnetwork.NewClientFactory(c.SubscriptionID, f.cred, f.opts); err != nil {
		t.Fatal(err)
	}
	return f
}

// clientOptions trust the server's CA, use its cloud, and retry quickly.
func (f *fixture) clientOptions() azcore.ClientOptions {
	return azcore.ClientOptions{
		Cloud:     f.cloud,
		Transport: f.s.HTTPClient(),
		Retry:     policy.RetryOptions{RetryDelay: 10 * time.Millisecond, MaxRetryDelay: time.Second},
	}
}

// cloudFromMetadata builds an azcore cloud configuration from the server's metadata document,
// as a client given only the metadata host would.
func cloudFromMetadata(t *testing.T, s *Server) cloud.Configuration {
	t.Helper()
	resp, err := s.HTTPClient().Get("https://" + s.MetadataHost() + "/metadata/endpoints?api-version=2022-09-01")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var md struct {
		Name           string `json:"name"`
		Authentication struct {
			LoginEndpoint string   `json:"loginEndpoint"`
			Audiences     []string `json:"audiences"`
		} `json:"authentication"`
		ResourceManager string `json:"resourceManager"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&md); err != nil {
		t.Fatal(err)
	}
	if md.Name == "" || md.ResourceManager == "" || md.Authentication.LoginEndpoint == "" || len(md.Authentication.Audiences) == 0 {
		t.Fatalf("incomplete metadata: %+v", md)
	}
	return cloud.Configuration{
		ActiveDirectoryAuthorityHost: md.Authentication.LoginEndpoint,
		Services: map[cloud.ServiceName]cloud.ServiceConfiguration{
			cloud.ResourceManager: {Endpoint: md.ResourceManager, Audience: md.Authentication.Audiences[0]},
		},
	}
}

var fast = &runtime.PollUntilDoneOptions{Frequency: 10 * time.Millisecond}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// windowsScaleSet is the scale set model kubewin's azure backend sends for a Windows pool.
func (f *fixture) windowsScaleSet(capacity int64, customData string) armcompute.VirtualMachineScaleSet {
	return armcompute.VirtualMachineScaleSet{
		Location: to.Ptr(f.s.Location()),
		SKU:      &armcompute.SKU{Name: to.Ptr("Standard_D4s_v5"), Tier: to.Ptr("Standard"), Capacity: to.Ptr(capacity)},
		Tags:     map[string]*string{"kubewin.io/pool": to.Ptr("win")},
		Properties: &armcompute.VirtualMachineScaleSetProperties{
			OrchestrationMode: to.Ptr(armcompute.OrchestrationModeUniform),
			Overprovision:     to.Ptr(false),
			UpgradePolicy:     &armcompute.UpgradePolicy{Mode: to.Ptr(armcompute.UpgradeModeManual)},
			VirtualMachineProfile: &armcompute.VirtualMachineScaleSetVMProfile{
				OSProfile: &armcompute.VirtualMachineScaleSetOSProfile{
					ComputerNamePrefix: to.Ptr("kwwin"),
					AdminUsername:      to.Ptr("kwadmin"),
					AdminPassword:      to.Ptr(testPassword),
					CustomData:         to.Ptr(base64.StdEncoding.EncodeToString([]byte(customData))),
					WindowsConfiguration: &armcompute.WindowsConfiguration{
						EnableAutomaticUpdates: to.Ptr(false),
						ProvisionVMAgent:       to.Ptr(true),
						PatchSettings:          &armcompute.PatchSettings{PatchMode: to.Ptr(armcompute.WindowsVMGuestPatchModeManual)},
					},
				},
				StorageProfile: &armcompute.VirtualMachineScaleSetStorageProfile{
					ImageReference: &armcompute.ImageReference{ID: to.Ptr(testImage)},
					OSDisk: &armcompute.VirtualMachineScaleSetOSDisk{
						CreateOption: to.Ptr(armcompute.DiskCreateOptionTypesFromImage),
						Caching:      to.Ptr(armcompute.CachingTypesReadWrite),
						ManagedDisk:  &armcompute.VirtualMachineScaleSetManagedDiskParameters{StorageAccountType: to.Ptr(armcompute.StorageAccountTypesPremiumLRS)},
					},
				},
				NetworkProfile: &armcompute.VirtualMachineScaleSetNetworkProfile{
					NetworkInterfaceConfigurations: []*armcompute.VirtualMachineScaleSetNetworkConfiguration{{
						Name: to.Ptr("nic0"),
						Properties: &armcompute.VirtualMachineScaleSetNetworkConfigurationProperties{
							Primary:            to.Ptr(true),
							EnableIPForwarding: to.Ptr(true),
							IPConfigurations: []*armcompute.VirtualMachineScaleSetIPConfiguration{{
								Name: to.Ptr("ipconfig0"),
								Properties: &armcompute.VirtualMachineScaleSetIPConfigurationProperties{
									Primary: to.Ptr(true),
									Subnet:  &armcompute.APIEntityReference{ID: to.Ptr(f.subnetID)},
								},
							}},
						},
					}},
				},
				DiagnosticsProfile: &armcompute.DiagnosticsProfile{BootDiagnostics: &armcompute.BootDiagnostics{Enabled: to.Ptr(true)}},
			},
		},
	}
}

// createScaleSet creates a scale set and waits for its operation.
func (f *fixture) createScaleSet(t *testing.T, name string, m armcompute.VirtualMachineScaleSet) armcompute.VirtualMachineScaleSet {
	t.Helper()
	ctx := testContext(t)
	p, err := f.compute.NewVirtualMachineScaleSetsClient().BeginCreateOrUpdate(ctx, testGroup, name, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.PollUntilDone(ctx, fast)
	if err != nil {
		t.Fatal(err)
	}
	return res.VirtualMachineScaleSet
}

// scaleSetID is the ARM ID of a scale set in the test group.
func (f *fixture) scaleSetID(name string) string {
	return f.s.ResourceGroupID(testGroup) + "/providers/Microsoft.Compute/virtualMachineScaleSets/" + name
}

// responseError returns err as an *azcore.ResponseError or fails the test.
func responseError(t *testing.T, err error) *azcore.ResponseError {
	t.Helper()
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		t.Fatalf("error %v (%T) is not an *azcore.ResponseError", err, err)
	}
	return re
}

// rawRequest sends a request with a bearer token from the fixture's credential.
func (f *fixture) rawRequest(t *testing.T, method, path, body string) (int, []byte) {
	t.Helper()
	ctx := testContext(t)
	tok, err := f.cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{ManagementAudience + ".default"}})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, method, f.s.URL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := f.s.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}
