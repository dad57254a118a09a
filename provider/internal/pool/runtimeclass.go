package pool

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-log/tflog"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/nodecmd"
)

// HyperVRuntimeClass is the RuntimeClass a pod names (runtimeClassName) to run under Hyper-V
// isolation. Its handler is containerd's runhcs-wcow-hypervisor, which images baked with
// hyperv_isolation configure, and its scheduling confines such pods to Windows nodes labelled
// v1alpha1.LabelHyperVIsolation: the RuntimeClass admission controller merges its nodeSelector
// into the pod's, so the scheduler places them there or leaves them Pending
// (kubernetes/website content/en/docs/concepts/containers/runtime-class.md, "Scheduling"; the
// Windows user guide's "Simplifying with RuntimeClass" in concepts/windows/user-guide.md).
//
// It has no overhead: Kubernetes documents overhead as what a RuntimeClass declares
// (runtime-class.md, "Pod Overhead"), and neither it nor Microsoft's Windows containers docs give
// a figure for a Hyper-V utility VM, so none is guessed. No build is selected either: Hyper-V
// isolation runs images of the node's build and of earlier ones, so a pod whose image needs a
// newer host selects node.kubernetes.io/windows-build itself. Taints of a pool are not tolerated
// here: a pod tolerates them itself.
//
// The RuntimeClass is shared by every Hyper-V pool of the cluster: the pools that hold it are
// listed in its hyperVPoolsAnnotation. The first creates it, each adds itself, a pool removes
// itself when it is destroyed or its image no longer has Hyper-V isolation, and the last one
// deletes it. A RuntimeClass of that name that kubewin did not create is never changed.
const HyperVRuntimeClass = v1alpha1.RuntimeClassHyperV

const (
	// hyperVPoolsAnnotation lists the pools that hold the RuntimeClass, sorted, comma-separated.
	hyperVPoolsAnnotation = "kubewin.io/hyperv-pools"
	// managedByLabel marks the RuntimeClass as kubewin's (Kubernetes' recommended label).
	managedByLabel = "app.kubernetes.io/managed-by"
	managedBy      = "kubewin"
)

// hyperVRuntimeClass is the RuntimeClass held by pools.
func hyperVRuntimeClass(pools []string) *nodev1.RuntimeClass {
	return &nodev1.RuntimeClass{
		ObjectMeta: metav1.ObjectMeta{
			Name:        HyperVRuntimeClass,
			Labels:      map[string]string{managedByLabel: managedBy},
			Annotations: map[string]string{hyperVPoolsAnnotation: strings.Join(pools, ",")},
		},
		Handler: nodecmd.HyperVHandler,
		Scheduling: &nodev1.Scheduling{NodeSelector: map[string]string{
			corev1.LabelOSStable: string(corev1.Windows), v1alpha1.LabelHyperVIsolation: "true",
		}},
	}
}

// holdRuntimeClass adds the pool to the holders of the Hyper-V RuntimeClass (hold), creating
// it, or removes it from them, deleting the RuntimeClass with its last holder. Concurrent
// applies of several pools are serialized by the RuntimeClass's resourceVersion.
func holdRuntimeClass(ctx context.Context, c kubernetes.Interface, pool string, hold bool) error {
	rcs := c.NodeV1().RuntimeClasses()
	retriable := func(err error) bool {
		return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err)
	}
	err := retry.OnError(retry.DefaultRetry, retriable, func() error {
		rc, err := rcs.Get(ctx, HyperVRuntimeClass, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			if !hold {
				return nil
			}
			tflog.Info(ctx, "creating the Hyper-V RuntimeClass", map[string]any{"runtime_class": HyperVRuntimeClass})
			_, err = rcs.Create(ctx, hyperVRuntimeClass([]string{pool}), metav1.CreateOptions{})
			return err
		}
		// A pool that holds no RuntimeClass needs no permission on them (clusters whose kubewin
		// account predates Hyper-V pools): one that cannot read them never created one.
		if !hold && apierrors.IsForbidden(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if rc.Labels[managedByLabel] != managedBy {
			if !hold {
				return nil
			}
			return fmt.Errorf("RuntimeClass %s exists and kubewin did not create it (it has no label %s=%s): delete it, or give it "+
				"another name, so that kubewin can keep it for its Hyper-V pools", HyperVRuntimeClass, managedByLabel, managedBy)
		}
		pools := holders(rc)
		if hold && !slices.Contains(pools, pool) {
			pools = append(pools, pool)
			slices.Sort(pools)
		}
		if !hold {
			pools = slices.DeleteFunc(pools, func(p string) bool { return p == pool })
		}
		if len(pools) == 0 {
			tflog.Info(ctx, "deleting the Hyper-V RuntimeClass: no Hyper-V pool is left", map[string]any{"runtime_class": HyperVRuntimeClass})
			err := rcs.Delete(ctx, HyperVRuntimeClass, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rc.ResourceVersion}})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}
		want := hyperVRuntimeClass(pools)
		if slices.Equal(pools, holders(rc)) && rc.Handler == want.Handler && equalSelector(rc.Scheduling, want.Scheduling) {
			return nil
		}
		if rc.Handler != want.Handler {
			return fmt.Errorf("RuntimeClass %s has handler %s, not %s, and a handler cannot be changed: delete the RuntimeClass and apply again",
				HyperVRuntimeClass, rc.Handler, want.Handler)
		}
		want.ResourceVersion = rc.ResourceVersion
		_, err = rcs.Update(ctx, want, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("keep RuntimeClass %s for pool %s: %w", HyperVRuntimeClass, pool, err)
	}
	return nil
}

// holders are the pools the RuntimeClass's annotation lists.
func holders(rc *nodev1.RuntimeClass) []string {
	s := rc.Annotations[hyperVPoolsAnnotation]
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func equalSelector(a, b *nodev1.Scheduling) bool {
	if a == nil || b == nil {
		return a == b
	}
	return len(a.Tolerations) == 0 && len(b.Tolerations) == 0 && maps.Equal(a.NodeSelector, b.NodeSelector)
}
