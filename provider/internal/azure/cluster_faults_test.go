package azure

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kubewin/kubewin/internal/kubeadmboot"
	"github.com/kubewin/kubewin/internal/testkit/armtest"
	"github.com/kubewin/kubewin/provider/internal/cluster"
	"github.com/kubewin/kubewin/provider/internal/pool"
)

// The cluster's machines are created as a pool's are: the agents' scale set, whose create Compute
// preempted, is sent again, and a control plane Azure has no capacity for says what to do about it.
func TestAzureClusterMachineFaults(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := base()
	cfg.ClientID, cfg.ClientSecret = server.Credentials().ClientID, server.Credentials().ClientSecret
	client, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	create := func(group string) (*Cluster, error) {
		server.AddResourceGroup(group)
		c := &Cluster{Client: client, Spec: testClusterSpec(t, group, "acs")}
		t.Cleanup(func() { _ = c.Delete(context.Background()) })
		_, err := c.Create(ctx)
		return c, err
	}

	t.Run("preempted", func(t *testing.T) {
		preempt := server.PreemptOperations(armtest.Match{Method: http.MethodPut, Path: `/virtualMachineScaleSets/[^/]+$`, Times: 1})
		defer preempt.Remove()
		if _, err := create("cluster-preempted"); err != nil {
			t.Fatal(err)
		}
		if preempt.Hits() != 1 {
			t.Fatalf("the preemption fault hit %d times, want 1", preempt.Hits())
		}
	})

	t.Run("no capacity", func(t *testing.T) {
		fail := server.FailAllocation(armtest.Match{Method: http.MethodPut, Path: `/virtualMachines/[^/]+$`, Times: 1})
		defer fail.Remove()
		_, err := create("cluster-no-capacity")
		var ae *pool.ActionError
		if !errors.As(err, &ae) {
			t.Fatalf("Create = %v, want a pool.ActionError", err)
		}
		if ae.Summary != "Azure Has No Capacity for the VM Size" || !strings.Contains(ae.Remedy, "Standard_D2s_v3 machines in "+server.Location()) ||
			!strings.Contains(ae.Remedy, "the next apply makes the machines again") {
			t.Fatalf("summary %q, remedy %q", ae.Summary, ae.Remedy)
		}
	})

	// Compute leaves a control plane's VM Failed when it has no capacity for it: the create still
	// waits for the other new control plane to finish its bootstrap; the Failed VM is no control
	// plane, and the repair deletes it and makes it again.
	t.Run("control plane left Failed", func(t *testing.T) {
		fail := server.FailAllocation(armtest.Match{Method: http.MethodPut, Path: `/virtualMachines/acs-master-1$`, Times: 1})
		defer fail.Remove()
		server.AddResourceGroup("cluster-failed-master")
		c := &Cluster{Client: client, Spec: testClusterSpec(t, "cluster-failed-master", "acs")}
		c.Spec.ControlPlanes.Count = 3
		t.Cleanup(func() { _ = c.Delete(context.Background()) })
		state, err := c.Create(ctx)
		if err == nil || state == nil || fail.Hits() != 1 {
			t.Fatalf("Create = %+v, %v (fault hit %d times): want the first control plane running and an error", state, err, fail.Hits())
		}
		booted := func(i int) bool {
			r, err := client.compute.NewVirtualMachinesClient().RetrieveBootDiagnosticsData(ctx, c.Spec.ResourceGroup, c.masterName(i), nil)
			if err != nil {
				t.Fatal(err)
			}
			log, err := client.readBlob(ctx, *r.SerialConsoleLogBlobURI)
			return err == nil && kubeadmboot.ReadSerial(log).Ready
		}
		if !booted(2) {
			t.Fatal("Create returned before control plane 2 finished its bootstrap")
		}
		if o, err := c.Observe(ctx); err != nil || o.ControlPlanes != 2 {
			t.Fatalf("Observe = %+v, %v: want 2 control planes, the Failed VM not counted", o, err)
		}
		b := ClusterBackend{Cluster: c, Access: func(ctx context.Context) (*Access, error) { return c.Access(ctx, state.Endpoint, 1) }}
		if _, err := b.Repair(ctx, &cluster.State{Endpoint: "https://" + state.Endpoint, FQDN: state.FQDN, CACert: state.CACert,
			CAHash: state.CAHash}); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			vm, err := client.compute.NewVirtualMachinesClient().Get(ctx, c.Spec.ResourceGroup, c.masterName(i), nil)
			if err != nil || deref(vm.Properties.ProvisioningState) != "Succeeded" || !booted(i) {
				t.Fatalf("control plane %d after the repair: %v, %v", i, err, vm.Properties)
			}
		}
	})
}
