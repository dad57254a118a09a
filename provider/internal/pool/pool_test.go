package pool

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"

	"github.com/kubewin/kubewin/internal/api"
	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/bootstraptoken"
	"github.com/kubewin/kubewin/internal/drain"
	"github.com/kubewin/kubewin/internal/nodeaccess"
	"github.com/kubewin/kubewin/internal/nodestatus"
	"github.com/kubewin/kubewin/internal/winname"
)

// scaleSet is an in-memory backend: machines that "boot" by registering a Ready Node with the
// labels of the NodeConfig they were given, unless told to fail. Any call can be made to fail.
// Its cluster is a fake clientset, or the test control plane (clusterScaleSet).
type scaleSet struct {
	t      *testing.T
	client kubernetes.Interface
	// fake is the client when it is a fake clientset.
	fake *fake.Clientset
	// prefix names the machines.
	prefix string

	mu       sync.Mutex
	next     int
	machines map[string]*fakeMachine
	// fail makes the named call ("List", "Add", "Delete", "Destroy") fail, for its next n calls.
	fail map[string]int
	// addPartly makes the next Add create only this many machines, then fail.
	addPartly int
	// boot decides what a new machine does; default: its node goes Ready.
	boot func(name string) bootOutcome
	// calls records the writes, in order: "add 2", "delete win000000,win000001".
	calls []string
	// log, when set, records the writes too, among the cluster's evictions.
	log *eventLog
	// lists counts the List calls, and diagnosed the Diagnose calls.
	lists, diagnosed int
	// leastReady is the fewest Ready, schedulable nodes seen after any change.
	leastReady int
	// lateCIDR makes nodes register (Ready) without a pod CIDR, which allocateCIDR gives them
	// once the pool's wait watches them, as kube-controller-manager's node IPAM controller does
	// after a node registered.
	lateCIDR bool
}

type fakeMachine struct {
	running bool
	config  *v1alpha1.NodeConfig
	report  *nodestatus.Report
	joining bool
}

type bootOutcome int

const (
	bootReady         bootOutcome = iota // the node registers and goes Ready
	bootFailed                           // the join fails before the cluster is trusted (report on the machine), which stops
	bootFailedRunning                    // the same, but the machine runs on (a cloud VM whose agent failed)
	bootStopped                          // the machine stops without a word
	bootPending                          // the node never goes Ready
	// bootFailedMachine: the join fails in the network phase with a machine-level code
	// (NetworkFailed, as an HNS hiccup gives), the machine running on.
	bootFailedMachine
	// bootJoining: the machine is still in discovery or TLS bootstrap, with no Node yet; its join
	// ends when the test calls finishJoins.
	bootJoining
)

func newScaleSet(t *testing.T) *scaleSet {
	f := fake.NewClientset()
	return &scaleSet{t: t, client: f, fake: f, prefix: "win", machines: map[string]*fakeMachine{}, fail: map[string]int{}, leastReady: -1}
}

func (s *scaleSet) failing(call string) error {
	if s.fail[call] > 0 {
		s.fail[call]--
		return fmt.Errorf("%s: the backend answered 503 Service Unavailable", call)
	}
	return nil
}

