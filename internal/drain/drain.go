// Package drain cordons a node and evicts its pods through the Eviction API, so that
// PodDisruptionBudgets hold, before the node's machine is deleted — as `kubectl drain` does.
package drain

import (
	"context"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Options of a drain.
type Options struct {
	// Timeout bounds the whole drain; a PodDisruptionBudget that keeps refusing fails it.
	Timeout time.Duration
	// IgnoreDaemonSets leaves DaemonSet pods (their controller would recreate them at once);
	// without it a node running such pods cannot be drained.
	IgnoreDaemonSets bool
	// DeleteEmptyDirData allows evicting pods with emptyDir volumes, whose data is lost.
	DeleteEmptyDirData bool
	// GracePeriodSeconds overrides the pods' termination grace period when set.
	GracePeriodSeconds *int64
	// Unreachable is a node whose kubelet is gone (its machine stopped, or its Ready condition
	// is Unknown): only a kubelet confirms that a pod terminated, so an evicted pod is waited for
	// until its deletion is due (its termination grace period has passed), not until it is gone;
	// deleting the Node then lets the pod garbage collector remove it. cluster-api's machine
	// controller does the same for unreachable nodes with kubectl drain's
	// --skip-wait-for-delete-timeout (kubernetes-sigs/cluster-api,
	// internal/controllers/machine/machine_controller.go, drainNode).
	Unreachable bool
	// Progress receives a line per evicted pod.
	Progress io.Writer
}

// Node cordons a node and evicts its pods, waiting until they are gone.
func Node(ctx context.Context, c kubernetes.Interface, name string, o Options) error {
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	if err := cordon(ctx, c, name); err != nil {
		return err
	}
	pods, err := c.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName",
		name).String()})
	if err != nil {
		return fmt.Errorf("list pods of node %s: %w", name, err)
	}
	var evict []corev1.Pod
	for _, p := range pods.Items {
		switch skip, err := skipped(p, o); {
		case err != nil:
			return fmt.Errorf("drain node %s: %w", name, err)
		case !skip:
			evict = append(evict, p)
		}
	}
	for _, p := range evict {
		if err := evictPod(ctx, c, p, o); err != nil {
			return fmt.Errorf("drain node %s: %w", name, err)
		}
		_, _ = fmt.Fprintf(o.Progress, "evicted pod %s/%s from node %s\n", p.Namespace, p.Name, name)
	}
	for _, p := range evict {
		if err := waitGone(ctx, c, p, o.Unreachable); err != nil {
			return fmt.Errorf("drain node %s: %w", name, err)
		}
	}
	return nil
}

func cordon(ctx context.Context, c kubernetes.Interface, name string) error {
	patch := []byte(`{"spec":{"unschedulable":true}}`)
	if _, err := c.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("cordon node %s: %w", name, err)
	}
	return nil
}

// skipped reports whether a pod stays: mirror pods, finished pods and (when asked) DaemonSet
// pods. A pod that must go but may not is an error.
func skipped(p corev1.Pod, o Options) (bool, error) {
	if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return true, nil
	}
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false, nil
	}
	if ref := metav1.GetControllerOf(&p); ref != nil && ref.Kind == "DaemonSet" {
		if o.IgnoreDaemonSets {
			return true, nil
		}
		return false, fmt.Errorf("pod %s/%s belongs to DaemonSet %s: set ignore_daemonsets to leave it", p.Namespace, p.Name, ref.Name)
	}
	if !o.DeleteEmptyDirData {
		for _, v := range p.Spec.Volumes {
			if v.EmptyDir != nil {
				return false, fmt.Errorf("pod %s/%s has emptyDir volume %s, whose data would be lost: set delete_emptydir_data to allow it", p.Namespace, p.Name,
					v.Name)
			}
		}
	}
	return false, nil
}

// evictPod asks the Eviction API until it agrees; a PodDisruptionBudget answers 429 while the
// eviction would break it.
func evictPod(ctx context.Context, c kubernetes.Interface, p corev1.Pod, o Options) error {
	ev := &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
		DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: o.GracePeriodSeconds, Preconditions: metav1.NewUIDPreconditions(string(p.UID))},
	}
	var last error
	for {
		err := c.PolicyV1().Evictions(p.Namespace).Evict(ctx, ev)
		switch {
		case err == nil, apierrors.IsNotFound(err), apierrors.IsConflict(err):
			return nil
		case apierrors.IsTooManyRequests(err):
			last = err // a PodDisruptionBudget says not yet
		default:
			return fmt.Errorf("evict pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pod %s/%s could not be evicted before the drain timeout: %v", p.Namespace, p.Name, last)
		case <-time.After(time.Second):
		}
	}
}

// waitGone waits until an evicted pod is gone, or, on an unreachable node, until its deletion
// is due.
func waitGone(ctx context.Context, c kubernetes.Interface, p corev1.Pod, unreachable bool) error {
	for {
		got, err := c.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && got.UID != p.UID) {
			return nil
		}
		if unreachable && err == nil && got.DeletionTimestamp != nil && !time.Now().Before(got.DeletionTimestamp.Time) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pod %s/%s was evicted but did not terminate before the drain timeout", p.Namespace, p.Name)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
