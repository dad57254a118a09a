package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-log/tflog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubewin/kubewin/internal/nodeaccess"
	"github.com/kubewin/kubewin/internal/nodecmd"
	"github.com/kubewin/kubewin/internal/nodestatus"
	"github.com/kubewin/kubewin/internal/routetable"
)

// member is a machine of the pool, or a Node of the pool without a machine, as observed.
type member struct {
	Name string
	// machine is whether the backend has the machine; Running whether it runs.
	machine, Running bool
	// Node is the machine's Node, nil before it registered.
	Node *corev1.Node
}

func (x member) ready() bool { return x.Node != nil && NodeReady(x.Node) }

// observe lists the pool's machines and its Nodes: one backend call and one API request,
// whatever the size of the pool.
func (m *Manager) observe(ctx context.Context, s Spec) ([]member, error) {
	machines, err := m.Compute.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the machines of pool %s: %w", s.Pool, err)
	}
	nodes, err := m.poolNodes(ctx, s)
	if err != nil {
		return nil, err
	}
	var out []member
	for _, mc := range machines {
		x := member{Name: mc.Name, machine: true, Running: mc.Running}
		if n, ok := nodes[mc.Name]; ok {
			x.Node = n
			delete(nodes, mc.Name)
		}
		out = append(out, x)
	}
	for name, n := range nodes {
		out = append(out, member{Name: name, Node: n})
	}
	slices.SortFunc(out, func(a, b member) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (m *Manager) poolNodes(ctx context.Context, s Spec) (map[string]*corev1.Node, error) {
	list, err := m.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: nodeaccess.PoolLabel + "=" + s.Pool})
	if err != nil {
		return nil, fmt.Errorf("list the nodes of pool %s: %w", s.Pool, err)
	}
	out := make(map[string]*corev1.Node, len(list.Items))
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out, nil
}

// names returns the names of the members that match, in their order.
func names(members []member, match func(member) bool) []string {
	var out []string
	for _, x := range members {
		if match(x) {
			out = append(out, x.Name)
		}
	}
	return out
}

// pick returns the members that match, in their order.
func pick(members []member, match func(member) bool) []member {
	var out []member
	for _, x := range members {
		if match(x) {
			out = append(out, x)
		}
	}
	return out
}

// all matches every member.
func all(member) bool { return true }

// NodeReady reports whether a Node is Ready and can take pods: its kubelet says Ready, and no
// external cloud provider is still to initialize it. Until its node manager has, the Node
// keeps the uninitialized taint and nothing without a toleration is scheduled there
// (https://kubernetes.io/docs/tasks/administer-cluster/running-cloud-controller/).
func NodeReady(n *corev1.Node) bool {
	if slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == nodecmd.TaintExternalCloudProvider }) {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// clusterReports reads the pool's join reports in one request.
func (m *Manager) clusterReports(ctx context.Context, s Spec) (map[string]*nodestatus.Report, error) {
	list, err := m.Client.CoreV1().ConfigMaps(nodestatus.Namespace).List(ctx, metav1.ListOptions{LabelSelector: nodeaccess.PoolLabel + "=" + s.Pool})
	if err != nil {
		return nil, fmt.Errorf("read the join reports of pool %s: %w", s.Pool, err)
	}
	out := map[string]*nodestatus.Report{}
	for i := range list.Items {
		if r := parseReport(&list.Items[i]); r != nil {
			out[r.Node] = r
		}
	}
	return out, nil
}

// parseReport is the join report a report object holds, or nil.
func parseReport(cm *corev1.ConfigMap) *nodestatus.Report {
	raw, ok := cm.Data[nodestatus.DataKey]
	if !ok {
		return nil
	}
	var r nodestatus.Report
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return nil
	}
	return &r
}

