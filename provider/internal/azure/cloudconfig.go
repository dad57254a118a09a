package azure

import (
	"encoding/json"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
)

// CloudProviderSpec turns on the out-of-tree Azure cloud provider (cloud-controller-manager and
// cloud-node-manager) for a cluster. The cloud and the tenant are not settings: the cloud is the
// client's (ProviderCloud), the tenant the cloud provider's identity's.
type CloudProviderSpec struct {
	// Routes turns on cloud-controller-manager's route controller, which keeps every node's pod
	// route in the cluster's route table; off, kubewin writes the Linux agents' routes.
	Routes bool
	// Version is cloud-provider-azure's release the cluster runs, "v1.37.5".
	Version string
}

// CloudConfigPath is where the control planes keep the cloud provider's configuration, as
// cloud-provider-azure's deployment documents it (--cloud-config=/etc/kubernetes/azure.json).
const CloudConfigPath = "/etc/kubernetes/azure.json"

// CloudConfig is the cloud provider's configuration file in the format cloud-provider-azure
// documents (https://kubernetes-sigs.github.io/cloud-provider-azure/install/configs/): only the
// settings kubewin writes. It authenticates with the cluster's user-assigned managed identity
// (useManagedIdentityExtension with the identity's client ID): no client secret is written.
type CloudConfig struct {
	Cloud string `json:"cloud"`
	// ResourceManagerEndpoint is set for a custom cloud only: the cloud provider reads the
	// cloud's endpoints from its metadata document there.
	ResourceManagerEndpoint     string `json:"resourceManagerEndpoint,omitempty"`
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
	// DisableOutboundSNAT keeps the load balancing rules of LoadBalancer Services from giving the
	// nodes outbound connections: set when the rules go to kubewin's public load balancer, whose
	// outbound rules give them (and the cloud provider its own outbound rules: "disableOutboundSNAT"
	// in the configuration page).
	DisableOutboundSNAT  *bool `json:"disableOutboundSNAT,omitempty"`
	UseInstanceMetadata  bool  `json:"useInstanceMetadata"`
	CloudProviderBackoff bool  `json:"cloudProviderBackoff"`
}

// cloudConfig is the cloud provider's configuration of the cluster, authenticating as its
// managed identity (client ID, and tenant: the Client's configuration may name none, with Azure
// CLI credentials). Services' rules go to agentNSG, the security group of the agents' subnet
// (kubewin's own, or the one an existing subnet has), and node routes to the cluster's route
// table.
//
// The load balancer of LoadBalancer Services: a network interface's IP configuration may be in
// the backend pools of only one public and one internal load balancer
// (NetworkInterfaceUsesMultipleLoadBalancersOfSameType; kubernetes/kubernetes#36880), and the
// agents are in the pool "agents" of kubewin's load balancer <name>-apiserver. With a public API
// server that load balancer is public, so the cloud provider adds its frontends, rules and pool to
// it (loadBalancerName; as acs-engine's clusters shared one load balancer), without outbound SNAT.
// With an internal one, the cloud provider makes the public load balancer <name>; internal
// Services' load balancer is then <name>-internal, which the agents cannot join (the cloud
// provider names internal load balancers <loadBalancerName>-internal: azure_loadbalancer.go
// getAzureLoadBalancerName).
func (c *Cluster) cloudConfig(identity IdentityIDs, agentNSG string) (CloudConfig, error) {
	if c.Spec.CloudProvider == nil {
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
		Cloud: c.Client.providerCloud.Name, ResourceManagerEndpoint: c.Client.providerCloud.ResourceManagerEndpoint,
		TenantID: identity.TenantID, SubscriptionID: c.Client.SubscriptionID,
		UseManagedIdentityExtension: true, UserAssignedIdentityID: identity.ClientID,
		ResourceGroup: c.Spec.ResourceGroup, Location: c.Spec.Location, VMType: "vmss",
		VnetName: subnet.Parent.Name, VnetResourceGroup: subnet.ResourceGroupName, SubnetName: subnet.Name,
		SecurityGroupName: nsg.Name, SecurityGroupResourceGroup: nsg.ResourceGroupName,
		RouteTableName: c.routeTableName(), RouteTableResourceGroup: c.Spec.ResourceGroup,
		LoadBalancerSku: "standard", LoadBalancerName: c.Spec.Name,
		UseInstanceMetadata: true, CloudProviderBackoff: true,
	}
	if c.Spec.Network.PublicAPIServer {
		cfg.LoadBalancerName, cfg.DisableOutboundSNAT = c.lbName(), to.Ptr(true)
	}
	return cfg, nil
}

// cloudConfigFile is the file cloud-provider-azure reads: the configuration as indented JSON.
func (c *Cluster) cloudConfigFile(identity IdentityIDs, agentNSG string) ([]byte, error) {
	cfg, err := c.cloudConfig(identity, agentNSG)
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
