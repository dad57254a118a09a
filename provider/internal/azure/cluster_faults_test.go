package azure

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
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
	// newCluster is a cluster of the given control planes in a new group, deleted when t ends.
	newCluster := func(t *testing.T, group string, controlPlanes int) *Cluster {
		server.AddResourceGroup(group)
		c := &Cluster{Client: client, Spec: testClusterSpec(t, group, "acs")}
		c.Spec.ControlPlanes.Count = controlPlanes
		t.Cleanup(func() { _ = c.Delete(context.Background()) })
		return c
	}
	create := func(group string) (*Cluster, error) {
		c := newCluster(t, group, 1)
		_, err := c.Create(ctx)
		return c, err
	}
	// repair is kubewin_cluster's repair of c, from the state its create returned.
	repair := func(ctx context.Context, c *Cluster, state *ClusterState) error {
		b := ClusterBackend{Cluster: c, Access: func(ctx context.Context) (*Access, error) { return c.Access(ctx, state.Endpoint, 1) }}
		_, err := b.Repair(ctx, &cluster.State{Endpoint: "https://" + state.Endpoint, FQDN: state.FQDN, CACert: state.CACert, CAHash: state.CAHash})
		return err
	}
	// controlPlane is control plane i's VM as ARM has it: its provisioningState and Compute's vmId
	// ("" and "" when there is none), and whether its serial console reports its bootstrap done.
	controlPlane := func(ctx context.Context, t *testing.T, c *Cluster, i int) (state, vmID string, booted bool) {
		t.Helper()
		vms := client.compute.NewVirtualMachinesClient()
		vm, err := vms.Get(ctx, c.Spec.ResourceGroup, c.masterName(i), nil)
		if notFound(err) {
			return "", "", false
		}
		if err != nil {
			t.Fatal(err)
		}
		r, err := vms.RetrieveBootDiagnosticsData(ctx, c.Spec.ResourceGroup, c.masterName(i), nil)
		if err != nil {
			t.Fatal(err)
		}
		log, err := client.readBlob(ctx, *r.SerialConsoleLogBlobURI)
		return deref(vm.Properties.ProvisioningState), deref(vm.Properties.VMID), err == nil && kubeadmboot.ReadSerial(log).Ready
	}
	observe := func(ctx context.Context, t *testing.T, c *Cluster, controlPlanes, agents int, when string) {
		t.Helper()
		if o, err := c.Observe(ctx); err != nil || o.ControlPlanes != controlPlanes || o.Agents != agents {
			t.Fatalf("Observe %s = %+v, %v: want %d control planes and %d agents", when, o, err, controlPlanes, agents)
		}
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
		c := newCluster(t, "cluster-failed-master", 3)
		state, err := c.Create(ctx)
		if err == nil || state == nil || fail.Hits() != 1 {
			t.Fatalf("Create = %+v, %v (fault hit %d times): want the first control plane running and an error", state, err, fail.Hits())
		}
		if _, _, booted := controlPlane(ctx, t, c, 2); !booted {
			t.Fatal("Create returned before control plane 2 finished its bootstrap")
		}
		if o, err := c.Observe(ctx); err != nil || o.ControlPlanes != 2 {
			t.Fatalf("Observe = %+v, %v: want 2 control planes, the Failed VM not counted", o, err)
		}
		if err := repair(ctx, c, state); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if st, _, booted := controlPlane(ctx, t, c, i); st != "Succeeded" || !booted {
				t.Fatalf("control plane %d after the repair: %q in ARM, bootstrap done %v", i, st, booted)
			}
		}
	})

	// Compute gives up on a control plane whose guest did not report its provisioning in time
	// (OSProvisioningTimedOut): the VM is Failed in ARM, but it runs and its bootstrap finishes. As
	// for a pool's machine, its bootstrap decides: the create waits for it and goes on, the VM
	// counts as a control plane, and a repair leaves it (deleting it would take a joined etcd
	// member away).
	t.Run("control plane provisioning timed out", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		fault := server.TimeOutProvisioning(armtest.Match{Method: http.MethodPut, Path: `/virtualMachines/acs-master-1$`, Times: 1})
		defer fault.Remove()
		c := newCluster(t, "cluster-timed-out-master", 2)
		state, err := c.Create(ctx)
		if err != nil || fault.Hits() != 1 {
			t.Fatalf("Create = %v (fault hit %d times): want the cluster made, its second control plane's bootstrap deciding", err, fault.Hits())
		}
		vmState, vmID, booted := controlPlane(ctx, t, c, 1)
		if vmState != "Failed" || !booted {
			t.Fatalf("control plane 1 is %s in ARM, bootstrap done %v: want Failed and booted", vmState, booted)
		}
		observe(ctx, t, c, 2, 1, "after the create")
		if err := repair(ctx, c, state); err != nil {
			t.Fatal(err)
		}
		if _, id, _ := controlPlane(ctx, t, c, 1); id != vmID {
			t.Fatalf("the repair made control plane 1's VM again (vmId %s, then %s): it was a running control plane", vmID, id)
		}
		observe(ctx, t, c, 2, 1, "after the repair")
	})

	// The subscription's vCPU quota of the control planes' family holds the first control plane but
	// not the second: Compute refuses its VM (409 OperationNotAllowed, nothing created), the create
	// says so and what to do, and once the quota is raised the repair makes the missing control plane.
	t.Run("core quota", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		const family = "standardDSv3Family" // Standard_D2s_v3's, 2 vCPUs (armtest's vmSizes)
		t.Cleanup(func() { server.LimitCores(family, -1) })
		c := newCluster(t, "cluster-core-quota", 2)
		// The family's usage counts every test's machines that still exist: the quota error of a
		// VM refused under a limit of 0 tells it.
		server.LimitCores(family, 0)
		linux, err := c.linuxConfiguration()
		if err != nil {
			t.Fatal(err)
		}
		_, err = client.compute.NewVirtualMachinesClient().BeginCreateOrUpdate(ctx, c.Spec.ResourceGroup, "quota-probe",
			c.controlPlaneVMBody(0, linux, nil), nil)
		m := regexp.MustCompile(`Current Usage: (\d+),`).FindStringSubmatch(fmt.Sprint(err))
		if m == nil {
			t.Fatalf("a VM write under a quota of 0 cores = %v, want OperationNotAllowed with the current usage", err)
		}
		used, _ := strconv.Atoi(m[1])
		server.LimitCores(family, used+2)
		t.Logf("%s: %d cores in use, limit %d", family, used, used+2)

		state, err := c.Create(ctx)
		if state == nil {
			t.Fatalf("Create = %v: want the first control plane running", err)
		}
		var ae *pool.ActionError
		if !errors.As(err, &ae) {
			t.Fatalf("Create = %v, want a pool.ActionError", err)
		}
		if ae.Summary != "Azure vCPU Quota Exceeded" ||
			!strings.Contains(ae.Remedy, "quota in "+server.Location()+" is too small for 1 more Standard_D2s_v3") ||
			!strings.Contains(ae.Remedy, "Request a quota increase") || !strings.Contains(ae.Remedy, "then apply again") ||
			strings.Contains(ae.Remedy, "node_count") { // a control plane's count is not lowered
			t.Fatalf("summary %q, remedy %q", ae.Summary, ae.Remedy)
		}
		// Compute's message, which the remedy points to, names the family, the limit and the new one.
		for _, want := range []string{"create " + c.id(typeVirtualMachine, c.masterName(1)).String(), "OperationNotAllowed",
			"exceeding approved " + family + " Cores quota", fmt.Sprintf("Current Limit: %d", used+2), fmt.Sprintf("New Limit Required: %d", used+4)} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("Create = %v: want it to name %q", err, want)
			}
		}
		if st, _, _ := controlPlane(ctx, t, c, 1); st != "" {
			t.Fatalf("control plane 1 is %s in ARM: the refused write made it", st)
		}
		observe(ctx, t, c, 1, 0, "after the create")

		server.LimitCores(family, -1)
		if err := repair(ctx, c, state); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			if st, _, booted := controlPlane(ctx, t, c, i); st != "Succeeded" || !booted {
				t.Fatalf("control plane %d after the repair: %q in ARM, bootstrap done %v", i, st, booted)
			}
		}
		observe(ctx, t, c, 2, 1, "after the repair")
	})

	// The same for the Linux agents' scale set: Compute gives up on its instance, which runs and
	// joins; the create waits for it to be a Ready node, as a pool's scale-out does.
	t.Run("agents provisioning timed out", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		fault := server.TimeOutProvisioning(armtest.Match{Method: http.MethodPut, Path: `/virtualMachineScaleSets/acs-agents$`, Times: 1})
		defer fault.Remove()
		c := newCluster(t, "cluster-timed-out-agents", 1)
		if _, err := c.Create(ctx); err != nil || fault.Hits() != 1 {
			t.Fatalf("Create = %v (fault hit %d times): want the cluster made, the agent's join deciding", err, fault.Hits())
		}
		ss, err := client.compute.NewVirtualMachineScaleSetsClient().Get(ctx, c.Spec.ResourceGroup, c.scaleSetName(), nil)
		if err != nil || deref(ss.Properties.ProvisioningState) != "Failed" {
			t.Fatalf("the agents' scale set after the create: %v, %v; want it Failed in ARM", err, ss.Properties)
		}
		observe(ctx, t, c, 1, 1, "after the create")
	})
}
