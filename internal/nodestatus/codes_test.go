package nodestatus

import (
	"strings"
	"testing"
)

// A remedy that names a NodeConfig field also names what sets it in Terraform: a pool's or a
// node's user never sees the NodeConfig.
func TestRemediesNameTerraformAttributes(t *testing.T) {
	setBy := map[string]string{
		"runtime.name":              "azure.image_manifest",
		"cluster.apiServerEndpoint": "kubernetes.host",
		"cluster.caCertHashes":      "kubernetes.cluster_ca_certificate",
		"node.podCIDR":              "cluster_cidr",
		"network.interfaceName":     "interface_name",
		"token TTL":                 "token_ttl",
	}
	for _, c := range Catalogue {
		for field, attr := range setBy {
			if strings.Contains(c.Remedy, field) && !strings.Contains(c.Remedy, attr) {
				t.Errorf("%s: the remedy names %s but not the Terraform attribute %s: %q", c.Code, field, attr, c.Remedy)
			}
		}
	}
}