func (s *scaleSet) List(context.Context) ([]Machine, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.failing("List"); err != nil {
		return nil, err
	}
	s.lists++
	var out []Machine
	for name, m := range s.machines {
		out = append(out, Machine{Name: name, Running: m.running})
	}
	slices.SortFunc(out, func(a, b Machine) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (s *scaleSet) Add(ctx context.Context, n int, customData []byte, _ func([]string) error) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.failing("Add"); err != nil {
		return nil, err
	}
	cfg, err := api.DecodeNodeConfig(customData)
	if err != nil {
		s.t.Errorf("custom data: %v", err)
		return nil, err
	}
	if cfg.Node.Name != "" || cfg.Cluster.BootstrapToken == "" {
		s.t.Errorf("custom data names node %q and token %q: want a pool-wide NodeConfig with a token", cfg.Node.Name, cfg.Cluster.BootstrapToken)
	}
	s.write(fmt.Sprintf("add %d", n))
	var names []string
	for i := range n {
		if s.addPartly > 0 && i == s.addPartly {
			s.addPartly = 0
			return names, errors.New("the scale set's update ended Failed: allocation failed")
		}
		idx := s.next
		name, _ := winname.ComputerName(s.prefix, idx)
		s.next++
		m := &fakeMachine{running: true, config: cfg}
		s.machines[name] = m
		names = append(names, name)
		outcome := bootReady
		if s.boot != nil {
			outcome = s.boot(name)
		}
		switch outcome {
		case bootReady, bootPending:
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: cfg.Node.Labels}}
			node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.240.%d.%d", idx/250, idx%250+4)}}
			if s.lateCIDR {
				go s.allocateCIDR(name, idx, s.nodeWatches())
			} else {
				node.Spec.PodCIDR = podCIDR(idx)
			}
			if outcome == bootReady {
				node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
			}
			if _, err := s.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
				s.t.Error(err)
			}
		case bootFailed, bootFailedRunning:
			m.report = &nodestatus.Report{Node: name, State: nodestatus.StateFailed, Phase: "discovery", Code: nodestatus.CodeCAPinMismatch,
				Message: "the cluster CA does not match"}
			m.running = outcome == bootFailedRunning
		case bootStopped:
			m.running = false
		case bootFailedMachine:
			m.report = &nodestatus.Report{Node: name, State: nodestatus.StateFailed, Phase: "network", Code: nodestatus.CodeNetworkFailed,
				Message: "create the HNS network: the operation timed out"}
		case bootJoining:
			m.joining = true
			m.report = &nodestatus.Report{Node: name, State: nodestatus.StateRunning, Phase: "discovery"}
		}
	}
	s.observeReady()
	return names, nil
}

func (s *scaleSet) Delete(_ context.Context, names []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.failing("Delete"); err != nil {
		return err
	}
	s.write("delete " + strings.Join(names, ","))
	for _, n := range names {
		delete(s.machines, n)
	}
	return nil
}

// write records a write (called with s.mu held).
func (s *scaleSet) write(call string) {
	s.calls = append(s.calls, call)
	if s.log != nil {
		s.log.add(call)
	}
}

func (s *scaleSet) Destroy(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.failing("Destroy"); err != nil {
		return err
	}
	s.write("destroy")
	return nil
}

func (s *scaleSet) Reports(_ context.Context, names []string) map[string]*nodestatus.Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]*nodestatus.Report{}
	for _, n := range names {
		if m := s.machines[n]; m != nil && m.report != nil {
			out[n] = m.report
		}
	}
	return out
}

func (s *scaleSet) Log(_ context.Context, name string) string { return "log of " + name }

func (s *scaleSet) Diagnose(_ context.Context, name string) (*Diagnosis, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.diagnosed++
	m := s.machines[name]
	if m == nil {
		return nil, fmt.Errorf("no machine %s", name)
	}
	return &Diagnosis{Report: m.report, Summary: "summary of " + name, OnNode: `C:\diagnostics.tar.gz`}, nil
}

// finishJoins ends the joins of the machines still joining as nodeboot's would: with a Ready
// node when the bootstrap token of their custom data still exists, and otherwise failed in
// discovery with TokenNotFound, since kube-controller-manager's bootstrapsigner removes a deleted
// token's signature from cluster-info (nodeboot/internal/discovery).
func (s *scaleSet) finishJoins(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, m := range s.machines {
		if !m.joining {
			continue
		}
		m.joining = false
		secret := bootstraputil.BootstrapTokenSecretName(bootstraptoken.ID(m.config.Cluster.BootstrapToken))
		if _, err := s.client.CoreV1().Secrets(metav1.NamespaceSystem).Get(ctx, secret, metav1.GetOptions{}); err != nil {
			m.report = &nodestatus.Report{Node: name, State: nodestatus.StateFailed, Phase: "discovery", Code: nodestatus.CodeTokenNotFound,
				Message: "cluster-info carries no signature for the token"}
			continue
		}
		m.report = nil
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: m.config.Node.Labels},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
		if _, err := s.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			s.t.Error(err)
		}
	}
}

