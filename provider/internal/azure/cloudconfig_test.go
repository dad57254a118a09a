package azure

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"
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
	DisableOutboundSNAT        *bool  `json:"disableOutboundSNAT"`
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
// identity (no secret) in the identity's tenant, and azclient makes a managed identity credential
// of them. LoadBalancer Services go to kubewin's load balancer when it is public (the agents'
// network interfaces may be in one public load balancer only), without outbound SNAT (its
// outbound rules give the agents theirs); with an internal API server, to the public load
// balancer named after the cluster.
func TestCloudConfig(t *testing.T) {
	const sub = "/subscriptions/00000000-0000-0000-0000-000000000000"
	id := IdentityIDs{ClientID: "11111111-2222-3333-4444-555555555555", PrincipalID: "p", TenantID: "99999999-0000-0000-0000-000000000000"}
	for _, tc := range []struct {
		dir     string
		public  bool
		nsg, lb string
		noSNAT  bool
	}{
		{"cluster-public", true, sub + "/resourceGroups/rg/providers/Microsoft.Network/networkSecurityGroups/acs-agents-nsg", "acs-apiserver", true},
		{"cluster-internal", false, sub + "/resourceGroups/net/providers/Microsoft.Network/networkSecurityGroups/a-nsg", "acs", false},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			c := bodyCluster(tc.public)
			c.Spec.CloudProvider = &CloudProviderSpec{Version: "v1.37.5"}
			file, err := c.cloudConfigFile(id, tc.nsg)
			if err != nil {
				t.Fatal(err)
			}
			assertBody(t, tc.dir+"/azure.json", json.RawMessage(file))
			u := decodeUpstream(t, file)
			if !u.UseManagedIdentityExtension || u.UserAssignedIdentityID != id.ClientID || u.AADClientID != "" || u.AADClientSecret != "" ||
				u.AADClientCertPath != "" {
				t.Errorf("authentication: want the user-assigned identity %s and no secret, got %+v", id.ClientID, u.AzureAuthConfig)
			}
			if u.SubscriptionID != c.Client.SubscriptionID || u.TenantID != id.TenantID || u.Cloud != "AzurePublicCloud" || u.ResourceManagerEndpoint != "" {
				t.Errorf("subscription %q, tenant %q, cloud %q, resource manager %q", u.SubscriptionID, u.TenantID, u.Cloud, u.ResourceManagerEndpoint)
			}
			if u.LoadBalancerName != tc.lb || (u.DisableOutboundSNAT != nil && *u.DisableOutboundSNAT) != tc.noSNAT {
				t.Errorf("load balancer %q, disableOutboundSNAT %v; want %q, %v", u.LoadBalancerName, u.DisableOutboundSNAT, tc.lb, tc.noSNAT)
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

// The cloud provider's cloud is the provider's: a well-known environment by the name azclient
// maps, a custom cloud (metadata_host) by its metadata document's name with the resource manager
// endpoint the cloud provider reads that document from.
func TestCloudConfigClouds(t *testing.T) {
	for _, tc := range []struct {
		cfg       Config
		name, arm string
	}{
		{Config{}, "AzurePublicCloud", ""},
		{Config{Environment: "usgovernment"}, "AzureUSGovernment", ""},
		{Config{Environment: "china"}, "AzureChinaCloud", ""},
		{Config{MetadataHost: server.MetadataHost()}, "ArmTest", "https://" + server.MetadataHost()},
	} {
		_, pc, err := tc.cfg.resolveCloud(context.Background(), server.HTTPClient())
		if err != nil {
			t.Fatal(err)
		}
		c := bodyCluster(true)
		c.Client.providerCloud = pc
		file, err := c.cloudConfigFile(IdentityIDs{ClientID: "c", PrincipalID: "p", TenantID: "t"}, c.id(typeSecurityGroup, c.nsgName("agents")).String())
		if err != nil {
			t.Fatal(err)
		}
		u := decodeUpstream(t, file)
		if u.Cloud != tc.name || u.ResourceManagerEndpoint != tc.arm {
			t.Errorf("%+v: cloud %q, resourceManagerEndpoint %q; want %q, %q", tc.cfg, u.Cloud, u.ResourceManagerEndpoint, tc.name, tc.arm)
		}
		if _, ok := azclient.EnvironmentMapping[strings.ToUpper(u.Cloud)]; !ok && tc.arm == "" {
			t.Errorf("azclient does not know the cloud %q", u.Cloud)
		}
		if tc.arm == "" {
			continue
		}
		// azclient reads the custom cloud's endpoints from its resource manager, by its name.
		cl, _, err := azclient.GetAzureCloudConfigAndEnvConfig(&u.ARMClientConfig)
		if err != nil {
			t.Fatal(err)
		}
		if got := cl.Services[cloud.ResourceManager].Endpoint; got != server.URL()+"/" {
			t.Errorf("azclient's resource manager for the custom cloud: %q, want the server's %s/", got, server.URL())
		}
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

// In existing subnets the cloud provider writes Services' rules into the agents' subnet's
// security group, read from ARM; a subnet without one is refused, naming the fix.
func TestAgentNSGOfExistingSubnet(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	group := "ccm-existing-subnet"
	server.AddResourceGroup(group)
	client := secretClient(ctx, t)
	nsgs, vnets := client.network.NewSecurityGroupsClient(), client.network.NewVirtualNetworksClient()
	p, err := nsgs.BeginCreateOrUpdate(ctx, group, "agents-nsg", armnetwork.SecurityGroup{Location: to.Ptr(server.Location())}, nil)
	if err != nil {
		t.Fatal(err)
	}
	nsg, err := p.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	putVNet := func(subnet armnetwork.SubnetPropertiesFormat) {
		t.Helper()
		subnet.AddressPrefix = to.Ptr("10.1.0.0/24")
		p, err := vnets.BeginCreateOrUpdate(ctx, group, "v", armnetwork.VirtualNetwork{Location: to.Ptr(server.Location()),
			Properties: &armnetwork.VirtualNetworkPropertiesFormat{
				AddressSpace: &armnetwork.AddressSpace{AddressPrefixes: []*string{to.Ptr("10.1.0.0/16")}},
				Subnets:      []*armnetwork.Subnet{{Name: to.Ptr("a"), Properties: &subnet}},
			}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: 10 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
	}
	subnet := server.ResourceGroupID(group) + "/providers/Microsoft.Network/virtualNetworks/v/subnets/a"
	c := &Cluster{Client: client, Spec: ClusterSpec{Name: "acs", ResourceGroup: group, Network: ClusterNetwork{
		ControlPlaneSubnetID: subnet, AgentSubnetID: subnet}}}
	putVNet(armnetwork.SubnetPropertiesFormat{})
	if _, err := c.agentNSG(ctx); err == nil || !strings.Contains(err.Error(), "no network security group") ||
		!strings.Contains(err.Error(), "cloud_provider = { enabled = false }") {
		t.Fatalf("a subnet without a security group: %v", err)
	}
	putVNet(armnetwork.SubnetPropertiesFormat{NetworkSecurityGroup: &armnetwork.SecurityGroup{ID: nsg.ID}})
	if got, err := c.agentNSG(ctx); err != nil || !strings.EqualFold(got, *nsg.ID) {
		t.Fatalf("the subnet's security group: %q, %v; want %s", got, err, *nsg.ID)
	}
}