// waitReady waits until every named node is Ready, or fails naming the first that reports a
// failure, with its phase and code, or a machine that stopped. When the pool keeps routes, a
// node's route is written as soon as its Node has a pod CIDR and an InternalIP, and the node
// counts as Ready only once its route is written. It watches the pool's Nodes and
// join reports (one watch each, whatever the number of nodes) and reads the backend's machines,
// to notice machines that stopped, less and less often: Poll after the start, then twice as long
// after each read, up to 240 times Poll (a minute by default) — a cloud's machine list is one of
// its most throttled reads. The machines' own reports (a cloud serves them slowly, one machine at
// a time) are read only for nodes that have not reached the cluster after a while, and less and
// less often too.
func (m *Manager) waitReady(ctx context.Context, s Spec, waiting []string) error {
	pending := slices.Clone(waiting)
	// routed holds the route last written for each pending node, when the pool keeps routes.
	routed := map[string]routetable.Route{}
	// At the timeout the machines that are not Ready are diagnosed, as many as maxDiagnosed:
	// a machine whose own report failed (which a Windows machine on Azure cannot write to its
	// serial console: EMS holds COM1) fails the wait as a JoinError; the others' summaries
	// say where they stand.
	timeout := func(w *poolWatch) error {
		if errors.Is(ctx.Err(), context.Canceled) {
			// Stopped (terraform's interrupt, StopProvider), not timed out: return at once. Diagnosing
			// the machines (a run command each on Azure, tens of seconds) would keep the apply
			// running after the interrupt, and a second interrupt then exits terraform while it
			// writes its state, which leaves the state file empty (hashicorp/terraform#34266).
			return fmt.Errorf("stopped while nodes %s were joining: %w; they go on joining, and the next apply waits for them", strings.Join(pending, ", "),
				ctx.Err())
		}
		ctx := context.WithoutCancel(ctx)
		msg := fmt.Sprintf("nodes %s were not Ready in time: %s", strings.Join(pending, ", "), m.progress(ctx, s, pending))
		if w != nil && w.err() != nil {
			msg += fmt.Sprintf(" (watching the pool's nodes failed: %v)", w.err())
		}
		if w != nil && s.Routes != nil {
			for _, name := range pending {
				if _, ok := routed[name]; !ok && w.node(name) != nil && NodeReady(w.node(name)) {
					msg += fmt.Sprintf("; node %s is Ready but has no pod CIDR or no InternalIP, so the pool cannot write its route: the cluster "+
						"must allocate pod CIDRs (kube-controller-manager --allocate-node-cidrs)", name)
				}
			}
		}
		for _, name := range pending[:min(len(pending), maxDiagnosed)] {
			d := m.diagnose(ctx, name)
			if d != nil && d.Report != nil && d.Report.State == nodestatus.StateFailed {
				return &JoinError{Report: *d.Report, Log: m.Compute.Log(ctx, name), Diagnosis: d}
			}
			if detail := d.Detail(name); detail != "" {
				msg += "\n\n" + detail
			}
		}
		return errors.New(msg)
	}
	w, err := m.watchPool(ctx, s)
	if err != nil {
		if ctx.Err() != nil {
			return timeout(nil)
		}
		return err
	}
	defer w.stop()
	listEvery := m.Poll
	if listEvery == 0 {
		listEvery = 250 * time.Millisecond
	}
	maxListEvery := 240 * listEvery
	localEvery := m.MachineReportsAfter
	if localEvery == 0 {
		localEvery = 5 * time.Second
	}
	maxLocalEvery := 6 * localEvery
	nextList, nextLocal := time.Now().Add(listEvery), time.Now().Add(localEvery)
	for {
		if s.Routes != nil {
			for _, name := range pending {
				n := w.node(name)
				if n == nil {
					continue
				}
				if r, ok := nodeRoute(s.Pool, n); ok && routed[name] != r {
					if err := putRoute(ctx, s, r); err != nil {
						return err
					}
					routed[name] = r
				}
			}
		}
		pending = slices.DeleteFunc(pending, func(name string) bool {
			_, hasRoute := routed[name]
			if n := w.node(name); n != nil && NodeReady(n) && (s.Routes == nil || hasRoute) {
				tflog.Debug(ctx, "node Ready", map[string]any{"node": name})
				return true
			}
			return false
		})
		if len(pending) == 0 {
			return nil
		}
		for _, name := range pending {
			if r := w.report(name); r != nil && r.State == nodestatus.StateFailed {
				return &JoinError{Report: *r, Log: m.Compute.Log(ctx, name)}
			}
		}
		if !time.Now().Before(nextList) {
			if err := m.stoppedMachine(ctx, s, pending); err != nil {
				if ctx.Err() != nil {
					return timeout(w)
				}
				return err
			}
			listEvery = min(2*listEvery, maxListEvery)
			nextList = time.Now().Add(listEvery)
		}
		if !time.Now().Before(nextLocal) {
			var unreported []string
			for _, name := range pending {
				if w.report(name) == nil {
					unreported = append(unreported, name)
				}
			}
			local := m.Compute.Reports(ctx, unreported)
			for _, name := range unreported {
				if r := local[name]; r != nil && r.State == nodestatus.StateFailed {
					return &JoinError{Report: *r, Log: m.Compute.Log(ctx, name)}
				}
			}
			localEvery = min(2*localEvery, maxLocalEvery)
			nextLocal = time.Now().Add(localEvery)
		}
		timer := time.NewTimer(time.Until(nextList))
		if nextLocal.Before(nextList) {
			timer.Reset(time.Until(nextLocal))
		}
		select {
		case <-ctx.Done():
			timer.Stop()
			return timeout(w)
		case <-w.changed:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// stoppedMachine reads the pool's machines and fails for the first pending one that stopped or
// is gone: it will not become Ready, so the wait says why now, not at the timeout. A machine
// gone while it joined was deleted outside the apply: a cloud deletes a Spot machine it evicts
// (Azure's Delete eviction policy).
func (m *Manager) stoppedMachine(ctx context.Context, s Spec, pending []string) error {
	machines, err := m.Compute.List(ctx)
	if err != nil {
		return fmt.Errorf("list the machines of pool %s: %w", s.Pool, err)
	}
	for _, name := range pending {
		i := slices.IndexFunc(machines, func(mc Machine) bool { return mc.Name == name })
		if i < 0 {
			return &ActionError{Summary: "Machine Deleted While Joining",
				Err: fmt.Errorf("machine %s was deleted before its node was Ready, not by this apply", name),
				Remedy: "A Spot machine is deleted when its cloud evicts it (it needs the capacity back, or the price passed max_bid_price); " +
					"a machine can also be deleted by hand or by an autoscaler. Apply again: the next apply removes its Node and adds a machine " +
					"in its place. If evictions recur, raise max_bid_price, choose another vm_size or region, or use Regular machines."}
		}
		if machines[i].Running {
			continue
		}
		if r := m.Compute.Reports(ctx, []string{name})[name]; r != nil && r.State == nodestatus.StateFailed {
			return &JoinError{Report: *r, Log: m.Compute.Log(ctx, name)}
		}
		if log := m.Compute.Log(ctx, name); log != "" {
			return fmt.Errorf("machine %s stopped before its node was Ready; last lines of its log:\n%s", name, log)
		}
		return fmt.Errorf("machine %s stopped before its node was Ready", name)
	}
	return nil
}

// ActionError is a failure the user acts on: Summary names it (a diagnostic's summary), Remedy
// says what to do. Its message is Err's.
type ActionError struct {
	Summary, Remedy string
	Err             error
}

func (e *ActionError) Error() string { return e.Err.Error() }
func (e *ActionError) Unwrap() error { return e.Err }

// progress says where each pending node's join stands.
func (m *Manager) progress(ctx context.Context, s Spec, pending []string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	reports, _ := m.clusterReports(ctx, s)
	local := m.Compute.Reports(ctx, pending)
	parts := make([]string, 0, len(pending))
	for _, name := range pending {
		phase := "not started"
		for _, r := range []*nodestatus.Report{reports[name], local[name]} {
			if r != nil && r.Phase != "" {
				phase = "in phase " + r.Phase
				break
			}
		}
		parts = append(parts, name+" "+phase)
	}
	return strings.Join(parts, "; ")
}

// maxDiagnosed is how many machines that did not join in time a wait diagnoses.
const maxDiagnosed = 3

// JoinError is a node that failed to join.
type JoinError struct {
	Report nodestatus.Report
	Log    string
	// Diagnosis is the machine's diagnostics, when they could be fetched.
	Diagnosis *Diagnosis
}

// Detail is the error's message for the user: the failure, the last lines of the machine's log
// and, at the end, the diagnostics summary with where the full bundle is.
func (e *JoinError) Detail() string {
	msg := e.Error()
	if e.Log != "" {
		msg += "\n\nLast lines of the node's log:\n" + e.Log
	}
	if d := e.Diagnosis.Detail(e.Report.Node); d != "" {
		msg += "\n\n" + d
	}
	return msg
}

func (e *JoinError) Error() string {
	msg := e.Report.Failure()
	if info, ok := nodestatus.Lookup(e.Report.Code); ok {
		msg += " — " + info.Remedy
	}
	return msg
}
