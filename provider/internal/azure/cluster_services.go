package azure

import (
	"context"
	"fmt"
	"slices"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"
	"github.com/hashicorp/terraform-plugin-log/tflog"
)

// What the cloud provider makes for LoadBalancer Services is not the cluster's: kubewin did not
// create it and it carries none of kubewin's tags. Destroy removes it anyway, as the cluster's
// own LoadBalancer Services would have: an internal load balancer holds addresses of the
// cluster's subnet, which cannot be deleted while it does, and a public IP left behind costs
// money.

// Tags cloud-provider-azure puts on the public IPs it makes, naming the cluster (its
// --cluster-name): k8s-azure-cluster-name, and kubernetes-cluster-name in older releases
// (pkg/consts ClusterNameKey, LegacyClusterNameKey).
var serviceClusterTags = []string{"k8s-azure-cluster-name", "kubernetes-cluster-name"}

// serviceLoadBalancerName is the load balancer of public LoadBalancer Services, the cloud
// configuration's loadBalancerName: with a public API server kubewin's own (an agent's network
// interface can be in one public load balancer only), else one the cloud provider makes.
func (c *Cluster) serviceLoadBalancerName() string {
	if c.Spec.Network.PublicAPIServer {
		return c.lbName()
	}
	return c.Spec.Name
}

// serviceLoadBalancers are the load balancers the cloud provider makes for the cluster's
// Services: its loadBalancerName when that is not kubewin's, and for internal Services that
// name with "-internal" (pkg/provider/azure_loadbalancer.go getAzureLoadBalancerName, with one
// Standard load balancer per cluster; pkg/consts InternalLoadBalancerNameSuffix).
func (c *Cluster) serviceLoadBalancers() []object {
	name := c.serviceLoadBalancerName()
	out := []object{newSpec(c, loadBalancers, name+"-internal", nil)}
	if name != c.lbName() {
		out = append(out, newSpec(c, loadBalancers, name, nil))
	}
	return out
}

// removeServiceLoadBalancers deletes the cloud provider's load balancers of the cluster: those
// of its names with the backend pool it gives every load balancer it makes, named after the
// cluster (pkg/provider/azure_standard.go getBackendPoolName). One without is someone else's,
// and stays.
func (c *Cluster) removeServiceLoadBalancers(ctx context.Context) error {
	lbs := c.Client.network.NewLoadBalancersClient()
	for _, o := range c.serviceLoadBalancers() {
		id := o.ID().String()
		lb, err := lbs.Get(ctx, o.ID().group, o.ID().name, nil)
		if notFound(err) {
			continue
		} else if err != nil {
			return fmt.Errorf("read %s: %w", id, err)
		}
		if lb.Properties == nil || !slices.ContainsFunc(lb.Properties.BackendAddressPools, func(p *armnetwork.BackendAddressPool) bool {
			return p != nil && deref(p.Name) == c.Spec.Name
		}) {
			tflog.Warn(ctx, "not deleting a load balancer the cloud provider did not make", map[string]any{"resource": id})
			continue
		}
		tflog.Info(ctx, "deleting the cloud provider's load balancer", map[string]any{"resource": id})
		if err := o.del(ctx, c.Client); err != nil && !notFound(err) {
			return fmt.Errorf("delete %s, which the cloud provider made for LoadBalancer Services: %w", id, err)
		}
	}
	return nil
}

// removeServicePublicIPs deletes the public IPs of the cluster's resource group that the cloud
// provider made for the cluster's Services, once the load balancers whose frontends used them
// are gone (a public IP in use cannot be deleted).
func (c *Cluster) removeServicePublicIPs(ctx context.Context) error {
	pager := c.Client.network.NewPublicIPAddressesClient().NewListPager(c.Spec.ResourceGroup, nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("list the public IPs of resource group %s: %w", c.Spec.ResourceGroup, err)
		}
		for _, p := range page.Value {
			if p == nil || p.Name == nil || !c.serviceTagged(p.Tags) {
				continue
			}
			o := newSpec(c, publicIPs, *p.Name, nil)
			tflog.Info(ctx, "deleting the cloud provider's public IP", map[string]any{"resource": o.ID().String()})
			if err := o.del(ctx, c.Client); err != nil && !notFound(err) {
				return fmt.Errorf("delete %s, which the cloud provider made for a LoadBalancer Service: %w", o.ID(), err)
			}
		}
	}
	return nil
}

// serviceTagged reports whether tags are the cloud provider's for this cluster.
func (c *Cluster) serviceTagged(tags map[string]*string) bool {
	for _, k := range serviceClusterTags {
		if v := tags[k]; v != nil && *v == c.Spec.Name {
			return true
		}
	}
	return false
}