// observeReady notes the Ready, schedulable nodes now (called with s.mu held).
func (s *scaleSet) observeReady() {
	var nodes *corev1.NodeList
	if s.fake != nil {
		// The tracker: a List through the clientset would meet the tests' failing reactors.
		list, err := s.fake.Tracker().List(corev1.SchemeGroupVersion.WithResource("nodes"), corev1.SchemeGroupVersion.WithKind("Node"), "")
		if err != nil {
			s.t.Fatal(err)
		}
		var ok bool
		if nodes, ok = list.(*corev1.NodeList); !ok {
			s.t.Fatalf("the tracker listed a %T, not a *corev1.NodeList", list)
		}
	} else {
		var err error
		if nodes, err = s.client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: nodeaccess.PoolLabel}); err != nil {
			s.t.Error(err)
			return
		}
	}
	ready := 0
	for _, n := range nodes.Items {
		if NodeReady(&n) && !n.Spec.Unschedulable {
			ready++
		}
	}
	if s.leastReady < 0 || ready < s.leastReady {
		s.leastReady = ready
	}
}

// running returns the names of the running machines.
func (s *scaleSet) running() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for name, m := range s.machines {
		if m.running {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// stop stops a machine, as a crash or a deallocation outside the pool would.
func (s *scaleSet) stop(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.machines[name].running = false
}

func (s *scaleSet) resetCalls() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls, s.leastReady = nil, -1
	s.observeReady()
}

// readyAfter has the Nodes of the running machines report Ready after d, as their kubelets would.
func (s *scaleSet) readyAfter(d time.Duration) {
	go func() {
		time.Sleep(d)
		for _, name := range s.running() {
			node, err := s.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				s.t.Error(err)
				return
			}
			node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
			if _, err := s.client.CoreV1().Nodes().UpdateStatus(context.Background(), node, metav1.UpdateOptions{}); err != nil {
				s.t.Error(err)
			}
		}
	}()
}

func (s *scaleSet) manager() *Manager {
	if s.fake == nil {
		return &Manager{Client: s.client, Compute: s, Poll: 10 * time.Millisecond, MachineReportsAfter: 20 * time.Millisecond}
	}
	// Every change of a Node is a change of the Ready count.
	s.fake.PrependReactor("*", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetVerb() == "delete" || a.GetVerb() == "patch" {
			defer func() {
				go func() {
					s.mu.Lock()
					defer s.mu.Unlock()
					s.observeReady()
				}()
			}()
		}
		return false, nil, nil
	})
	return &Manager{Client: s.client, Compute: s, Poll: time.Millisecond, MachineReportsAfter: 20 * time.Millisecond}
}

func spec(count, surge int, image string) Spec {
	c := v1alpha1.NodeConfig{
		APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindNodeConfig,
		Cluster: v1alpha1.Cluster{APIServerEndpoint: "10.0.0.4:6443", CACertHashes: []string{"sha256:" + strings.Repeat("a", 64)},
			KubernetesVersion: "v1.37.1", ClusterCIDR: "10.244.0.0/16", ServiceCIDR: "10.96.0.0/12"},
		Node: v1alpha1.Node{Labels: map[string]string{"example.com/team": "web"}},
	}
	c.Default()
	return Spec{Pool: "win", Count: count, Image: image, Template: c, MaxSurge: surge, TokenTTL: time.Minute,
		Drain: drain.Options{Timeout: 5 * time.Second}}
}

func reconcile(t *testing.T, m *Manager, s Spec) []Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	nodes, err := m.Reconcile(ctx, s)
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return nodes
}

func nodeNames(nodes []Node) []string {
	var out []string
	for _, n := range nodes {
		if !n.Ready {
			continue
		}
		out = append(out, n.Name)
	}
	return out
}

