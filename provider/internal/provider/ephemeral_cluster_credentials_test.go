package provider

import (
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
