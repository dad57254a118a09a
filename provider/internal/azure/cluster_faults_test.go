package azure

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kubewin/kubewin/internal/testkit/armtest"
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
			!strings.Contains(ae.Remedy, "the next apply replaces the cluster") {
			t.Fatalf("summary %q, remedy %q", ae.Summary, ae.Remedy)
		}
	})
}