func TestGeneration(t *testing.T) {
	base := spec(3, 1, "image-a")
	upgraded := spec(3, 1, "image-a")
	upgraded.Template.Cluster.KubernetesVersion = "v1.37.2"
	upgraded.Template.Cluster.BootstrapToken = "abcdef.0123456789abcdef"
	upgraded.Count, upgraded.MaxSurge = 7, 3
	if base.Generation() != upgraded.Generation() {
		t.Error("a control plane upgrade, a token, the count or the surge changed the generation: nodes would be replaced")
	}
	for name, change := range map[string]func(*Spec){
		"image":   func(s *Spec) { s.Image = "image-b" },
		"labels":  func(s *Spec) { s.Template.Node.Labels["example.com/team"] = "db" },
		"maxPods": func(s *Spec) { s.Template.Node.MaxPods = 30 },
		"memory":  func(s *Spec) { s.Template.Kubelet.SystemReservedMemory = "3Gi" },
		"network": func(s *Spec) { s.Template.Network.Mode = v1alpha1.NetworkModeHostGateway },
		"CA":      func(s *Spec) { s.Template.Cluster.CACertHashes = []string{"sha256:" + strings.Repeat("b", 64)} },
	} {
		s := spec(3, 1, "image-a")
		change(&s)
		if s.Generation() == base.Generation() {
			t.Errorf("a change of %s kept the generation: nodes would keep the old setting", name)
		}
	}
}

func TestReconcileCreatesAndScales(t *testing.T) {
	ss := newScaleSet(t)
	m := ss.manager()
	nodes := reconcile(t, m, spec(3, 1, "a"))
	if got := nodeNames(nodes); !slices.Equal(got, []string{"win000000", "win000001", "win000002"}) {
		t.Fatalf("nodes = %v", got)
	}
	// One write for the three machines.
	if !slices.Equal(ss.calls, []string{"add 3"}) {
		t.Errorf("backend writes = %v, want one add of 3", ss.calls)
	}
	// The NodeConfig is pool-wide, labelled with the pool and the generation, and its token is
	// deleted once the nodes are Ready.
	cfg := ss.machines["win000000"].config
	if cfg.Node.Labels[nodeaccess.PoolLabel] != "win" || cfg.Node.Labels[GenerationLabel] != spec(3, 1,
		"a").Generation() || cfg.Node.Labels["example.com/team"] != "web" {
		t.Errorf("labels = %v", cfg.Node.Labels)
	}
	secrets, _ := ss.client.CoreV1().Secrets(metav1.NamespaceSystem).List(context.Background(), metav1.ListOptions{})
	if len(secrets.Items) != 0 {
		t.Errorf("%d bootstrap tokens left", len(secrets.Items))
	}
	// Report objects exist for exactly the pool's nodes.
	reports, _ := ss.client.CoreV1().ConfigMaps(nodestatus.Namespace).List(context.Background(), metav1.ListOptions{})
	if len(reports.Items) != 3 {
		t.Errorf("%d report objects, want 3", len(reports.Items))
	}

	// Scale out: one write, new names.
	ss.resetCalls()
	nodes = reconcile(t, m, spec(5, 1, "a"))
	if len(nodeNames(nodes)) != 5 || !slices.Equal(ss.calls, []string{"add 2"}) {
		t.Errorf("nodes %v, writes %v", nodeNames(nodes), ss.calls)
	}
	// Scale in: the newest go first, drained (cordoned), in one write.
	ss.resetCalls()
	nodes = reconcile(t, m, spec(2, 1, "a"))
	if got := nodeNames(nodes); !slices.Equal(got, []string{"win000000", "win000001"}) {
		t.Errorf("nodes after scale-in = %v, want the oldest two", got)
	}
	if !slices.Equal(ss.calls, []string{"delete win000002,win000003,win000004"}) {
		t.Errorf("writes = %v", ss.calls)
	}
	for _, a := range ss.fake.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok && a.GetResource().Resource == "nodes" && !strings.Contains(string(p.GetPatch()), "unschedulable") {
			t.Errorf("unexpected node patch %s", p.GetPatch())
		}
	}
	if _, err := ss.client.CoreV1().Nodes().Get(context.Background(), "win000004", metav1.GetOptions{}); err == nil {
		t.Error("the Node of a removed machine is left")
	}
	// Nothing to do: no write.
	ss.resetCalls()
	reconcile(t, m, spec(2, 1, "a"))
	if len(ss.calls) != 0 {
		t.Errorf("a reconcile with nothing to do wrote %v", ss.calls)
	}
}

