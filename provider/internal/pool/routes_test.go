package pool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-log/tflogtest"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubewin/kubewin/internal/routetable"
	"github.com/kubewin/kubewin/internal/winname"
	"github.com/kubewin/kubewin/provider/internal/route"
)

// podCIDR is the pod CIDR of the scale set's idx-th machine.
func podCIDR(idx int) string { return fmt.Sprintf("10.244.%d.0/24", idx) }

// nodeWatches counts the watches of Nodes the clientset was asked for.
func (s *scaleSet) nodeWatches() int {
	n := 0
	for _, a := range s.fake.Actions() {
		if a.GetVerb() == "watch" && a.GetResource().Resource == "nodes" {
			n++
		}
	}
	return n
}

// allocateCIDR gives a registered node its pod CIDR, as the node IPAM controller does once the
// Node exists: here once a watch of Nodes started after watches did (the pool's wait then sees
// the node Ready without a pod CIDR) and 200 ms more, so that a wait that counted the node
// Ready before its route would do so first.
func (s *scaleSet) allocateCIDR(name string, idx, watches int) {
	ctx := context.Background()
	for s.nodeWatches() <= watches {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	node, err := s.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		s.t.Error(err)
		return
	}
	node.Spec.PodCIDR = podCIDR(idx)
	if _, err := s.client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		s.t.Error(err)
	}
}

// memTable is a route table in memory with the rules of every backend's (routetable), which
// records its writes in log and checks that a route goes only once its node is gone.
type memTable struct {
	ss  *scaleSet
	log *eventLog

	mu    sync.Mutex
	table routetable.Table
	// violations are routes removed while their machine or Node still existed.
	violations []string
}

var _ route.Table = (*memTable)(nil)

func (m *memTable) Key() string { return "mem" }

func (m *memTable) Read(context.Context) (*routetable.Table, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return &routetable.Table{Name: "mem", Routes: slices.Clone(m.table.Routes)}, nil
}

func (m *memTable) Get(_ context.Context, name string) (routetable.Route, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.table.Find(name)
	return r, ok, nil
}

func (m *memTable) Put(ctx context.Context, r routetable.Route) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.table.Put(r); err != nil {
		return err
	}
	node := strings.TrimPrefix(r.Name, RoutePrefix("win"))
	n, err := m.ss.client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	m.log.add(fmt.Sprintf("route %s (node Ready in the cluster: %v)", node, err == nil && NodeReady(n)))
	return nil
}

func (m *memTable) Remove(ctx context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	node := strings.TrimPrefix(name, RoutePrefix("win"))
	m.ss.mu.Lock()
	_, machine := m.ss.machines[node]
	m.ss.mu.Unlock()
	if _, err := m.ss.client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); machine || !apierrors.IsNotFound(err) {
		m.violations = append(m.violations, fmt.Sprintf("%s removed while machine exists=%v, Node read error=%v", name, machine, err))
	}
	m.table.Remove(name)
	m.log.add("unroute " + node)
	return nil
}

func (m *memTable) RouteID(name string) string { return "mem/" + name }

func (m *memTable) Serves(context.Context, netip.Addr) bool { return true }

// others are routes other writers keep in the table: the pool leaves them alone.
var others = []routetable.Route{
	{Name: "win000001", Destination: netip.MustParsePrefix("10.250.1.0/24"), NextHop: netip.MustParseAddr("10.240.9.1")},
	{Name: RouteName("linux", "win000002"), Destination: netip.MustParsePrefix("10.250.2.0/24"), NextHop: netip.MustParseAddr("10.240.9.2")},
}

// checkRoutes checks that the table holds exactly the routes of the pool's nodes, as the
// cluster sees them, and the other writers' routes.
func checkRoutes(t *testing.T, ss *scaleSet, tbl *memTable, step string) {
	t.Helper()
	nodes, err := ss.client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, r := range others {
		want[r.Name] = r.Destination.String() + " via " + r.NextHop.String()
	}
	for _, n := range nodes.Items {
		want[RouteName("win", n.Name)] = n.Spec.PodCIDR + " via " + n.Status.Addresses[0].Address
	}
	machines := ss.running()
	if len(machines) != len(nodes.Items) {
		t.Errorf("%s: %d machines, %d Nodes", step, len(machines), len(nodes.Items))
	}
	got := map[string]string{}
	table, _ := tbl.Read(context.Background())
	for _, r := range table.Routes {
		got[r.Name] = r.Destination.String() + " via " + r.NextHop.String()
	}
	if !maps.Equal(got, want) {
		t.Errorf("%s: the table holds\n%v\nwant\n%v", step, got, want)
	}
	tbl.mu.Lock()
	defer tbl.mu.Unlock()
	if len(tbl.violations) > 0 {
		t.Errorf("%s: routes removed before their node was gone: %v", step, tbl.violations)
	}
}

