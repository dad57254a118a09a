package provider

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cli runs the real terraform CLI with this tree's provider (a dev override), as a user does.
type cli struct {
	tf, dir string
	env     []string
}

func newCLI(b *testing.B, config string) *cli {
	b.Helper()
	dir := b.TempDir()
	bin := filepath.Join(dir, "bin")
	if out, err := exec.Command("go", "build", "-o", filepath.Join(bin, "terraform-provider-kubewin"), "../../../provider").CombinedOutput(); err != nil {
		b.Fatalf("build the provider: %v\n%s", err, out)
	}
	rc := filepath.Join(dir, "terraformrc")
	if err := os.WriteFile(rc, fmt.Appendf(nil, "provider_installation {\n  dev_overrides {\n    \"kubewin/kubewin\" = %q\n  }\n  direct {}\n}\n", bin), 0o644); err != nil {
		b.Fatal(err)
	}
	config = "terraform {\n  required_providers {\n    kubewin = { source = \"kubewin/kubewin\" }\n  }\n}\n\n" + config
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(config), 0o644); err != nil {
		b.Fatal(err)
	}
	return &cli{tf: os.Getenv("TF_ACC_TERRAFORM_PATH"), dir: dir, env: append(os.Environ(), "TF_CLI_CONFIG_FILE="+rc, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1")}
}

// run runs a terraform command and returns how long it took.
func (c *cli) run(b *testing.B, args ...string) time.Duration {
	b.Helper()
	cmd := exec.Command(c.tf, append([]string{"-chdir=" + c.dir}, args...)...)
	cmd.Env = c.env
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	if err != nil {
		b.Fatalf("terraform %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return took
}

// BenchmarkPoolApply measures terraform apply creating a node pool of 1, 10 and 50 simulated
// Windows nodes on a running local cluster, from plan to every node Ready (the scaling curve).
func BenchmarkPoolApply(b *testing.B) {
	state, provider := testAccLocal(b)
	image := testImage(b, testBackend(b, state), "bench")
	c := newCLI(b, provider+fmt.Sprintf(`
variable "node_count" {
  type = number
}

resource "kubewin_cluster" "bench" {
  name = "bench"
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
	for _, n := range []int{1, 10, 50} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			var total time.Duration
			for range b.N {
				total += c.run(b, "apply", "-auto-approve", "-input=false", "-var", fmt.Sprintf("node_count=%d", n))
				b.StopTimer()
				c.run(b, "destroy", "-auto-approve", "-input=false", "-target=kubewin_windows_node_pool.win", "-var", fmt.Sprintf("node_count=%d", n))
				b.StartTimer()
			}
			b.ReportMetric((total / time.Duration(b.N)).Seconds(), "s/apply")
		})
	}
}

// BenchmarkPlanRoutes measures terraform plan for a route table at its limit: 400 routes.
func BenchmarkPlanRoutes(b *testing.B) {
	_, provider := testAccLocal(b)
	c := newCLI(b, provider+`
locals {
  routes = { for i in range(400) : "node${i}" => { cidr = "10.${100 + floor(i / 200)}.${i % 200}.0/24", ip = "10.240.${floor(i / 200)}.${i % 200 + 4}" } }
}

resource "kubewin_pod_route" "node" {
  for_each    = local.routes
  route_table = "bench"
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