// A backend or API error stops the reconcile before anything is created.
func TestReconcileStopsOnErrors(t *testing.T) {
	for _, tt := range []struct {
		name  string
		setup func(*scaleSet)
	}{
		{"machine list fails", func(s *scaleSet) { s.fail["List"] = 1 }},
		{"machine list fails later", func(s *scaleSet) { s.fail["List"] = 2; _ = s.failing("List") }},
		{"node list fails", func(s *scaleSet) {
			s.fake.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, errors.New("etcdserver: request timed out")
			})
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ss := newScaleSet(t)
			m := ss.manager()
			reconcile(t, m, spec(2, 1, "a")) // an existing pool of 2
			ss.resetCalls()
			tt.setup(ss)
			if _, err := m.Reconcile(context.Background(), spec(4, 1, "a")); err == nil {
				t.Fatal("reconcile succeeded")
			}
			// Whatever failed, nothing was added: a transient error never makes machines look absent.
			for _, c := range ss.calls {
				if strings.HasPrefix(c, "add") {
					t.Errorf("the failed reconcile wrote %v", ss.calls)
				}
			}
			if len(ss.machines) > 4 {
				t.Errorf("%d machines after the failure", len(ss.machines))
			}
		})
	}
}

// An Add that fails half-way fails the apply; the next one keeps what was created and
// converges without duplicates.
func TestReconcileAddFailsHalfway(t *testing.T) {
	ss := newScaleSet(t)
	m := ss.manager()
	ss.addPartly = 2
	if _, err := m.Reconcile(context.Background(), spec(5, 1, "a")); err == nil || !strings.Contains(err.Error(), "allocation failed") {
		t.Fatalf("error = %v", err)
	}
	if len(ss.machines) != 2 {
		t.Fatalf("%d machines after the failed add, want the 2 it created", len(ss.machines))
	}
	ss.resetCalls()
	nodes := reconcile(t, m, spec(5, 1, "a"))
	if len(nodeNames(nodes)) != 5 || len(ss.machines) != 5 || !slices.Equal(ss.calls, []string{"add 3"}) {
		t.Errorf("nodes %v, machines %d, writes %v", nodeNames(nodes), len(ss.machines), ss.calls)
	}
}

// A machine that stops while joining fails the apply at once; the next apply replaces it.
func TestReconcileMachineStops(t *testing.T) {
	ss := newScaleSet(t)
	m := ss.manager()
	ss.boot = func(name string) bootOutcome {
		if name == "win000001" {
			return bootStopped
		}
		return bootReady
	}
	_, err := m.Reconcile(context.Background(), spec(3, 1, "a"))
	if err == nil || !strings.Contains(err.Error(), "machine win000001 stopped before its node was Ready") || !strings.Contains(err.Error(),
		"log of win000001") {
		t.Fatalf("error = %v", err)
	}
	ss.boot = nil
	ss.resetCalls()
	nodes := reconcile(t, m, spec(3, 1, "a"))
	if got := nodeNames(nodes); !slices.Equal(got, []string{"win000000", "win000002", "win000003"}) {
		t.Errorf("nodes = %v", got)
	}
	if !slices.Equal(ss.calls, []string{"delete win000001", "add 1"}) {
		t.Errorf("writes = %v", ss.calls)
	}
	// A Ready node whose machine stops later is replaced too, its Node deleted.
	ss.stop("win000002")
	ss.resetCalls()
	nodes = reconcile(t, m, spec(3, 1, "a"))
	if got := nodeNames(nodes); !slices.Equal(got, []string{"win000000", "win000003", "win000004"}) {
		t.Errorf("nodes = %v", got)
	}
	if _, err := ss.client.CoreV1().Nodes().Get(context.Background(), "win000002", metav1.GetOptions{}); err == nil {
		t.Error("the stopped machine's Node is left")
	}
}