// A pool that keeps routes holds exactly its nodes' routes through scale-out, scale-in, a
// surge replacement and a health replacement, removes each only after its node is gone, and
// leaves other writers' routes alone; destroying it removes its routes.
func TestReconcileKeepsPoolRoutes(t *testing.T) {
	ss := newScaleSet(t)
	m := ss.manager()
	tbl := &memTable{ss: ss, log: &eventLog{}, table: routetable.Table{Name: "mem", Routes: slices.Clone(others)}}
	withRoutes := func(s Spec) Spec { s.Routes = tbl; return s }
	for _, step := range []struct {
		name  string
		spec  Spec
		count int
	}{
		{"create 5", spec(5, 1, "a"), 5},
		{"scale out to 8", spec(8, 1, "a"), 8},
		{"scale in to 3", spec(3, 1, "a"), 3},
		{"surge replacement", spec(3, 2, "b"), 3},
	} {
		if got := nodeNames(reconcile(t, m, withRoutes(step.spec))); len(got) != step.count {
			t.Fatalf("%s: nodes %v", step.name, got)
		}
		checkRoutes(t, ss, tbl, step.name)
	}
	// A machine that stopped is replaced; its route goes with it.
	stopped := ss.running()[0]
	ss.stop(stopped)
	reconcile(t, m, withRoutes(spec(3, 2, "b")))
	checkRoutes(t, ss, tbl, "health replacement")
	if _, ok := tbl.table.Find(RouteName("win", stopped)); ok {
		t.Errorf("the route of %s, replaced, is left", stopped)
	}
	// A route of the pool whose node is gone (removed outside an apply) goes at the next apply.
	tbl.table.Routes = append(tbl.table.Routes, routetable.Route{Name: RouteName("win", "win0000zz"),
		Destination: netip.MustParsePrefix("10.244.200.0/24"), NextHop: netip.MustParseAddr("10.240.0.200")})
	reconcile(t, m, withRoutes(spec(3, 2, "b")))
	checkRoutes(t, ss, tbl, "stale route")
	if err := m.Destroy(context.Background(), withRoutes(spec(3, 2, "b"))); err != nil {
		t.Fatal(err)
	}
	checkRoutes(t, ss, tbl, "destroy")
}

// readyLog turns the pool's log lines into events: "counted <node>" when the pool counts a
// node Ready.
type readyLog struct {
	log *eventLog
	buf bytes.Buffer
}

func (w *readyLog) Write(p []byte) (int, error) {
	w.buf.Write(p)
	for {
		i := bytes.IndexByte(w.buf.Bytes(), '\n')
		if i < 0 { // a partial line: kept for the next write
			return len(p), nil
		}
		line := w.buf.Next(i + 1)
		var entry struct {
			Message string `json:"@message"`
			Node    string `json:"node"`
		}
		if json.Unmarshal(line, &entry) == nil && entry.Message == "node Ready" {
			w.log.add("counted " + entry.Node)
		}
	}
}

// The route of a new node is written before the pool counts the node Ready, even when the node
// is Ready in the cluster before it has a pod CIDR: the test watches the table's writes and the
// pool's count in one ordered log.
func TestReconcileRouteBeforeReady(t *testing.T) {
	ss := newScaleSet(t)
	ss.lateCIDR = true
	m := ss.manager()
	log := &eventLog{}
	tbl := &memTable{ss: ss, log: log, table: routetable.Table{Name: "mem", Routes: slices.Clone(others)}}
	ctx, cancel := context.WithTimeout(tflogtest.RootLogger(context.Background(), &readyLog{log: log}), 20*time.Second)
	defer cancel()
	s := spec(3, 1, "a")
	s.Routes = tbl
	if _, err := m.Reconcile(ctx, s); err != nil {
		t.Fatal(err)
	}
	s.Count = 5
	if _, err := m.Reconcile(ctx, s); err != nil {
		t.Fatal(err)
	}
	events := log.take()
	for i := range 5 {
		node := fmt.Sprintf("win%06d", i)
		routed := slices.IndexFunc(events, func(e string) bool { return strings.HasPrefix(e, "route "+node+" ") })
		counted := slices.Index(events, "counted "+node)
		if routed < 0 || counted < 0 || routed > counted {
			t.Errorf("%s: route written at event %d, counted Ready at event %d, want the route first: %v", node, routed, counted, events)
		}
	}
	// The nodes were Ready in the cluster before their routes existed: the pool waited for them.
	if !slices.ContainsFunc(events, func(e string) bool { return strings.HasSuffix(e, "(node Ready in the cluster: true)") }) {
		t.Errorf("no route was written after its node was Ready in the cluster: the test shows nothing: %v", events)
	}
	checkRoutes(t, ss, tbl, "scale out")
}

// Route names fit Azure's rules with the longest node name, and a cut pool name keeps a prefix
// of its own.
func TestRouteName(t *testing.T) {
	azureName := regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9_.-]{0,78}[A-Za-z0-9_])?$`) // resource-name-rules#microsoftnetwork
	long := strings.Repeat("a", winname.MaxPoolName)
	longer := strings.Repeat("a", winname.MaxPoolName-1) + "b"
	for _, p := range []string{"win", strings.Repeat("w", 56), long, longer} {
		if name := RouteName(p, "win12345678901"); !azureName.MatchString(name) || len(name) > maxRouteName {
			t.Errorf("pool %q: route name %q is not an Azure route name", p, name)
		}
	}
	if RoutePrefix("win") != "kubewin.win." || RoutePrefix(strings.Repeat("w", 56)) != "kubewin."+strings.Repeat("w", 56)+"." {
		t.Errorf("short pool names are cut: %q", RoutePrefix("win"))
	}
	if RoutePrefix(long) == RoutePrefix(longer) {
		t.Errorf("pools %q and %q share route prefix %q", long, longer, RoutePrefix(long))
	}
}
