package pool

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-log/tflog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubewin/kubewin/internal/nodeaccess"
	"github.com/kubewin/kubewin/internal/nodestatus"
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

// NodeReady reports whether a Node is Ready.
func NodeReady(n *corev1.Node) bool {
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
	for _, cm := range list.Items {
		raw, ok := cm.Data[nodestatus.DataKey]
		if !ok {
			continue
		}
		var r nodestatus.Report
		if err := json.Unmarshal([]byte(raw), &r); err == nil {
			out[r.Node] = &r
		}
	}
	return out, nil
}

// waitReady waits until every named node is Ready, or fails naming the first that reports a
// failure, with its phase and code, or a machine that stopped. Each check costs one Node list,
// one report list and one backend list, whatever the number of nodes. The machines' own reports
// (a cloud serves them slowly, one machine at a time) are read only for nodes that have not
// reached the cluster after a while, and less and less often.
func (m *Manager) waitReady(ctx context.Context, s Spec, waiting []string) error {
	pending := slices.Clone(waiting)
	poll := m.Poll
	if poll == 0 {
		poll = 250 * time.Millisecond
	}
	localEvery := m.MachineReportsAfter
	if localEvery == 0 {
		localEvery = 5 * time.Second
	}
	nextLocal := time.Now().Add(localEvery)
	for {
		nodes, err := m.poolNodes(ctx, s)
		if err != nil {
			return err
		}
		pending = slices.DeleteFunc(pending, func(name string) bool {
			n, ok := nodes[name]
			if ok && NodeReady(n) {
				tflog.Debug(ctx, "node Ready", map[string]any{"node": name})
				return true
			}
			return false
		})
		if len(pending) == 0 {
			return nil
		}
		reports, err := m.clusterReports(ctx, s)
		if err != nil {
			return err
		}
		for _, name := range pending {
			if r := reports[name]; r != nil && r.State == nodestatus.StateFailed {
				return &JoinError{Report: *r, Log: m.Compute.Log(ctx, name)}
			}
		}
		machines, err := m.Compute.List(ctx)
		if err != nil {
			return fmt.Errorf("list the machines of pool %s: %w", s.Pool, err)
		}
		for _, mc := range machines {
			if slices.Contains(pending, mc.Name) && !mc.Running {
				// A machine that stopped will not become Ready: say why now, not at the timeout.
				if r := m.Compute.Reports(ctx, []string{mc.Name})[mc.Name]; r != nil && r.State == nodestatus.StateFailed {
					return &JoinError{Report: *r, Log: m.Compute.Log(ctx, mc.Name)}
				}
				return fmt.Errorf("machine %s stopped before its node was Ready; last lines of its log:\n%s", mc.Name, m.Compute.Log(ctx, mc.Name))
			}
		}
		if time.Now().After(nextLocal) {
			var unreported []string
			for _, name := range pending {
				if reports[name] == nil {
					unreported = append(unreported, name)
				}
			}
			local := m.Compute.Reports(ctx, unreported)
			for _, name := range unreported {
				if r := local[name]; r != nil && r.State == nodestatus.StateFailed {
					return &JoinError{Report: *r, Log: m.Compute.Log(ctx, name)}
				}
			}
			localEvery = min(2*localEvery, 30*time.Second)
			nextLocal = time.Now().Add(localEvery)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("nodes %s were not Ready in time: %s", strings.Join(pending, ", "), m.progress(context.WithoutCancel(ctx), s, pending))
		case <-time.After(poll):
		}
	}
}

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

// JoinError is a node that failed to join.
type JoinError struct {
	Report nodestatus.Report
	Log    string
}

func (e *JoinError) Error() string {
	msg := e.Report.Failure()
	if info, ok := nodestatus.Lookup(e.Report.Code); ok {
		msg += " — " + info.Remedy
	}
	return msg
}
