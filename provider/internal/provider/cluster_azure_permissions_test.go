package provider

import (
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"

	"github.com/kubewin/kubewin/internal/testkit/armtest"
)

// A credential that may not assign roles (a Contributor) is refused at plan time for a cluster
// whose cloud provider's identity gets roles, naming the action, the scope and the fix, before
// anything is made; without the cloud provider the same credential may plan the cluster, and a
// CSI driver without it, or of a version that is not a release, is refused.
func TestAccClusterAzure_permissions(t *testing.T) {
	state, provider := testAccLocal(t)
	g := newClusterGroup(t, state)
	version := clusterVersion(t)
	app := armServer.RegisterApp(armtest.App{Secret: "contributor-secret-of-the-test"})
	if err := armServer.SetCallerRoles(app.ClientID, "Contributor"); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ARM_CLIENT_ID", app.ClientID)
	t.Setenv("ARM_CLIENT_SECRET", app.Secret)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config:   azureClusterConfig(provider, version, armServer.Location(), g.name, ""),
				PlanOnly: true,
				ExpectError: regexp.MustCompile(`(?s)Missing Azure Permissions.*Microsoft\.Authorization/roleAssignments/write.*` +
					regexp.QuoteMeta(armServer.ResourceGroupID(g.name)) + `.*User\s+Access\s+Administrator.*cloud_provider.*Nothing\s+was\s+created`),
			},
			{
				Config:             azureClusterConfig(provider, version, armServer.Location(), g.name, "    cloud_provider = { enabled = false }"),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
			},
			{
				// Without the cloud provider, a CSI driver is refused at plan time.
				Config: azureClusterConfig(provider, version, armServer.Location(), g.name,
					"    cloud_provider = { enabled = false }\n    storage = { azure_disk = true }"),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)CSI Driver Needs the Cloud Provider.*azure\.storage\.azure_disk is\s+true`),
			},
			{
				Config:      azureClusterConfig(provider, version, armServer.Location(), g.name, `    storage = { azure_file_version = "1.35" }`),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)Invalid CSI Driver Version.*azure_file_version "1\.35"`),
			},
			{
				Config:      azureClusterConfig(provider, version, armServer.Location(), g.name, `    storage = { azure_disk_version = "v1.32.12" }`),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)CSI Driver Too Old.*azure_disk_version v1\.32\.12 is older than\s+v1\.33\.0`),
			},
		},
	})
	if left := g.leftovers(); len(left) > 0 {
		t.Errorf("the refused plan made %v", left)
	}
}
