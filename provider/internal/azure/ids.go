package azure

import "fmt"

// Resource types of what kubewin makes, as they appear in resource IDs.
const (
	typeSecurityGroup  = "Microsoft.Network/networkSecurityGroups"
	typeRouteTable     = "Microsoft.Network/routeTables"
	typeVirtualNetwork = "Microsoft.Network/virtualNetworks"
	typePublicIP       = "Microsoft.Network/publicIPAddresses"
	typeNatGateway     = "Microsoft.Network/natGateways"
	typeLoadBalancer   = "Microsoft.Network/loadBalancers"
	typeInterface      = "Microsoft.Network/networkInterfaces"
	typeVirtualMachine = "Microsoft.Compute/virtualMachines"
	typeScaleSet       = "Microsoft.Compute/virtualMachineScaleSets"
)

// resourceID is a resource of a resource group: the one place the package formats resource IDs
// (arm.ParseResourceID parses them).
type resourceID struct {
	subscription, group, typ, name string
}

func (r resourceID) String() string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/%s/%s", r.subscription, r.group, r.typ, r.name)
}

// child is the ID of a child resource: a virtual network's subnet, a load balancer's pool.
func (r resourceID) child(typ, name string) string { return r.String() + "/" + typ + "/" + name }

// id is the ID of a resource of the cluster's resource group.
func (c *Cluster) id(typ, name string) resourceID {
	return resourceID{subscription: c.Client.SubscriptionID, group: c.Spec.ResourceGroup, typ: typ, name: name}
}
