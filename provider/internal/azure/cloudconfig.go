package azure

import (
	"encoding/json"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
)

// CloudProviderSpec turns on the out-of-tree Azure cloud provider (cloud-controller-manager and
// cloud-node-manager) for a cluster.
type CloudProviderSpec struct {
	// Cloud is the cloud's name as the cloud provider reads it: AzurePublicCloud,
	// AzureUSGovernmentCloud or AzureChinaCloud
	// (https://kubernetes-sigs.github.io/cloud-provider-azure/install/configs/, "cloud").
	Cloud string
	// TenantID is the Microsoft Entra tenant of the subscription.
	TenantID string
}

// CloudConfigPath is where the control planes keep the cloud provider's configuration, as
// cloud-provider-azure's deployment documents it (--cloud-config=/etc/kubernetes/azure.json).
const CloudConfigPath = "/etc/kubernetes/azure.json"

// CloudConfig is the cloud provider's configuration file in the format cloud-provider-azure
// documents (https://kubernetes-sigs.github.io/cloud-provider-azure/install/configs/): only the
// settings kubewin writes. It authenticates with the cluster's user-assigned managed identity
// (useManagedIdentityExtension with the identity's client ID): no client secret is written.
type CloudConfig struct {
	Cloud                       string `json:"cloud"`
	TenantID                    string `json:"tenantId"`
	SubscriptionID              string `json:"subscriptionId"`
	UseManagedIdentityExtension bool   `json:"useManagedIdentityExtension"`
	UserAssignedIdentityID      string `json:"userAssignedIdentityID"`
	ResourceGroup               string `json:"resourceGroup"`
	Location                    string `json:"location"`
	// VMType vmss: the agents and Windows pools are scale sets; nodes that are not (the
	// control planes) are read as standalone VMs ("vmType" in the configuration page).
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
	CloudProviderBackoff       bool   `json:"cloudProviderBackoff"`
}

// cloudConfig is the cloud provider's configuration of the cluster, authenticating as the
// managed identity with client ID identityClientID. The load balancer of LoadBalancer Services
// is the Standard load balancer named after the cluster (the cloud provider makes it), not the
// API server's; Services' rules go to agentNSG, the security group of the agents' subnet
// (kubewin's own, or the one an existing subnet has), and node routes to the cluster's route
// table.
func (c *Cluster) cloudConfig(identityClientID, agentNSG string) (CloudConfig, error) {
	p := c.Spec.CloudProvider
	if p == nil {
		return CloudConfig{}, fmt.Errorf("cluster %s has no cloud provider", c.Spec.Name)
	}
	subnet, err := arm.ParseResourceID(c.AgentSubnetID())
	if err != nil || subnet.Parent == nil {
		return CloudConfig{}, fmt.Errorf("agent subnet %q is not a subnet's resource ID: %v", c.AgentSubnetID(), err)
	}
	nsg, err := arm.ParseResourceID(agentNSG)
	if err != nil {
		return CloudConfig{}, fmt.Errorf("the agents' security group %q is not a resource ID: %w", agentNSG, err)
	}
	cfg := CloudConfig{
		Cloud: p.Cloud, TenantID: p.TenantID, SubscriptionID: c.Client.SubscriptionID,
		UseManagedIdentityExtension: true, UserAssignedIdentityID: identityClientID,
		ResourceGroup: c.Spec.ResourceGroup, Location: c.Spec.Location, VMType: "vmss",
		VnetName: subnet.Parent.Name, VnetResourceGroup: subnet.ResourceGroupName, SubnetName: subnet.Name,
		SecurityGroupName: nsg.Name, SecurityGroupResourceGroup: nsg.ResourceGroupName,
		RouteTableName: c.routeTableName(), RouteTableResourceGroup: c.Spec.ResourceGroup,
		LoadBalancerSku: "standard", LoadBalancerName: c.Spec.Name,
		UseInstanceMetadata: true, CloudProviderBackoff: true,
	}
	return cfg, nil
}

// cloudConfigFile is the file cloud-provider-azure reads: the configuration as indented JSON.
func (c *Cluster) cloudConfigFile(identityClientID, agentNSG string) ([]byte, error) {
	cfg, err := c.cloudConfig(identityClientID, agentNSG)
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
