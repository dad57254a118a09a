package azure

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"
)

// A control plane's NIC goes with its VM: a NIC left behind stays reserved for the deleted VM
// (NicReservedForAnotherVm) and the cluster's delete could not remove it.
func TestClusterDeleteRemovesNICs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	group := "cluster-delete"
	server.AddResourceGroup(group)
	before := server.ResourceIDs(group)
	client := secretClient(ctx, t)
	c := &Cluster{Client: client, Spec: testClusterSpec(t, group, "del")}
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
	// The machine does not boot (its user data is no bootstrap): only its resources matter here.
	if err := c.ensure(ctx, c.controlPlaneVM(0, []byte("#cloud-config\n"))); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if after := server.ResourceIDs(group); !slices.Equal(after, before) {
		t.Errorf("after delete the group holds %v, before %v", after, before)
	}
}
