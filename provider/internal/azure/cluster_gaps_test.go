package azure

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"

	"github.com/kubewin/kubewin/internal/testkit/armtest"
)

// A cluster in existing subnets without an outbound path is refused before anything is made: the
// agents' subnet always, the masters' behind an internal API server (a public one's load balancer
// has outbound rules for the masters).
func TestClusterRefusesSubnetWithoutOutbound(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := secretClient(ctx, t)
	const group = "cluster-no-outbound"
	vnet, err := server.AddVirtualNetwork(armtest.VirtualNetwork{ResourceGroup: group, Name: "byo", AddressPrefixes: []string{"10.60.0.0/16"},
		Subnets: map[string]string{"masters": "10.60.255.0/24", "agents": "10.60.0.0/20"}})
	if err != nil {
		t.Fatal(err)
	}
	mastersID, agentsID := vnet+"/subnets/masters", vnet+"/subnets/agents"
	newCluster := func(public bool) *Cluster {
		spec := testClusterSpec(t, group, "nob")
		spec.Network = ClusterNetwork{ControlPlaneSubnetID: mastersID, AgentSubnetID: agentsID, PublicAPIServer: public}
		c := &Cluster{Client: client, Spec: spec}
		t.Cleanup(func() { _ = c.Delete(context.Background()) })
		return c
	}
	// refused checks that Create fails on the subnet without touching the group.
	refused := func(c *Cluster, subnet string) {
		t.Helper()
		before := server.ResourceIDs(group)
		_, err := c.Create(ctx)
		if !errors.Is(err, ErrNoOutbound) || !strings.Contains(err.Error(), "subnet "+subnet+" has") ||
			!strings.Contains(err.Error(), "let kubewin make the cluster's network") {
			t.Fatalf("Create = %v, want ErrNoOutbound naming %s", err, subnet)
		}
		if after := server.ResourceIDs(group); !slices.Equal(after, before) {
			t.Fatalf("after the refused create the group holds %v, before %v", after, before)
		}
	}

	refused(newCluster(false), agentsID)

	// A NAT gateway on the agents' subnet: the masters' still has no outbound path.
	nat := testNATGateway(ctx, t, client, group)
	subnetPoller, err := client.network.NewSubnetsClient().BeginCreateOrUpdate(ctx, group, "byo", "agents", armnetwork.Subnet{
		Properties: &armnetwork.SubnetPropertiesFormat{AddressPrefix: to.Ptr("10.60.0.0/20"), NatGateway: &armnetwork.SubResource{ID: nat}},
	}, nil)
	if _, err := wait(ctx, client, subnetPoller, err); err != nil {
		t.Fatal(err)
	}

	refused(newCluster(false), mastersID)
	// With a public API server the masters' subnet is not checked.
	if err := newCluster(true).checkOutbound(ctx); err != nil {
		t.Errorf("public API server, NAT gateway on the agents' subnet: checkOutbound = %v", err)
	}
}

// A 400 NicReservedForAnotherVm is retried: Azure reserves a NIC for 180 s after its VM is
// deleted and refuses to attach it to another VM or delete it meanwhile ("retry after 180
// seconds", quoted in microsoft/AzureTRE#4474). Here the server answers it once to a control
// plane's VM create and once to a NIC delete; both go through.
func TestRetriesNicReservedForAnotherVm(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const group = "cluster-nic-reserved"
	server.AddResourceGroup(group)
	before := server.ResourceIDs(group)
	client := secretClient(ctx, t)
	c := &Cluster{Client: client, Spec: testClusterSpec(t, group, "nicres")}
	t.Cleanup(func() { _ = c.Delete(context.Background()) })
	subnet := netip.MustParsePrefix(c.Spec.Network.ControlPlaneSubnetCIDR)
	if err := c.ensureAll(ctx, c.network(ctx, subnet)); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		addr, err := controlPlaneAddress(subnet, i)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.ensure(ctx, c.controlPlaneNIC(i, addr)); err != nil {
			t.Fatal(err)
		}
	}
	reserved := func(method, path string) *armtest.Fault {
		return server.FailRequests(armtest.Match{Method: method, Path: path, Times: 1}, http.StatusBadRequest, "NicReservedForAnotherVm",
			"Nic(s) in request is reserved for another Virtual Machine for 180 seconds. Please provide another nic(s) or retry after 180 seconds. "+
				"Reserved VM: "+c.id(typeVirtualMachine, "old").String())
	}

	put := reserved(http.MethodPut, `/virtualMachines/`+c.masterName(0)+`$`)
	defer put.Remove()
	// The machine does not boot (its user data is no bootstrap): only its resources matter here.
	if err := c.ensure(ctx, c.controlPlaneVM(0, []byte("#cloud-config\n"))); err != nil {
		t.Fatalf("create the VM: %v", err)
	}
	if put.Hits() != 1 {
		t.Fatalf("the fault on the VM create hit %d times, want 1", put.Hits())
	}
	vm, err := client.compute.NewVirtualMachinesClient().Get(ctx, group, c.masterName(0), nil)
	if err != nil || deref(vm.Properties.ProvisioningState) != "Succeeded" {
		t.Fatalf("the VM after the retried create: %v, %+v", err, vm.Properties)
	}

	// Control plane 1's NIC has no VM: Delete removes it with its own DELETE.
	del := reserved(http.MethodDelete, `/networkInterfaces/`+c.nicName(1)+`$`)
	defer del.Remove()
	if err := c.Delete(ctx); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if del.Hits() != 1 {
		t.Fatalf("the fault on the NIC delete hit %d times, want 1", del.Hits())
	}
	if after := server.ResourceIDs(group); !slices.Equal(after, before) {
		t.Errorf("after delete the group holds %v, before %v", after, before)
	}
}
