package pool

import (
	"context"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/kubewin/kubewin/internal/controlplane"
	"github.com/kubewin/kubewin/internal/nodecmd"
	"github.com/kubewin/kubewin/internal/nodestatus"
	"github.com/kubewin/kubewin/internal/testkit/testenv"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &cp)) }

// eventLog records, in order, the backend's writes and the pod evictions and deletions the
// cluster receives.
type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) add(e string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *eventLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.events
	l.events = nil
	return out
}

// recorder logs the requests that evict or delete a pod.
type recorder struct {
	next http.RoundTripper
	log  *eventLog
}

func (r recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	p := req.URL.Path
	switch {
	case req.Method == http.MethodPost && strings.HasSuffix(p, "/eviction"):
		r.log.add("evict " + strings.TrimSuffix(p[strings.LastIndex(strings.TrimSuffix(p, "/eviction"), "/")+1:], "/eviction"))
	case req.Method == http.MethodDelete && strings.Contains(p, "/pods"):
		r.log.add("DELETE " + p)
	}
	return r.next.RoundTrip(req)
}

// clusterScaleSet is a scaleSet whose machines register with the test control plane, named
// after the pool; its log has the backend's writes and the pool's evictions.
func clusterScaleSet(t *testing.T, pool string) (*scaleSet, *eventLog) {
	cfg, err := cp.AdminRESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	log := &eventLog{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return recorder{rt, log} })
	client := kubernetes.NewForConfigOrDie(cfg)
	ss := &scaleSet{t: t, client: client, prefix: pool, machines: map[string]*fakeMachine{}, fail: map[string]int{}, leastReady: -1, log: log}
	return ss, log
}

func poolSpec(pool string, count int) Spec {
	s := spec(count, 1, "a")
	s.Pool = pool
	return s
}

// joined writes a node's report of a join that finished at done, as nodeboot does.
func joined(t *testing.T, c kubernetes.Interface, node string, done time.Time) {
	t.Helper()
	if err := nodestatus.Write(context.Background(), c, &nodestatus.Report{Node: node, State: nodestatus.StateDone, Updated: done}); err != nil {
		t.Fatal(err)
	}
}

