package provider

import (
	"context"
	"fmt"
	"maps"
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

	"github.com/kubewin/kubewin/internal/kubeadmboot"
)

// An azure cluster's Linux agents pulling from Azure Container Registry as a user-assigned
// identity: an identity that does not exist is refused at plan time; with one, the agents'
// scale set carries it, their cloud-init gives the kubelet the credential provider for the
// identity's client ID (the simulated kubelet refuses to start on a configuration the kubelet's
// loader would not load, or without the provider the script downloads), the machine's instance
// metadata service serves the identity's tokens, and another identity is refused at plan time.
func TestAccClusterAzure_agentKubeletIdentity(t *testing.T) {
	t.Parallel()
	testServerOnly(t)
	_, provider := testAccLocal(t)
	group := fmt.Sprintf("kubewin-cluster-%d", azureSeq.Add(1))
	armServer.AddResourceGroup(group)
	cred, opts := azureClient(t).ARM()
	ids, err := armmsi.NewUserAssignedIdentitiesClient(armServer.SubscriptionID(), cred, opts)
	if err != nil {
		t.Fatal(err)
	}
	created, err := ids.CreateOrUpdate(context.Background(), group, "agents-kubelet", armmsi.Identity{Location: to.Ptr(armServer.Location())}, nil)
	if err != nil {
		t.Fatal(err)
	}
	identityID, clientID := *created.ID, *created.Properties.ClientID
	scaleSets, err := armcompute.NewVirtualMachineScaleSetsClient(armServer.SubscriptionID(), cred, opts)
	if err != nil {
		t.Fatal(err)
	}
	config := func(identity string) string {
		return azureClusterConfig(provider, clusterVersion(t), armServer.Location(), group, fmt.Sprintf(
			"    cloud_provider = { enabled = false }\n    linux_pool = { node_count = 1, kubelet_identity_id = %q }", identity))
	}
	missing := armServer.ResourceGroupID(group) + "/providers/Microsoft.ManagedIdentity/userAssignedIdentities/missing"
	at := tfjsonpath.New("azure").AtMapKey("linux_pool").AtMapKey("kubelet_identity_id")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config:      config(missing),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)Cannot Read the Kubelet Identity.*userAssignedIdentities/missing`),
			},
			{
				Config: config(identityID),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("kubewin_cluster.test", at, knownvalue.StringExact(identityID)),
					checkFunc(func() error {
						ss, err := scaleSets.Get(context.Background(), group, "acc-agents", nil)
						if err != nil {
							return err
						}
						if ss.Identity == nil || !slices.ContainsFunc(slices.Collect(maps.Keys(ss.Identity.UserAssignedIdentities)),
							func(id string) bool { return strings.EqualFold(id, identityID) }) {
							return fmt.Errorf("the agents' scale set carries %+v, not %s", ss.Identity, identityID)
						}
						ins := armServer.Instances(*ss.ID)
						if len(ins) != 1 || !slices.Contains(ins[0].Identities, strings.ToLower(identityID)) {
							return fmt.Errorf("instances %+v, want 1 carrying %s", ins, identityID)
						}
						doc, err := kubeadmboot.Parse(ins[0].CustomData)
						if err != nil {
							return err
						}
						if azure := doc.Files[kubeadmboot.RegistryConfigPath].Content; !strings.Contains(azure, `"userAssignedIdentityID": "`+clientID+`"`) {
							return fmt.Errorf("the credential provider's Azure configuration does not name the identity's client ID %s:\n%s", clientID,
								azure)
						}
						return identityToken(ins[0], clientID)
					}),
				},
			},
			{
				Config:      config(strings.Replace(identityID, "agents-kubelet", "other", 1)),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)Change Would Replace the Cluster.*azure\.linux_pool\.kubelet_identity_id`),
			},
		},
	})
}
