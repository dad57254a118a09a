package provider

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkPoolApply measures terraform apply creating a node pool of 1, 10, 50 and 500 simulated
// Windows nodes on a running local cluster, from plan to every node Ready (the scaling curve, with
// each as a multiple of one node's), and terraform plan of a pool of 500. The cluster's pod
// network has room for 512 nodes (/25 each of a /16); 500 machines take about 4 GiB of this
// host's memory.
func BenchmarkPoolApply(b *testing.B) {
	state, provider := testAccLocal(b)
	image := testImage(b, testBackend(b, state), "bench")
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
	var one time.Duration
	for _, n := range []int{1, 10, 50, 500} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			var total time.Duration
			for range b.N {
				total += c.run(b, "apply", "-auto-approve", "-input=false", "-var", fmt.Sprintf("node_count=%d", n))
				b.StopTimer()
				c.run(b, "destroy", "-auto-approve", "-input=false", "-target=kubewin_windows_node_pool.win", "-var", fmt.Sprintf("node_count=%d", n))
				b.StartTimer()
			}
			per := total / time.Duration(b.N)
			b.ReportMetric(per.Seconds(), "s/apply")
			if n == 1 {
				one = per
			} else if one > 0 {
				b.ReportMetric(float64(per)/float64(one), "x-1-node")
			}
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
