package provider

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/kubewin/kubewin/internal/api"
	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/testkit/armtest"
)

// A pool that pulls from Azure Container Registry as a user-assigned identity: a credential that
// may not assign the identity, an image without the ACR credential provider and an identity that
// does not exist are refused at plan time; with
// both, the scale set carries the identity, the nodes' NodeConfig names its client ID and tenant,
// their kubelets start with the credential provider (the simulated kubelet refuses a
// configuration the kubelet's loader would not load, or a provider the image lacks), and the
// machine's instance metadata service serves the identity's tokens, which the provider gets.
// An import restores the identity.
func TestAccWindowsNodePool_azureKubeletIdentity(t *testing.T) {
	state, provider := testAccLocal(t)
	f := newAzureFixture(t, state)
	dir := testImageOf(t, testBackend(t, state), f.group+"-acr", func(m *v1alpha1.ImageManifest, payload map[string][]byte) {
		m.ACRCredentialProvider = "v1.37.5"
		payload[v1alpha1.ACRCredentialProviderPath] = []byte("simulated acr-credential-provider")
	})
	image := armServer.ResourceGroupID(f.group) + "/providers/Microsoft.Compute/galleries/kubewin/images/ws2022/versions/2.0.0"
	if err := armServer.AddImage(image, imageTags(t, dir)); err != nil {
		t.Fatal(err)
	}
	armBooter.AddImage(image, dir)

	cred, opts := azureClient(t).ARM()
	ids, err := armmsi.NewUserAssignedIdentitiesClient(armServer.SubscriptionID(), cred, opts)
	if err != nil {
		t.Fatal(err)
	}
	created, err := ids.CreateOrUpdate(context.Background(), f.group, "kubelet", armmsi.Identity{Location: to.Ptr(armServer.Location())}, nil)
	if err != nil {
		t.Fatal(err)
	}
	identityID, clientID, tenantID := *created.ID, *created.Properties.ClientID, *created.Properties.TenantID
	scaleSets, err := armcompute.NewVirtualMachineScaleSetsClient(armServer.SubscriptionID(), cred, opts)
	if err != nil {
		t.Fatal(err)
	}
	missing := armServer.ResourceGroupID(f.group) + "/providers/Microsoft.ManagedIdentity/userAssignedIdentities/missing"

	reader := armServer.RegisterApp(armtest.App{Secret: "reader-secret-of-the-test"})
	if err := armServer.SetCallerRoles(reader.ClientID, "Reader"); err != nil {
		t.Fatal(err)
	}
	owner := armServer.Credentials()
	as := func(id, secret string) func() {
		return func() {
			t.Setenv("ARM_CLIENT_ID", id)
			t.Setenv("ARM_CLIENT_SECRET", secret)
		}
	}

	be := f.poolBackend()
	with := func(identity string) poolBackend {
		b := be
		b.block = func(image string) string {
			return strings.Replace(be.block(image), "    image_id", fmt.Sprintf("    kubelet_identity_id = %q\n    image_id", identity), 1)
		}
		return b
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				// A credential that may not assign the identity (a Reader).
				PreConfig:   as(reader.ClientID, reader.Secret),
				Config:      poolConfig(provider, with(identityID), image, 1),
				ExpectError: regexp.MustCompile(`(?s)Cannot Assign the Kubelet Identity.*userAssignedIdentities/assign/action.*Managed\s+Identity\s+Operator`),
			},
			{
				PreConfig:   as(owner.ClientID, owner.ClientSecret),
				Config:      poolConfig(provider, with(identityID), f.imageA, 1),
				ExpectError: regexp.MustCompile(`(?s)Image Cannot Pull From Azure Container Registry by Identity.*acr_credential_provider_version`),
			},
			{
				Config:      poolConfig(provider, with(missing), image, 1),
				ExpectError: regexp.MustCompile(`(?s)Cannot Read the Kubelet Identity.*userAssignedIdentities/missing`),
			},
			{
				Config: poolConfig(provider, with(identityID), image, 1),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("kubewin_windows_node_pool.win", tfjsonpath.New("nodes"), knownvalue.ListSizeExact(1)),
					statecheck.ExpectKnownValue("kubewin_windows_node_pool.win", tfjsonpath.New("azure").AtMapKey("kubelet_identity_id"),
						knownvalue.StringExact(identityID)),
					checkFunc(func() error {
						ins := armServer.Instances(f.scaleSetID())
						if len(ins) != 1 {
							return fmt.Errorf("%d instances, want 1", len(ins))
						}
						in := ins[0]
						if !slices.Contains(in.Identities, strings.ToLower(identityID)) {
							return fmt.Errorf("the instance carries %v, not the kubelet identity %s", in.Identities, identityID)
						}
						cfg, err := api.LoadNodeConfig(in.CustomData)
						if err != nil {
							return err
						}
						want := v1alpha1.AzureContainerRegistry{Cloud: "ArmTest", ResourceManagerEndpoint: "https://" + armServer.MetadataHost(),
							TenantID: tenantID, IdentityClientID: clientID}
						if a := cfg.Kubelet.AzureContainerRegistry; a == nil || *a != want {
							return fmt.Errorf("the NodeConfig's azureContainerRegistry is %+v, want %+v", a, want)
						}
						return identityToken(in, clientID)
					}),
				},
			},
			{
				// Imported, the pool has its identity again.
				ResourceName:            "kubewin_windows_node_pool.win",
				ImportState:             true,
				ImportStateId:           f.scaleSetID(),
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"timeouts", "nodes"},
				Config:                  poolConfig(provider, with(identityID), image, 1),
			},
			{
				// Without the attribute the scale set carries the identity no more, nor do the
				// machines that replace the old ones.
				Config: poolConfig(provider, be, image, 1),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("kubewin_windows_node_pool.win", tfjsonpath.New("azure").AtMapKey("kubelet_identity_id"), knownvalue.Null()),
					checkFunc(func() error {
						ss, err := scaleSets.Get(context.Background(), f.group, "win", nil)
						if err != nil {
							return err
						}
						if ss.Identity != nil {
							return fmt.Errorf("the scale set still carries identity %s %v", deref(ss.Identity.Type), ss.Identity.UserAssignedIdentities)
						}
						ins := armServer.Instances(f.scaleSetID())
						if len(ins) != 1 || len(ins[0].Identities) != 0 {
							return fmt.Errorf("instances %+v, want 1 carrying no identity", ins)
						}
						if identityToken(ins[0], clientID) == nil {
							return fmt.Errorf("the instance's metadata service gives a token of the removed kubelet identity")
						}
						return nil
					}),
				},
			},
		},
	})
}

// identityToken asks the instance's metadata service for a token of the identity, as the ACR
// credential provider on it would.
func identityToken(in armtest.Instance, clientID string) error {
	q := url.Values{"api-version": {"2018-02-01"}, "resource": {armtest.ManagementAudience}, "client_id": {clientID}}
	req, err := http.NewRequest(http.MethodGet, in.MetadataEndpoint+armtest.ManagedIdentityPath+"?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Metadata", "true")
	resp, err := armServer.HTTPClient().Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the instance's metadata service refuses a token of the kubelet identity: %s", resp.Status)
	}
	return nil
}
