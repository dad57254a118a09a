package provider

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
)

// api_server_authorized_ip_ranges with existing subnets is refused at plan time: kubewin makes
// no security group in subnets it does not own, so the ranges would be silently ignored.
func TestAccClusterAzure_authorizedRangesExistingSubnets(t *testing.T) {
	t.Parallel()
	testServerOnly(t)
	_, provider := testAccLocal(t)
	vnet := armServer.ResourceGroupID("kubewin-ranges") + "/providers/Microsoft.Network/virtualNetworks/vnet/subnets/"
	config := azureClusterConfig(provider, clusterVersion(t), armServer.Location(), "kubewin-ranges", fmt.Sprintf(`    master_subnet_id = %q
    agent_subnet_id  = %q
    api_server_authorized_ip_ranges = ["203.0.113.0/24"]`, vnet+"masters", vnet+"agents"))
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: config, PlanOnly: true,
			ExpectError: regexp.MustCompile(`(?s)Authorized Ranges Need the Cluster's Own Network.*existing\s+subnets.*would\s+be\s+ignored.*` +
				`restrict\s+TCP\s+6443`),
		}},
	})
}