// setReady sets a node's Ready condition as its kubelet (True, False) or the node lifecycle
// controller (Unknown) does, changed at since.
func setReady(t *testing.T, c kubernetes.Interface, node string, status corev1.ConditionStatus, since time.Time) {
	t.Helper()
	ctx := context.Background()
	cond := corev1.NodeCondition{Type: corev1.NodeReady, Status: status, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.NewTime(since)}
	switch status {
	case corev1.ConditionTrue:
		cond.Reason, cond.Message = "KubeletReady", "kubelet is posting ready status"
	case corev1.ConditionFalse:
		cond.Reason, cond.Message = "KubeletNotReady", "container runtime network not ready: HNS network not found"
	case corev1.ConditionUnknown:
		cond.Reason, cond.Message = "NodeStatusUnknown", "Kubelet stopped posting node status."
	}
	// The control plane's controllers write the Node too (taints, pod CIDR): read it again on a conflict.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Status.Conditions = []corev1.NodeCondition{cond}
		_, err = c.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// podOn creates a running pod on a node, with a 1s termination grace period.
func podOn(t *testing.T, c kubernetes.Interface, node, name string) {
	t.Helper()
	ctx := context.Background()
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

func nodeExists(t *testing.T, c kubernetes.Interface, name string) *corev1.Node {
	t.Helper()
	n, err := c.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return n
}

// A node that joined and goes NotReady — a Windows node rebooting for a patch, or waiting out
// an HNS hiccup — is kept through an apply within the timeout: not cordoned, not drained, not
// replaced, and counted; back Ready, nothing happens either.
func TestHealthNotReadyWithinTimeoutKept(t *testing.T) {
	ss, log := clusterScaleSet(t, "hkeep")
	m := ss.manager()
	s := poolSpec("hkeep", 2)
	reconcile(t, m, s)
	now := time.Now()
	joined(t, ss.client, "hkeep000000", now.Add(-5*time.Minute))
	joined(t, ss.client, "hkeep000001", now.Add(-5*time.Minute))
	setReady(t, ss.client, "hkeep000000", corev1.ConditionFalse, now.Add(-3*time.Minute))
	podOn(t, ss.client, "hkeep000000", "hkeep-web")
	log.take()

	nodes := reconcile(t, m, s)
	if got := log.take(); len(got) != 0 {
		t.Errorf("an apply within the timeout did %v, want nothing", got)
	}
	if n := nodeExists(t, ss.client, "hkeep000000"); n == nil || n.Spec.Unschedulable {
		t.Errorf("the NotReady node is %v, want it kept and schedulable", n)
	}
	if len(nodes) != 2 || !slices.Equal(nodeNames(nodes), []string{"hkeep000001"}) {
		t.Errorf("nodes %+v, want both machines, one Ready", nodes)
	}

	setReady(t, ss.client, "hkeep000000", corev1.ConditionTrue, time.Now())
	nodes = reconcile(t, m, s)
	if got := log.take(); len(got) != 0 {
		t.Errorf("an apply after the node came back did %v, want nothing", got)
	}
	if !slices.Equal(nodeNames(nodes), []string{"hkeep000000", "hkeep000001"}) {
		t.Errorf("Ready nodes %v", nodeNames(nodes))
	}
	p, err := ss.client.CoreV1().Pods("default").Get(context.Background(), "hkeep-web", metav1.GetOptions{})
	if err != nil || p.DeletionTimestamp != nil {
		t.Errorf("the node's pod: %v, deletion %v: want it untouched", err, p.GetDeletionTimestamp())
	}
}

// After the timeout, a NotReady node is reported, then replaced: a new node first, then the
// NotReady one cordoned, its pods evicted (never deleted) and its machine deleted. Its kubelet
// is gone (Ready Unknown), so the drain waits for its pods' grace period, not for a kubelet.
func TestHealthNotReadyPastTimeoutDrainedAndReplaced(t *testing.T) {
	ss, log := clusterScaleSet(t, "hrep")
	m := ss.manager()
	s := poolSpec("hrep", 2)
	s.Health = HealthCheck{NotReadyTimeout: 10 * time.Minute, MaxReplacements: 1}
	reconcile(t, m, s)
	now := time.Now()
	joined(t, ss.client, "hrep000000", now.Add(-time.Hour))
	joined(t, ss.client, "hrep000001", now.Add(-time.Hour))
	setReady(t, ss.client, "hrep000000", corev1.ConditionUnknown, now.Add(-20*time.Minute))
	podOn(t, ss.client, "hrep000000", "hrep-web")
	log.take()

	findings, err := m.Health(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if len(findings) != 1 || findings[0].Node != "hrep000000" || findings[0].Kept ||
		!strings.Contains(findings[0].State, "NotReady for 20m") || !strings.Contains(findings[0].State, "its kubelet stopped posting node status") ||
		!strings.Contains(findings[0].Action, "drains it through the Eviction API") {
		t.Fatalf("findings %+v", findings)
	}

	nodes := reconcile(t, m, s)
	if got, want := log.take(), []string{"add 1", "evict hrep-web", "delete hrep000000"}; !slices.Equal(got, want) {
		t.Errorf("the apply did %v, want %v: a new node, then the eviction, then the deletion", got, want)
	}
	if !slices.Equal(nodeNames(nodes), []string{"hrep000001", "hrep000002"}) || len(nodes) != 2 {
		t.Errorf("nodes %+v", nodes)
	}
	if nodeExists(t, ss.client, "hrep000000") != nil {
		t.Error("the replaced node's Node object is left")
	}
	p, err := ss.client.CoreV1().Pods("default").Get(context.Background(), "hrep-web", metav1.GetOptions{})
	if err == nil && p.DeletionTimestamp == nil {
		t.Error("the replaced node's pod was not evicted")
	}
	if findings, err := m.Health(context.Background(), s); err != nil || len(findings) != 0 {
		t.Errorf("findings after the replacement: %+v, %v", findings, err)
	}
}

// Never more NotReady nodes replaced in an apply than health_check.max_replacements: those
// NotReady longest go first; the others are kept and reported for a later apply.
func TestHealthReplacementsBounded(t *testing.T) {
	ss, log := clusterScaleSet(t, "hmax")
	m := ss.manager()
	s := poolSpec("hmax", 3)
	s.Health = HealthCheck{NotReadyTimeout: 10 * time.Minute, MaxReplacements: 2}
	reconcile(t, m, s)
	now := time.Now()
	for i, name := range []string{"hmax000000", "hmax000001", "hmax000002"} {
		joined(t, ss.client, name, now.Add(-time.Hour))
		setReady(t, ss.client, name, corev1.ConditionFalse, now.Add(-time.Duration(30+i*10)*time.Minute))
	}
	log.take()

	findings, err := m.Health(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	var replace, keep []string
	for _, f := range findings {
		if f.Kept {
			keep = append(keep, f.Node)
			if !strings.Contains(f.Action, "at most 2 NotReady nodes (health_check.max_replacements)") {
				t.Errorf("finding %+v", f)
			}
		} else {
			replace = append(replace, f.Node)
		}
	}
	// NotReady for 50m and 40m go; 30m stays.
	if !slices.Equal(replace, []string{"hmax000001", "hmax000002"}) || !slices.Equal(keep, []string{"hmax000000"}) {
		t.Fatalf("replaced %v, kept %v", replace, keep)
	}

	nodes := reconcile(t, m, s)
	var deleted []string
	for _, e := range log.take() {
		if name, ok := strings.CutPrefix(e, "delete "); ok {
			deleted = append(deleted, strings.Split(name, ",")...)
		}
	}
	slices.Sort(deleted)
	if !slices.Equal(deleted, []string{"hmax000001", "hmax000002"}) {
		t.Errorf("the apply deleted %v, want the two NotReady longest", deleted)
	}
	if nodeExists(t, ss.client, "hmax000000") == nil || len(nodes) != 3 || len(nodeNames(nodes)) != 2 {
		t.Errorf("nodes %+v: want the third NotReady node kept beside two new ones", nodes)
	}
	// The next apply replaces it.
	reconcile(t, m, s)
	if got := log.take(); !slices.Contains(got, "delete hmax000000") {
		t.Errorf("the second apply did %v", got)
	}
}

// A node whose kubelet is Ready but whose external cloud provider has not initialized it yet
// takes no pod: it does not count as Ready, and says why.
func TestNodeReadyWaitsForCloudProvider(t *testing.T) {
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "kubelet is posting ready status"}
	uninitialized := corev1.Taint{Key: nodecmd.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule}
	for _, tc := range []struct {
		name   string
		node   corev1.Node
		ready  bool
		reason string
	}{
		{"ready", corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready}}}, true, ""},
		{"awaiting its cloud provider", corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{uninitialized}},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready}}}, false, "its cloud provider has not initialized it"},
		{"another taint", corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "os", Value: "windows", Effect: corev1.TaintEffectNoSchedule}}},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready}}}, true, ""},
		{"not ready", corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady,
			Status: corev1.ConditionFalse, Reason: "KubeletNotReady", Message: "container runtime network not ready"}}}}, false, "KubeletNotReady"},
	} {
		if got := NodeReady(&tc.node); got != tc.ready {
			t.Errorf("%s: NodeReady = %v, want %v", tc.name, got, tc.ready)
		}
		if why := notReadyWhy(&tc.node); !tc.ready && !strings.Contains(why, tc.reason) {
			t.Errorf("%s: notReadyWhy = %q, want it to say %q", tc.name, why, tc.reason)
		}
	}
}
