package provider

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kubewin/kubewin/internal/bootstraptoken"
	"github.com/kubewin/kubewin/internal/capin"
	"github.com/kubewin/kubewin/internal/controlplane"
	"github.com/kubewin/kubewin/internal/testkit/floor"
)

// BenchmarkPoolApply measures terraform apply creating a node pool of 1, 10, 50 and 500 simulated
// Windows nodes on a running local cluster, from plan to every node Ready (the scaling curve, with
// each as a multiple of one node's), and terraform plan of a pool of 500. The cluster's pod
// network has room for 512 nodes (/25 each of a /16); 500 machines take about 4 GiB of this
// host's memory.
//
// After all of them, for each size, as many nodes join the same control plane and go Ready the
// least way a node can (poolFloor): the cluster's own cost of that many nodes, without kubewin,
// Terraform or the simulated machines. Each size reports that floor and the apply as a multiple
// of it; both report the control plane's CPU per node (its processes' CPU time over the apply,
// and over the floor's joins).
func BenchmarkPoolApply(b *testing.B) {
	state, provider := testAccLocal(b)
	backend := testBackend(b, state)
	image := testImage(b, backend, "bench")
	c := newCLI(b, b.TempDir(), provider+fmt.Sprintf(`
variable "node_count" {
  type = number
}

resource "kubewin_cluster" "bench" {
  name                = "bench"
  node_cidr_mask_size = 25
  local {}
}

resource "kubewin_windows_node_pool" "win" {
  name       = "win"
  cluster_id = kubewin_cluster.bench.id
  node_count = var.node_count
  local {
    image = %q
  }
}
`, image))
	c.run(b, "apply", "-auto-approve", "-input=false", "-target=kubewin_cluster.bench", "-var", "node_count=1")
	defer c.run(b, "destroy", "-auto-approve", "-input=false", "-var", "node_count=1")
	cp, err := backend.Cluster("bench")
	if err != nil {
		b.Fatal(err)
	}
	admin := adminClient(b, backend, "bench")()
	sizes := []int{1, 10, 50, 500}
	applied := map[int]time.Duration{}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			var total, cpu time.Duration
			for range b.N {
				before := cpuTime(b, cp)
				total += c.run(b, "apply", "-auto-approve", "-input=false", "-var", fmt.Sprintf("node_count=%d", n))
				cpu += cpuTime(b, cp) - before
				b.StopTimer()
				c.run(b, "destroy", "-auto-approve", "-input=false", "-target=kubewin_windows_node_pool.win", "-var", fmt.Sprintf("node_count=%d", n))
				b.StartTimer()
			}
			applied[n] = total / time.Duration(b.N)
			b.ReportMetric(applied[n].Seconds(), "s/apply")
			if one := applied[1]; n > 1 && one > 0 {
				b.ReportMetric(float64(applied[n])/float64(one), "x-1-node")
			}
			b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N*n), "cp-cpu-ms/node")
		})
	}
	// A plan of a pool of 500 machines: what the plan reads and checks before any machine exists.
	b.Run("plan-nodes=500", func(b *testing.B) {
		var total time.Duration
		for range b.N {
			total += c.run(b, "plan", "-input=false", "-var", "node_count=500")
		}
		b.ReportMetric((total / time.Duration(b.N)).Seconds(), "s/plan")
	})
	// The floors come after every apply, so that no floor's nodes, and the controllers' work on
	// their removal, share the control plane with an apply.
	for _, n := range sizes {
		b.Run(fmt.Sprintf("floor-nodes=%d", n), func(b *testing.B) {
			var total, cpu time.Duration
			for i := range b.N {
				took, used := poolFloor(b, cp, admin, fmt.Sprintf("floor%d-%d", n, i), n)
				total, cpu = total+took, cpu+used
			}
			least := total / time.Duration(b.N)
			b.ReportMetric(least.Seconds(), "floor-s")
			if applied[n] > 0 {
				b.ReportMetric(float64(applied[n])/float64(least), "x-floor")
			}
			b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N*n), "floor-cp-cpu-ms/node")
		})
	}
}

// poolFloor makes n nodes named prefix-<i> join the control plane at once and go Ready the least
// way (floor.Join and floor.Register, each node with connections of its own), returns the wall
// time that took and the control plane's CPU time meanwhile, and removes the nodes (their Leases
// go with them) and their token.
func poolFloor(b *testing.B, cp *controlplane.ControlPlane, admin kubernetes.Interface, prefix string, n int) (time.Duration, time.Duration) {
	b.Helper()
	ctx := context.Background()
	token, err := bootstraptoken.Create(ctx, admin, prefix, 10*time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = bootstraptoken.Delete(ctx, admin, token) }()
	ca, err := cp.CACert()
	if err != nil {
		b.Fatal(err)
	}
	pin, err := capin.HashPEM(ca)
	if err != nil {
		b.Fatal(err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := floor.WaitSigned(waitCtx, admin, token); err != nil {
		b.Fatal(err)
	}
	settle(waitCtx, b, admin)
	names := make([]string, n)
	errs := make([]error, n)
	cpu, start := cpuTime(b, cp), time.Now()
	var wg sync.WaitGroup
	for i := range n {
		names[i] = fmt.Sprintf("%s-%d", prefix, i)
		wg.Go(func() {
			var d net.Dialer
			cred, err := floor.Join(ctx, cp.HostPort(), token, pin, names[i], d.DialContext)
			if err == nil {
				err = floor.Register(ctx, cred, names[i], net.IPv4(127, 2, byte(i>>8), byte(i)), d.DialContext)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	took, cpu := time.Since(start), cpuTime(b, cp)-cpu
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
	for _, name := range names {
		if err := admin.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	return took, cpu
}

// settle waits until the cluster has no Node Lease left: the garbage collector has removed those
// of the Nodes deleted before, and with that the controllers are done with them.
func settle(ctx context.Context, b *testing.B, admin kubernetes.Interface) {
	b.Helper()
	var left int
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		leases, err := admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		left = len(leases.Items)
		return left == 0, nil
	})
	if err != nil {
		b.Fatalf("%d Node Leases are still there: %v", left, err)
	}
}

// cpuTime is the CPU time the control plane's processes have used so far (utime and stime of
// /proc/<pid>/stat, in clock ticks of 10 ms).
func cpuTime(b *testing.B, cp *controlplane.ControlPlane) time.Duration {
	b.Helper()
	var ticks int64
	for _, pid := range cp.PIDs {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			b.Fatal(err)
		}
		// The fields after the command name, which is in parentheses: utime and stime are the
		// 12th and 13th of them (proc(5)).
		fields := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
		for _, f := range fields[11:13] {
			t, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			ticks += t
		}
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// BenchmarkPlanRoutes measures terraform plan for a route table at its limit: 400 routes.
func BenchmarkPlanRoutes(b *testing.B) {
	_, provider := testAccLocal(b)
	c := newCLI(b, b.TempDir(), provider+`
locals {
  routes = { for i in range(400) : "node${i}" => { cidr = "10.${100 + floor(i / 200)}.${i % 200}.0/24", `+
		`ip = "10.240.${floor(i / 200)}.${i % 200 + 4}" } }
}

resource "kubewin_pod_route" "node" {
  for_each    = local.routes
  local {
    route_table = "bench"
  }
  name        = each.key
  destination = each.value.cidr
  next_hop    = each.value.ip
}
`)
	var total time.Duration
	for range b.N {
		total += c.run(b, "plan", "-input=false", "-refresh=false", "-out="+filepath.Join(c.dir, "plan"))
	}
	b.ReportMetric((total / time.Duration(b.N)).Seconds(), "s/plan")
}