// A machine whose join fails with a machine-level code is replaced within the reconcile, up to
// JoinRetries machines; a code that would fail again on any machine fails at once.
func TestReconcileRetriesFailedJoins(t *testing.T) {
	retrying := func(retries int) Spec {
		s := spec(3, 1, "a")
		s.Health.JoinRetries = retries
		return s
	}
	failing := func(outcome bootOutcome, names ...string) func(string) bootOutcome {
		return func(name string) bootOutcome {
			if slices.Contains(names, name) {
				return outcome
			}
			return bootReady
		}
	}

	ss := newScaleSet(t)
	ss.boot = failing(bootFailedMachine, "win000001")
	nodes := reconcile(t, ss.manager(), retrying(1))
	if got := nodeNames(nodes); !slices.Equal(got, []string{"win000000", "win000002", "win000003"}) {
		t.Errorf("nodes = %v", got)
	}
	if !slices.Equal(ss.calls, []string{"add 3", "delete win000001", "add 1"}) {
		t.Errorf("writes = %v", ss.calls)
	}

	// Retries are counted across the reconcile: a second failure with one retry fails it.
	ss = newScaleSet(t)
	ss.boot = failing(bootFailedMachine, "win000001", "win000003")
	_, err := ss.manager().Reconcile(context.Background(), retrying(1))
	if err == nil || !strings.Contains(err.Error(), "win000003 failed in phase network") {
		t.Errorf("error = %v, want the second failure", err)
	}

	// A bad image or configuration fails on every machine: no retry.
	ss = newScaleSet(t)
	ss.boot = failing(bootFailedRunning, "win000001")
	if _, err = ss.manager().Reconcile(context.Background(), retrying(3)); err == nil || !strings.Contains(err.Error(), "CAPinMismatch") {
		t.Errorf("error = %v", err)
	}
	if !slices.Equal(ss.calls, []string{"add 3"}) {
		t.Errorf("writes = %v: a CAPinMismatch was retried", ss.calls)
	}
}

// A join that fails names the node, the phase and the code, whether the machine stops or runs
// on (then its own report tells).
func TestReconcileJoinFails(t *testing.T) {
	for _, outcome := range []bootOutcome{bootFailed, bootFailedRunning} {
		ss := newScaleSet(t)
		m := ss.manager()
		ss.boot = func(string) bootOutcome { return outcome }
		_, err := m.Reconcile(context.Background(), spec(1, 1, "a"))
		var je *JoinError
		if !errors.As(err, &je) || je.Report.Node != "win000000" || je.Report.Phase != "discovery" || je.Report.Code != nodestatus.CodeCAPinMismatch {
			t.Fatalf("outcome %d: error = %v", outcome, err)
		}
		if !strings.Contains(err.Error(), "node win000000 failed in phase discovery with code CAPinMismatch") || je.Log != "log of win000000" {
			t.Errorf("outcome %d: error = %v, log %q", outcome, err, je.Log)
		}
	}
}

// A machine whose join is done but whose kubelet has not posted the node's first status yet (an
// apply interrupted between the two) is still joining: the next apply waits until it is Ready
// rather than counting it as a NotReady node.
func TestReconcileWaitsForFirstStatus(t *testing.T) {
	ss := newScaleSet(t)
	m := ss.manager()
	ss.boot = func(string) bootOutcome { return bootPending }
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := m.Reconcile(ctx, spec(1, 1, "a")); err == nil {
		t.Fatal("the interrupted apply succeeded")
	}
	if err := nodestatus.Write(context.Background(), ss.client, &nodestatus.Report{Node: "win000000", State: nodestatus.StateDone,
		Updated: time.Now()}); err != nil {
		t.Fatal(err)
	}
	ss.readyAfter(300 * time.Millisecond)
	if nodes := reconcile(t, m, spec(1, 1, "a")); !slices.Equal(nodeNames(nodes), []string{"win000000"}) {
		t.Errorf("Ready nodes after the apply: %v, want win000000 (the apply waits for its first status)", nodeNames(nodes))
	}
}

// A node that never goes Ready fails at the deadline, saying where each join stands.
func TestReconcileTimeout(t *testing.T) {
	ss := newScaleSet(t)
	m := ss.manager()
	ss.boot = func(string) bootOutcome { return bootPending }
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := m.Reconcile(ctx, spec(2, 1, "a"))
	if err == nil || !strings.Contains(err.Error(), "nodes win000000, win000001 were not Ready in time: win000000 not started; win000001 not started") {
		t.Fatalf("error = %v", err)
	}
}

