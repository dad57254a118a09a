package azure

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"k8s.io/client-go/kubernetes"

	"github.com/kubewin/kubewin/provider/internal/azureccm"
	"github.com/kubewin/kubewin/provider/internal/azurecsi"
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
		LoadBalancerSku: "standard", LoadBalancerName: c.serviceLoadBalancerName(),
		UseInstanceMetadata: true, CloudProviderBackoff: true,
	}
	if c.Spec.Network.PublicAPIServer {
		cfg.DisableOutboundSNAT = to.Ptr(true)
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

// agentNSG is the security group of the agents' subnet, where the cloud provider writes
// LoadBalancer Services' rules: kubewin's own, or the one an existing subnet is associated with.
func (c *Cluster) agentNSG(ctx context.Context) (string, error) {
	if c.VNetID() != "" {
		return c.id(typeSecurityGroup, c.nsgName("agents")).String(), nil
	}
	id := c.Spec.Network.AgentSubnetID
	r, err := arm.ParseResourceID(id)
	if err != nil || r.Parent == nil {
		return "", fmt.Errorf("%q is not a subnet's resource ID", id)
	}
	sn, err := c.Client.network.NewSubnetsClient().Get(ctx, r.ResourceGroupName, r.Parent.Name, r.Name, nil)
	if err != nil {
		return "", fmt.Errorf("read subnet %s: %w", id, err)
	}
	if sn.Properties == nil || sn.Properties.NetworkSecurityGroup == nil || deref(sn.Properties.NetworkSecurityGroup.ID) == "" {
		return "", fmt.Errorf("subnet %s has no network security group, where the Azure cloud provider writes the rules of LoadBalancer "+
			"Services: associate one with it (azurerm_subnet_network_security_group_association), or set azure.cloud_provider = "+
			"{ enabled = false }", id)
	}
	return *sn.Properties.NetworkSecurityGroup.ID, nil
}

// CloudProviderState is what the cluster's cloud provider runs as and with.
type CloudProviderState struct {
	Identity IdentityIDs
	Images   map[string]string
}

// cloudProviderConfig is the cluster's azureccm configuration; windowsServer is the API server's
// URL as the Windows nodes reach it (the load balancer frontend's address).
func (c *Cluster) cloudProviderConfig(windowsServer string, caCert []byte) (azureccm.Config, error) {
	v, err := c.cloudProviderVersions()
	if err != nil {
		return azureccm.Config{}, err
	}
	return azureccm.Config{
		Versions: v, ClusterName: c.Spec.Name, ClusterCIDR: c.Spec.PodCIDR, CloudRoutes: c.Spec.CloudProvider.Routes,
		WindowsServer: windowsServer, CACert: caCert,
	}, nil
}

// cloudProviderVersions are the components' versions: the spec's release for both.
func (c *Cluster) cloudProviderVersions() (azureccm.Versions, error) {
	v := c.Spec.CloudProvider.Version
	if v == "" {
		return azureccm.Versions{}, fmt.Errorf("cluster %s has no Azure cloud provider version", c.Spec.Name)
	}
	return azureccm.Versions{CloudControllerManager: v, CloudNodeManager: v}, nil
}

// ApplyCloudProvider applies the cloud provider's objects to the cluster, and the CSI drivers'
// that are on, and removes those of the drivers that are off (server-side: again after a change
// of version, routes or drivers, and over drift); without the cloud provider, nothing.
func (c *Cluster) ApplyCloudProvider(ctx context.Context, client kubernetes.Interface, state *ClusterState) error {
	if c.Spec.CloudProvider == nil {
		return nil
	}
	server := "https://" + state.Endpoint
	cfg, err := c.cloudProviderConfig(server, state.CACert)
	if err != nil {
		return err
	}
	objs, err := azureccm.Objects(cfg)
	if err != nil {
		return err
	}
	if err := azureccm.Apply(ctx, client, objs); err != nil {
		return err
	}
	if c.Spec.Storage == nil {
		return nil
	}
	return azurecsi.Reconcile(ctx, client, c.storageConfig(server, state.CACert))
}

// storageConfig is the cluster's azurecsi configuration; windowsServer is the API server's URL
// as the Windows nodes reach it.
func (c *Cluster) storageConfig(windowsServer string, caCert []byte) azurecsi.Config {
	s := c.Spec.Storage
	return azurecsi.Config{Versions: s.Versions, AzureDisk: s.AzureDisk, AzureFile: s.AzureFile,
		ControlPlanes: c.Spec.ControlPlanes.Count, WindowsServer: windowsServer, CACert: caCert}
}

// CloudProvider reads what the cluster's cloud provider runs as and with; nil without it, or
// before its identity exists.
func (c *Cluster) CloudProvider(ctx context.Context) (*CloudProviderState, error) {
	if c.Spec.CloudProvider == nil {
		return nil, nil
	}
	ids, err := c.readIdentity(ctx)
	if notFound(err) {
		return nil, nil // a creation that failed before it made the identity
	}
	if err != nil {
		return nil, err
	}
	v, err := c.cloudProviderVersions()
	if err != nil {
		return nil, err
	}
	return &CloudProviderState{Identity: ids, Images: azureccm.Images(v)}, nil
}
