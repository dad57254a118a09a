package provider

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/provider/internal/pool"
)

// hyperVConfig is a cluster with a pool of a process-only image and, when hvCount >= 0, a pool
// of an image baked with Hyper-V isolation.
func hyperVConfig(provider, processImage, hyperVImage string, hvCount int) string {
	config := provider + fmt.Sprintf(`
resource "kubewin_cluster" "test" {
  name = "hypervtest"
  local {}
}

resource "kubewin_windows_node_pool" "proc" {
  name       = "proc"
  cluster_id = kubewin_cluster.test.id
  node_count = 1
  drain      = { timeout = "1m" }
  local {
    image = %q
  }
}
`, processImage)
	if hvCount >= 0 {
		config += fmt.Sprintf(`
resource "kubewin_windows_node_pool" "hv" {
  name       = "hv"
  cluster_id = kubewin_cluster.test.id
  node_count = %d
  drain      = { timeout = "1m", ignore_daemonsets = true, delete_emptydir_data = true }
  local {
    image = %q
  }
}
`, hvCount, hyperVImage)
	}
	return config
}

// hyperVPod creates a pod that runs under the Hyper-V RuntimeClass, or, with no runtime class,
// an ordinary Windows pod.
func hyperVPod(c kubernetes.Interface, name, runtimeClass string) error {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			Containers:   []corev1.Container{{Name: "servercore", Image: "mcr.microsoft.com/windows/servercore:ltsc2019"}},
			NodeSelector: map[string]string{corev1.LabelOSStable: "windows"},
		},
	}
	if runtimeClass != "" {
		pod.Spec.RuntimeClassName = &runtimeClass
	}
	_, err := c.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{})
	return err
}

// scheduledOn waits until the scheduler has placed the pod, or has found it unschedulable, and
// returns its node ("" when unschedulable).
func scheduledOn(c kubernetes.Interface, name string) (string, error) {
	var pod *corev1.Pod
	var err error
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if pod, err = c.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{}); err != nil {
			continue
		}
		if pod.Spec.NodeName != "" {
			return pod.Spec.NodeName, nil
		}
		for _, cond := range pod.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
				return "", nil
			}
		}
	}
	return "", fmt.Errorf("the scheduler neither placed pod %s nor found it unschedulable (%v)", name, err)
}

// TestAccWindowsNodePool_hyperV has the real kube-apiserver and kube-scheduler place pods of
// the windows-hyperv RuntimeClass: onto the Hyper-V pool's node only; Pending while that pool
// has no node; refused once no Hyper-V pool is left, the RuntimeClass going with the last one.
// A pool of a process-only image stands next to it all along, its node free for any Windows pod.
func TestAccWindowsNodePool_hyperV(t *testing.T) {
	t.Parallel()
	state, provider := testAccLocal(t)
	b := testBackend(t, state)
	processImage := testImage(t, b, "process")
	hyperVImage := testImage(t, b, "hyperv", v1alpha1.IsolationProcess, v1alpha1.IsolationHyperV)
	client := adminClient(t, b, "hypervtest")
	ctx := context.Background()
	runtimeClass := func() error {
		rc, err := client().NodeV1().RuntimeClasses().Get(ctx, pool.HyperVRuntimeClass, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if rc.Handler != "runhcs-wcow-hypervisor" || rc.Annotations["kubewin.io/hyperv-pools"] != "hv" {
			return fmt.Errorf("RuntimeClass %s: handler %s, holders %q", rc.Name, rc.Handler, rc.Annotations["kubewin.io/hyperv-pools"])
		}
		return nil
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			for _, p := range []string{"proc", "hv"} {
				if ms, err := b.Machines(p); len(ms) != 0 || err != nil {
					return fmt.Errorf("pool %s: %d machines left (%v)", p, len(ms), err)
				}
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				// The Hyper-V pool has no node yet: it holds the RuntimeClass, whose pods stay
				// Pending, while an ordinary Windows pod lands on the process pool's node.
				Config: hyperVConfig(provider, processImage, hyperVImage, 0),
				ConfigStateChecks: []statecheck.StateCheck{checkFunc(func() error {
					if err := runtimeClass(); err != nil {
						return err
					}
					if err := hyperVPod(client(), "plain", ""); err != nil {
						return err
					}
					if node, err := scheduledOn(client(), "plain"); err != nil || node != "proc000000" {
						return fmt.Errorf("an ordinary Windows pod went to %q (%v), want proc000000", node, err)
					}
					if err := hyperVPod(client(), "isolated-0", pool.HyperVRuntimeClass); err != nil {
						return err
					}
					if node, err := scheduledOn(client(), "isolated-0"); err != nil || node != "" {
						return fmt.Errorf("a Hyper-V pod with no Hyper-V node went to %q (%v), want Pending", node, err)
					}
					return nil
				})},
			},
			{
				// Its node joins, labelled by its kubelet from the image: the Pending pod lands there,
				// and so does a new one, never on the process pool's node.
				Config: hyperVConfig(provider, processImage, hyperVImage, 1),
				ConfigStateChecks: []statecheck.StateCheck{checkFunc(func() error {
					if err := runtimeClass(); err != nil {
						return err
					}
					for _, n := range []string{"proc000000", "hv000000"} {
						node, err := client().CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
						if err != nil {
							return err
						}
						if got, want := node.Labels[v1alpha1.LabelHyperVIsolation], map[bool]string{true: "true"}[n == "hv000000"]; got != want {
							return fmt.Errorf("node %s has %s=%q, want %q", n, v1alpha1.LabelHyperVIsolation, got, want)
						}
					}
					if err := hyperVPod(client(), "isolated-1", pool.HyperVRuntimeClass); err != nil {
						return err
					}
					for _, p := range []string{"isolated-0", "isolated-1"} {
						if node, err := scheduledOn(client(), p); err != nil || node != "hv000000" {
							return fmt.Errorf("Hyper-V pod %s went to %q (%v), want hv000000", p, node, err)
						}
					}
					return nil
				})},
			},
			{
				// The last Hyper-V pool goes (its pods evicted by the drain): the RuntimeClass goes
				// with it, and a pod naming it is refused by the RuntimeClass admission plugin.
				Config: hyperVConfig(provider, processImage, hyperVImage, -1),
				ConfigStateChecks: []statecheck.StateCheck{checkFunc(func() error {
					if _, err := client().NodeV1().RuntimeClasses().Get(ctx, pool.HyperVRuntimeClass, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
						return fmt.Errorf("RuntimeClass %s outlived the last Hyper-V pool (%v)", pool.HyperVRuntimeClass, err)
					}
					err := hyperVPod(client(), "isolated-2", pool.HyperVRuntimeClass)
					if err == nil || !strings.Contains(err.Error(), pool.HyperVRuntimeClass) {
						return fmt.Errorf("a pod of a RuntimeClass that is gone: %v", err)
					}
					if node, err := scheduledOn(client(), "plain"); err != nil || node != "proc000000" {
						return fmt.Errorf("the ordinary pod is on %q (%v)", node, err)
					}
					return nil
				})},
			},
		},
	})
}