// A wait costs one list and one watch of the pool's Nodes and of its join reports, whatever the
// number of nodes and however long they take, and reads the backend's machines less and less
// often.
func TestReconcileWaitWatches(t *testing.T) {
	ss := newScaleSet(t)
	m := ss.manager()
	ss.boot = func(string) bootOutcome { return bootPending }
	// The nodes go Ready a while after their machines were created (Poll is 1 ms).
	ss.readyAfter(500 * time.Millisecond)
	if nodes := reconcile(t, m, spec(20, 1, "a")); len(nodeNames(nodes)) != 20 {
		t.Fatalf("nodes = %v", nodeNames(nodes))
	}
	calls := map[string]int{}
	for _, a := range ss.fake.Actions() {
		if r := a.GetResource().Resource; r == "nodes" || r == "configmaps" {
			calls[a.GetVerb()+" "+r]++
		}
	}
	// Reconcile's own reads: the machines and Nodes before it adds, and the Nodes it returns.
	if calls["watch nodes"] != 1 || calls["watch configmaps"] != 1 || calls["list nodes"] > 5 || calls["list configmaps"] > 3 {
		t.Errorf("API reads during the wait: %v", calls)
	}
	// 1, 2, 4, ... 256 ms after the start of a wait of about 500 ms, and Reconcile's own.
	ss.mu.Lock()
	lists := ss.lists
	ss.mu.Unlock()
	if lists > 15 {
		t.Errorf("%d machine lists", lists)
	}
}

// A new image replaces the nodes surge-first: max_surge new nodes are Ready before as many old
// ones are drained and deleted, and the pool never has fewer Ready nodes than its count.
func TestReconcileSurge(t *testing.T) {
	for _, tt := range []struct {
		surge int
		want  []string
	}{
		{1, []string{"add 1", "delete win000000", "add 1", "delete win000001", "add 1", "delete win000002"}},
		{3, []string{"add 3", "delete win000000,win000001,win000002"}},
	} {
		t.Run(fmt.Sprintf("max_surge=%d", tt.surge), func(t *testing.T) {
			ss := newScaleSet(t)
			m := ss.manager()
			reconcile(t, m, spec(3, tt.surge, "a"))
			ss.resetCalls()
			nodes := reconcile(t, m, spec(3, tt.surge, "b"))
			if got := nodeNames(nodes); !slices.Equal(got, []string{"win000003", "win000004", "win000005"}) {
				t.Errorf("nodes = %v", got)
			}
			if !slices.Equal(ss.calls, tt.want) {
				t.Errorf("writes = %v, want %v", ss.calls, tt.want)
			}
			time.Sleep(10 * time.Millisecond) // the last Node deletions' observations
			ss.mu.Lock()
			least := ss.leastReady
			ss.mu.Unlock()
			if least < 3 {
				t.Errorf("the replacement left %d Ready nodes, want at least 3", least)
			}
			gen := spec(3, tt.surge, "b").Generation()
			for _, n := range ss.running() {
				if ss.machines[n].config.Node.Labels[GenerationLabel] != gen {
					t.Errorf("machine %s has an old generation", n)
				}
			}
		})
	}
}

// An apply interrupted while its machines join, then run again, waits for them and adds no
// duplicates.
func TestReconcileInterrupted(t *testing.T) {
	ss := newScaleSet(t)
	m := ss.manager()
	ss.boot = func(string) bootOutcome { return bootJoining }
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	if _, err := m.Reconcile(ctx, spec(3, 1, "a")); err == nil {
		t.Fatal("the interrupted reconcile succeeded")
	}
	cancel()
	// The machines finish joining after the provider went away, with the token it left them.
	ss.finishJoins(context.Background())
	ss.boot = nil
	ss.resetCalls()
	nodes := reconcile(t, m, spec(3, 1, "a"))
	if len(nodeNames(nodes)) != 3 || len(ss.machines) != 3 || len(ss.calls) != 0 {
		t.Errorf("nodes %v, machines %d, writes %v: the re-run should only have waited", nodeNames(nodes), len(ss.machines), ss.calls)
	}
	// A change whose machines all joined deletes the token it minted; the one left to the
	// interrupted change's machines stays until it expires.
	reconcile(t, m, spec(4, 1, "a"))
	if tokens := poolTokens(t, ss.client); len(tokens) != 1 {
		t.Errorf("the pool has tokens %v, want only the one the interrupted change left", tokens)
	}
}

