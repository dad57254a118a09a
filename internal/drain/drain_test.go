package drain

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubewin/kubewin/internal/controlplane"
	"github.com/kubewin/kubewin/internal/testkit/testenv"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &cp)) }

// kubelet confirms the deletion of the node's pods, as a kubelet does once containers stop.
func kubelet(ctx context.Context, t *testing.T, c kubernetes.Interface, node string) {
	w, err := c.CoreV1().Pods(metav1.NamespaceAll).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName",
		node).String()})
	if err != nil {
		t.Error(err)
		return
	}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type == watch.Modified && p.DeletionTimestamp != nil {
				_ = c.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
			}
		}
	}()
}

func runningPod(t *testing.T, c kubernetes.Interface, node, name string) {
	t.Helper()
	ctx := context.Background()
	p, err := c.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": node}},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "example.invalid/c"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if _, err := c.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestDrainRespectsPDB(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg, _ := cp.AdminRESTConfig()
	c := kubernetes.NewForConfigOrDie(cfg)
	const node = "drain-node"
	if _, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubelet(ctx, t, c, node)
	runningPod(t, c, node, "a")
	runningPod(t, c, node, "b")
	if _, err := c.PolicyV1().PodDisruptionBudgets("default").Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "keep-one"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": node}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Wait for the disruption controller to count the healthy pods.
	deadline := time.Now().Add(20 * time.Second)
	for {
		pdb, err := c.PolicyV1().PodDisruptionBudgets("default").Get(ctx, "keep-one", metav1.GetOptions{})
		if err == nil && pdb.Status.DisruptionsAllowed == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("PDB status never allowed a disruption: %+v", pdb.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	err := Node(ctx, c, node, Options{Timeout: 4 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "could not be evicted before the drain timeout") {
		t.Fatalf("drain = %v, want the PodDisruptionBudget to stop it", err)
	}
	n, _ := c.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if !n.Spec.Unschedulable {
		t.Error("node was not cordoned")
	}
	pods, _ := c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if len(pods.Items) != 1 {
		t.Errorf("%d pods left, want exactly the one the PodDisruptionBudget protects", len(pods.Items))
	}
	// Without the budget the drain completes.
	if err := c.PolicyV1().PodDisruptionBudgets("default").Delete(ctx, "keep-one", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := Node(ctx, c, node, Options{Timeout: 20 * time.Second}); err != nil {
		t.Fatal(err)
	}
	pods, _ = c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if len(pods.Items) != 0 {
		t.Errorf("%d pods left after the drain", len(pods.Items))
	}
	if err := Node(ctx, c, "no-such-node", Options{Timeout: time.Second}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("draining a missing node: %v", err)
	}
}

// A node without a kubelet: an evicted pod is never confirmed gone, so the drain waits for it
// until the timeout — unless the node is unreachable, when it waits only for the pod's
// termination grace period.
func TestDrainUnreachable(t *testing.T) {
	ctx := context.Background()
	cfg, _ := cp.AdminRESTConfig()
	c := kubernetes.NewForConfigOrDie(cfg)
	const node = "unreachable-node"
	if _, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"u1", "u2"} {
		p, err := c.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: ptr.To(int64(1)),
				Containers: []corev1.Container{{Name: "c", Image: "example.invalid/c"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p.Status.Phase = corev1.PodRunning
		if _, err := c.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	err := Node(ctx, c, node, Options{Timeout: 3 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "did not terminate before the drain timeout") {
		t.Fatalf("drain of a node without a kubelet = %v, want a timeout", err)
	}
	start := time.Now()
	if err := Node(ctx, c, node, Options{Timeout: 10 * time.Second, Unreachable: true}); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the unreachable drain took %s, want about the pods' 1s grace period", took)
	}
	// The pods were evicted, not deleted: they wait, terminating, for the Node's deletion.
	for _, name := range []string{"u1", "u2"} {
		p, err := c.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil || p.DeletionTimestamp == nil {
			t.Errorf("pod %s: %v, deletion %v: want it evicted and terminating", name, err, p.GetDeletionTimestamp())
		}
	}
}

func TestSkipped(t *testing.T) {
	ds := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ds", OwnerReferences: []metav1.OwnerReference{{Kind: "DaemonSet", Name: "kube-proxy",
		Controller: ptr.To(true)}}}}
	if _, err := skipped(ds, Options{}); err == nil || !strings.Contains(err.Error(), "set ignore_daemonsets") {
		t.Errorf("DaemonSet pod without IgnoreDaemonSets: %v", err)
	}
	if skip, err := skipped(ds, Options{IgnoreDaemonSets: true}); !skip || err != nil {
		t.Errorf("DaemonSet pod with IgnoreDaemonSets: %v %v", skip, err)
	}
	ed := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "cache"}, Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "scratch",
		VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}}}
	if _, err := skipped(ed, Options{}); err == nil || !strings.Contains(err.Error(), "set delete_emptydir_data") {
		t.Errorf("emptyDir pod: %v", err)
	}
	mirror := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{corev1.MirrorPodAnnotationKey: "x"}}}
	if skip, _ := skipped(mirror, Options{}); !skip {
		t.Error("mirror pod not skipped")
	}
}
