package azure

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"sigs.k8s.io/cloud-provider-azure/pkg/azclient"
)

// upstreamCloudConfig is cloud-provider-azure's configuration file as its own types read it: the
// authentication and ARM settings are azclient's types; the provider's settings live in
// cloud-provider-azure's pkg/provider/config, whose module the Go module proxy here refuses
// (sigs.k8s.io/cloud-provider-azure, 403), so they are the names its configuration page lists
// (https://kubernetes-sigs.github.io/cloud-provider-azure/install/configs/).
type upstreamCloudConfig struct {
	azclient.ARMClientConfig
	azclient.AzureAuthConfig
	azclient.ClientFactoryConfig
	ResourceGroup              string `json:"resourceGroup"`
	Location                   string `json:"location"`
	VMType                     string `json:"vmType"`
	VnetName                   string `json:"vnetName"`
	VnetResourceGroup          string `json:"vnetResourceGroup"`
	SubnetName                 string `json:"subnetName"`
	SecurityGroupName          string `json:"securityGroupName"`
	SecurityGroupResourceGroup string `json:"securityGroupResourceGroup"`
	RouteTableName             string `json:"routeTableName"`
	RouteTableResourceGroup    string `json:"routeTableResourceGroup"`
	LoadBalancerSku            string `json:"loadBalancerSku"`
	LoadBalancerName           string `json:"loadBalancerName"`
	UseInstanceMetadata        bool   `json:"useInstanceMetadata"`
}

// decodeUpstream reads a configuration file strictly: a member no upstream type holds fails.
func decodeUpstream(t *testing.T, file []byte) upstreamCloudConfig {
	t.Helper()
	var u upstreamCloudConfig
	d := json.NewDecoder(bytes.NewReader(file))
	d.DisallowUnknownFields()
	if err := d.Decode(&u); err != nil {
		t.Fatalf("cloud-provider-azure's types do not read the configuration: %v\n%s", err, file)
	}
	return u
}

// The cloud configuration of a cluster in its own network and in existing subnets: the golden
// files, read strictly by cloud-provider-azure's types, authenticate with the user-assigned
// identity (no secret), and azclient makes a managed identity credential of them.
func TestCloudConfig(t *testing.T) {
	const clientID, sub = "11111111-2222-3333-4444-555555555555", "/subscriptions/00000000-0000-0000-0000-000000000000"
	for _, tc := range []struct {
		dir    string
		public bool
		nsg    string
	}{
		{"cluster-public", true, sub + "/resourceGroups/rg/providers/Microsoft.Network/networkSecurityGroups/acs-agents-nsg"},
		{"cluster-internal", false, sub + "/resourceGroups/net/providers/Microsoft.Network/networkSecurityGroups/a-nsg"},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			c := bodyCluster(tc.public)
			c.Spec.CloudProvider = &CloudProviderSpec{Cloud: "AzurePublicCloud", TenantID: "99999999-0000-0000-0000-000000000000"}
			file, err := c.cloudConfigFile(clientID, tc.nsg)
			if err != nil {
				t.Fatal(err)
			}
			assertBody(t, tc.dir+"/azure.json", json.RawMessage(file))
			u := decodeUpstream(t, file)
			if !u.UseManagedIdentityExtension || u.UserAssignedIdentityID != clientID || u.AADClientID != "" || u.AADClientSecret != "" ||
				u.AADClientCertPath != "" {
				t.Errorf("authentication: want the user-assigned identity %s and no secret, got %+v", clientID, u.AzureAuthConfig)
			}
			if u.SubscriptionID != c.Client.SubscriptionID || u.TenantID != c.Spec.CloudProvider.TenantID {
				t.Errorf("subscription %q, tenant %q", u.SubscriptionID, u.TenantID)
			}
			auth, err := azclient.NewAuthProvider(&u.ARMClientConfig, &u.AzureAuthConfig)
			if err != nil {
				t.Fatalf("azclient refuses the configuration: %v", err)
			}
			if _, ok := auth.GetAzIdentity().(*azidentity.ManagedIdentityCredential); !ok {
				t.Errorf("azclient made a %T of the configuration, not a managed identity credential", auth.GetAzIdentity())
			}
		})
	}
}

// A member cloud-provider-azure does not know (the configuration page has no
// useManagedIdentity) is refused by the strict reading the test relies on.
func TestCloudConfigStrictRefusesUnknown(t *testing.T) {
	var u upstreamCloudConfig
	d := json.NewDecoder(bytes.NewReader([]byte(`{"useManagedIdentity":true}`)))
	d.DisallowUnknownFields()
	if err := d.Decode(&u); err == nil {
		t.Fatal("an unknown member (useManagedIdentity) was accepted")
	}
}
