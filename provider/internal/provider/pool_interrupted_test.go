package provider

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// An apply scaling a pool out, interrupted as a user or a CI runner does (two interrupts: the
// provider is told to stop, then terraform exits at once) while the new machines join, is
// followed by one apply that converges to exactly the count: the machines keep the bootstrap
// token they boot with, and the next apply finds them joined.
func TestAccWindowsNodePoolInterrupted(t *testing.T) {
	t.Parallel()
	acceptance(t)
	state, provider := testAccLocal(t)
	b := testBackend(t, state)
	image := testImage(t, b, "interrupted")
	c := newCLI(t, t.TempDir(), provider+fmt.Sprintf(`
variable "node_count" {
  type = number
}

resource "kubewin_cluster" "test" {
  name = "interrupted"
  local {}
}

resource "kubewin_windows_node_pool" "win" {
  name       = "win"
  cluster_id = kubewin_cluster.test.id
  node_count = var.node_count
  local {
    image = %q
  }
}
`, image))
	c.run(t, "apply", "-auto-approve", "-input=false", "-var", "node_count=1")
	t.Cleanup(func() { _, _, _ = c.try("destroy", "-auto-approve", "-input=false", "-var", "node_count=1") })

	var out bytes.Buffer
	cmd := exec.Command(c.tf, "-chdir="+c.dir, "apply", "-auto-approve", "-input=false", "-var", "node_count=5")
	cmd.Env, cmd.Stdout, cmd.Stderr = c.env, &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		ms, err := b.Machines("win")
		return len(ms) == 5, err
	})
	if err != nil {
		t.Fatalf("the apply never created the machines: %v\n%s", err, out.String())
	}
	for range 2 {
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = cmd.Wait()
	t.Logf("the interrupted apply:\n%s", out.String())

	c.run(t, "apply", "-auto-approve", "-input=false", "-var", "node_count=5")
	client := adminClient(t, b, "interrupted")()
	nodes, err := client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: "kubewin.io/pool=win"})
	if err != nil {
		t.Fatal(err)
	}
	ready := 0
	for _, n := range nodes.Items {
		if readySchedulable(&n) {
			ready++
		}
	}
	ms, err := b.Machines("win")
	if err != nil {
		t.Fatal(err)
	}
	if ready != 5 || len(ms) != 5 {
		t.Errorf("%d Ready nodes and %d machines after the second apply, want 5 of each", ready, len(ms))
	}
}
