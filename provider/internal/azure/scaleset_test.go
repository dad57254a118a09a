package azure

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kubewin/kubewin/internal/testkit/armtest"
)

// testScaleSet is a Windows pool's scale set in a resource group of its own, with a client of the
// ARM test server.
func testScaleSet(t *testing.T, group string) *ScaleSet {
	t.Helper()
	vnet, err := server.AddVirtualNetwork(armtest.VirtualNetwork{
		ResourceGroup: group, Name: "v", AddressPrefixes: []string{"10.1.0.0/16"}, Subnets: map[string]string{"a": "10.1.0.0/24"},
	})
	if err != nil {
		t.Fatal(err)
	}
	image := server.ResourceGroupID(group) + "/providers/Microsoft.Compute/galleries/g/images/w/versions/1.0.0"
	if err := server.AddImage(image, nil); err != nil {
		t.Fatal(err)
	}
	client := secretClient(context.Background(), t)
	return &ScaleSet{
		Client: client, Name: "win", Pool: "win", ComputerNamePrefix: "win",
		Machines: Machines{
			ResourceGroup: group, Location: server.Location(), SubnetID: vnet + "/subnets/a",
			VMSize: "Standard_D4s_v5", ImageID: image, AdminUsername: "kubewin",
		},
	}
}

// Each Add puts new custom data (a fresh token) in the model: the instances before it are brought
// to the latest model, so that the scale set never reaches Compute's limit of 10 models.
func TestScaleSetModelsStayBounded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := testScaleSet(t, "pool-models")
	t.Cleanup(func() { _ = s.Destroy(context.Background()) })
	for i := range 12 {
		if _, err := s.Add(ctx, 1, []byte(fmt.Sprintf("config-%d", i)), nil); err != nil {
			t.Fatalf("add %d: %v", i, err)
		}
	}
	ins, err := s.instances(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(ins) != 12 {
		t.Fatalf("%d instances, want 12", len(ins))
	}
}

// A pool holds more than the 100 machines of a single placement group.
func TestScaleSetBeyondOnePlacementGroup(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := testScaleSet(t, "pool-large")
	t.Cleanup(func() { _ = s.Destroy(context.Background()) })
	if _, err := s.Add(ctx, 60, []byte("config-1"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add(ctx, 60, []byte("config-2"), nil); err != nil {
		t.Fatal(err)
	}
}

// secretClient is a client of the test server with its client secret, polling every 10 ms, with
// auxiliary tenants.
func secretClient(ctx context.Context, t *testing.T, auxiliary ...string) *Client {
	t.Helper()
	cfg := base()
	cfg.ClientID, cfg.ClientSecret = server.Credentials().ClientID, server.Credentials().ClientSecret
	cfg.AuxiliaryTenantIDs = auxiliary
	client, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	client.poll = 10 * time.Millisecond
	return client
}

// A deleteInstances whose answer is lost (it ran; the connection reset) is not sent again for
// instances it is deleting, which Compute would refuse: the instances are listed and waited for.
func TestScaleSetDeleteAnswerLost(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := testScaleSet(t, "pool-lost")
	t.Cleanup(func() { _ = s.Destroy(context.Background()) })
	names, err := s.Add(ctx, 3, []byte("config"), nil)
	if err != nil {
		t.Fatal(err)
	}
	lost := server.LoseResponses(armtest.Match{Method: "POST", Path: armtest.InGroup("pool-lost", `/virtualMachineScaleSets/win/delete$`), Times: 1})
	defer lost.Remove()
	if err := s.Delete(ctx, names[1:]); err != nil {
		t.Fatal(err)
	}
	if lost.Hits() != 1 {
		t.Fatalf("the lost answer hit %d requests, want 1", lost.Hits())
	}
	if ins := server.Instances(s.ID()); len(ins) != 1 || ins[0].InstanceID != "0" {
		t.Fatalf("instances after the delete: %v", ins)
	}
}
