package azure

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// The number of control planes is a tag of the load balancer, changed with UpdateTags: a PUT of
// the load balancer as GET returns it is refused once a control plane's NIC is in its pool.
func TestControlPlaneCountTag(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	group := "lb-tags"
	server.AddResourceGroup(group)
	client := secretClient(ctx, t)
	c := &Cluster{Client: client, Spec: testClusterSpec(t, group, "tags")}
	c.Spec.Tags = map[string]string{"env": "test"}
	t.Cleanup(func() { _ = c.Delete(context.Background()) })
	subnet := netip.MustParsePrefix(c.Spec.Network.ControlPlaneSubnetCIDR)
	if err := c.ensureAll(ctx, c.network(ctx, subnet)); err != nil {
		t.Fatal(err)
	}
	addr, err := controlPlaneAddress(subnet, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ensure(ctx, c.controlPlaneNIC(0, addr)); err != nil {
		t.Fatal(err)
	}
	if err := c.setControlPlaneCount(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if _, n, err := c.Endpoint(ctx); err != nil || n != 3 {
		t.Fatalf("control planes on the load balancer: %d, %v; want 3", n, err)
	}
	lb, err := client.network.NewLoadBalancersClient().Get(ctx, group, c.lbName(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if env := lb.Tags["env"]; env == nil || *env != "test" || c.ours(c.ID(), lb.Tags) != nil {
		t.Errorf("the other tags were not kept: %v", lb.Tags)
	}
	members := lb.Properties.BackendAddressPools[0].Properties.BackendIPConfigurations
	if len(members) != 1 || !strings.HasSuffix(*members[0].ID, "/networkInterfaces/"+c.nicName(0)+"/ipConfigurations/ipconfig") {
		t.Errorf("backend pool members %v, want the NIC's IP configuration", members)
	}
}