// A wait that is stopped (terraform's interrupt cancels the context; a timeout's deadline is
// not that) returns at once, saying so, without diagnosing the machines: the diagnosis kept the
// provider running after an interrupt, and terraform's second interrupt then emptied its state
// file (TestAccWindowsNodePoolInterrupted).
func TestReconcileStoppedDoesNotDiagnose(t *testing.T) {
	ss := newScaleSet(t)
	m := ss.manager()
	ss.boot = func(string) bootOutcome { return bootJoining }
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err := m.Reconcile(ctx, spec(2, 1, "a"))
	if err == nil || !strings.Contains(err.Error(), "stopped while nodes win000000, win000001 were joining") {
		t.Fatalf("error = %v", err)
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.diagnosed != 0 {
		t.Errorf("the stopped wait diagnosed %d machines", ss.diagnosed)
	}
}

// poolTokens lists the names of the win pool's bootstrap token Secrets.
func poolTokens(t *testing.T, c kubernetes.Interface) []string {
	t.Helper()
	list, err := c.CoreV1().Secrets(metav1.NamespaceSystem).List(context.Background(), metav1.ListOptions{LabelSelector: nodeaccess.PoolLabel + "=win"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range list.Items {
		names = append(names, s.Name)
	}
	return names
}

// Machines that have not joined when no token of the pool is left (it expired, or an
// interrupted apply removed it) cannot join: the next reconcile replaces them at once
// instead of waiting for a failure.
func TestReconcileReplacesMachinesWithoutToken(t *testing.T) {
	ss := newScaleSet(t)
	m := ss.manager()
	ss.boot = func(string) bootOutcome { return bootJoining }
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	if _, err := m.Reconcile(ctx, spec(2, 1, "a")); err == nil {
		t.Fatal("the interrupted reconcile succeeded")
	}
	cancel()
	for _, name := range poolTokens(t, ss.client) { // as the token cleaner removes expired ones
		if err := ss.client.CoreV1().Secrets(metav1.NamespaceSystem).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	joining := ss.running()
	ss.boot = nil
	ss.resetCalls()
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	nodes, err := m.Reconcile(ctx, spec(2, 1, "a"))
	if err != nil {
		t.Fatalf("reconcile: %v (it waited for machines that cannot join)", err)
	}
	if got := nodeNames(nodes); len(got) != 2 || slices.ContainsFunc(got, func(n string) bool { return slices.Contains(joining, n) }) {
		t.Errorf("nodes %v: want 2 new ones in place of %v", got, joining)
	}
}

// Destroy drains and deletes every machine in one write, then the pool, its tokens and access.
func TestDestroy(t *testing.T) {
	ss := newScaleSet(t)
	m := ss.manager()
	reconcile(t, m, spec(3, 1, "a"))
	ss.resetCalls()
	if err := m.Destroy(context.Background(), spec(3, 1, "a")); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ss.calls, []string{"delete win000000,win000001,win000002", "destroy"}) {
		t.Errorf("writes = %v", ss.calls)
	}
	nodes, _ := ss.client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if len(nodes.Items) != 0 {
		t.Errorf("%d nodes left", len(nodes.Items))
	}
	// The pool's tokens and report objects go by label (the fake client records, but does not
	// carry out, collection deletes; the provider's acceptance tests check them for real).
	var collections []string
	for _, a := range ss.fake.Actions() {
		if dc, ok := a.(k8stesting.DeleteCollectionAction); ok {
			collections = append(collections, dc.GetResource().Resource+" "+dc.GetListRestrictions().Labels.String())
		}
	}
	if !slices.Contains(collections, "secrets kubewin.io/pool=win") || !slices.Contains(collections, "configmaps kubewin.io/pool=win") {
		t.Errorf("collection deletes = %v", collections)
	}
}
