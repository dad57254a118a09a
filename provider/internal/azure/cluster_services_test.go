package azure

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"
)

// Destroying a cluster with the cloud provider removes what the cloud provider made for its
// LoadBalancer Services, as it makes them (cloud-provider-azure: a public IP tagged with the
// cluster's name and a frontend on the loadBalancerName load balancer for a public Service,
// <loadBalancerName>-internal with an address in the agents' subnet for an internal one), and
// nothing of another cluster. Left there, the internal load balancer would hold an address of
// the subnet, whose virtual network then cannot be deleted.
func TestDeleteRemovesServiceLoadBalancers(t *testing.T) {
	for _, public := range []bool{true, false} {
		name := map[bool]string{true: "svcpub", false: "svcint"}[public]
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			group := "services-" + name
			server.AddResourceGroup(group)
			client := secretClient(ctx, t)
			c := &Cluster{Client: client, Spec: testClusterSpec(t, group, name)}
			c.Spec.Network.PublicAPIServer = public
			c.Spec.CloudProvider = &CloudProviderSpec{}
			if err := c.ensureAll(ctx, c.network(ctx, netip.MustParsePrefix(c.Spec.Network.ControlPlaneSubnetCIDR))); err != nil {
				t.Fatal(err)
			}
			before := server.ResourceIDs(group)
			pips, lbs := client.network.NewPublicIPAddressesClient(), client.network.NewLoadBalancersClient()
			pip := func(pipName, cluster string) *armnetwork.PublicIPAddress {
				p, err := pips.BeginCreateOrUpdate(ctx, group, pipName, armnetwork.PublicIPAddress{
					Location: to.Ptr(c.Spec.Location), SKU: &armnetwork.PublicIPAddressSKU{Name: to.Ptr(armnetwork.PublicIPAddressSKUNameStandard)},
					Properties: &armnetwork.PublicIPAddressPropertiesFormat{PublicIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic)},
					Tags:       map[string]*string{"k8s-azure-cluster-name": to.Ptr(cluster), "k8s-azure-service": to.Ptr("default/web")},
				}, nil)
				if err != nil {
					t.Fatal(err)
				}
				r, err := p.PollUntilDone(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				return &r.PublicIPAddress
			}
			putLB := func(lb armnetwork.LoadBalancer) {
				p, err := lbs.BeginCreateOrUpdate(ctx, group, *lb.Name, lb, nil)
				if err == nil {
					_, err = p.PollUntilDone(ctx, nil)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			web := pip("kubernetes-a0b1c2", name)
			other := pip("kubernetes-d3e4f5", "another-cluster")
			// Every load balancer the cloud provider makes has a backend pool named after the cluster.
			pools := []*armnetwork.BackendAddressPool{{Name: to.Ptr(name)}}
			frontend := &armnetwork.FrontendIPConfiguration{Name: to.Ptr("a0b1c2"),
				Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{PublicIPAddress: &armnetwork.PublicIPAddress{ID: web.ID}}}
			if public {
				// The public Service's frontend is on kubewin's load balancer.
				lb, err := lbs.Get(ctx, group, c.lbName(), nil)
				if err != nil {
					t.Fatal(err)
				}
				lb.Properties.FrontendIPConfigurations = append(lb.Properties.FrontendIPConfigurations, frontend)
				putLB(lb.LoadBalancer)
			} else {
				putLB(armnetwork.LoadBalancer{Name: to.Ptr(name), Location: to.Ptr(c.Spec.Location),
					SKU: &armnetwork.LoadBalancerSKU{Name: to.Ptr(armnetwork.LoadBalancerSKUNameStandard)},
					Properties: &armnetwork.LoadBalancerPropertiesFormat{FrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{frontend},
						BackendAddressPools: pools}})
			}
			putLB(armnetwork.LoadBalancer{Name: to.Ptr(c.serviceLoadBalancerName() + "-internal"), Location: to.Ptr(c.Spec.Location),
				SKU: &armnetwork.LoadBalancerSKU{Name: to.Ptr(armnetwork.LoadBalancerSKUNameStandard)},
				Properties: &armnetwork.LoadBalancerPropertiesFormat{FrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{{
					Name: to.Ptr("d6e7f8"), Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{
						Subnet: &armnetwork.Subnet{ID: to.Ptr(c.AgentSubnetID())}, PrivateIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodDynamic),
					},
				}}, BackendAddressPools: pools}})
			if got := server.ResourceIDs(group); len(got) != len(before)+map[bool]int{true: 3, false: 4}[public] {
				t.Fatalf("the cloud provider's resources were not all made: %v", got)
			}

			if err := c.Delete(ctx); err != nil {
				t.Fatal(err)
			}
			if got := server.ResourceIDs(group); !slices.Equal(got, []string{*other.ID}) {
				t.Errorf("destroy left %v, want only the other cluster's public IP", got)
			}
		})
	}
}
