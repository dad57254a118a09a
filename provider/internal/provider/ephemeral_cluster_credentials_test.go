package provider

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/echoprovider"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"
)

// The credential reaches another provider during the run (the echo provider shows what it got),
// and never the state of the cluster resource.
func TestAccClusterCredentials(t *testing.T) {
	t.Parallel()
	_, provider := testAccLocal(t)
	resource.Test(t, resource.TestCase{
		TerraformVersionChecks: []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_10_0)},
		ProtoV6ProviderFactories: map[string]func() (tfprotov6.ProviderServer, error){
			"kubewin": providerserver.NewProtocol6WithError(New("test")()),
			"echo":    echoprovider.NewProviderServer(),
		},
		Steps: []resource.TestStep{{
			Config: provider + `
resource "kubewin_cluster" "test" {
  name = "creds"
  local {}
}

ephemeral "kubewin_cluster_credentials" "admin" {
  cluster_id = kubewin_cluster.test.id
}

provider "echo" {
  data = ephemeral.kubewin_cluster_credentials.admin
}

resource "echo" "admin" {}
`,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("echo.admin", tfjsonpath.New("data").AtMapKey("client_key"),
					knownvalue.StringRegexp(regexp.MustCompile(`-----BEGIN (RSA |EC )?PRIVATE KEY-----`))),
				statecheck.ExpectKnownValue("echo.admin", tfjsonpath.New("data").AtMapKey("host"),
					knownvalue.StringRegexp(regexp.MustCompile(`^https://127\.0\.0\.1:\d+$`))),
			},
		}},
	})
}

// A cluster_id that names no cluster is an error on cluster_id that says what to set: a local
// name the state_dir has no cluster of, and an azure cluster ID whose cluster is gone.
func TestAccClusterCredentials_noCluster(t *testing.T) {
	t.Parallel()
	state, provider := testAccLocal(t)
	f := newAzureFixture(t, state)
	gone := armServer.ResourceGroupID(f.group) + "/providers/Microsoft.Network/loadBalancers/gone-apiserver"
	config := func(id string) string {
		return provider + fmt.Sprintf(`
ephemeral "kubewin_cluster_credentials" "admin" {
  cluster_id = %q
}
`, id)
	}
	resource.Test(t, resource.TestCase{
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_10_0)},
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: config("nope"), ExpectError: regexp.MustCompile(`(?s)Cluster Not Found.*cluster_id = "nope": the local backend has no\s+` +
				`cluster named "nope".*Set\s+cluster_id\s+to\s+a\s+kubewin_cluster's\s+id`)},
			{Config: config(gone), ExpectError: regexp.MustCompile(`(?s)Cannot Reach the Cluster.*kubewin cannot reach the cluster\s+cluster_id.*` +
				`gone-apiserver.*Check\s+that\s+the\s+kubewin_cluster\s+still\s+exists`)},
		},
	})
}
