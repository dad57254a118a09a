package pool

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubewin/kubewin/internal/bootstraptoken"
	"github.com/kubewin/kubewin/internal/nodecmd"
	"github.com/kubewin/kubewin/internal/nodestatus"
)

// HealthCheck says when the pool replaces a node that stopped being Ready. It follows
// cluster-api's MachineHealthCheck (an unhealthy condition — Ready False or Unknown — with a
// timeout, and a bound on remediation: https://cluster-api.sigs.k8s.io/tasks/automated-machine-management/healthchecking)
// and AKS's node auto-repair (a node NotReady for 10 minutes is repaired, one node at a time:
// https://learn.microsoft.com/en-us/azure/aks/node-auto-repair).
type HealthCheck struct {
	// NotReadyTimeout is how long a node that joined may stay NotReady before it is drained and
	// replaced. Default: DefaultNotReadyTimeout.
	NotReadyTimeout time.Duration
	// MaxReplacements is the most NotReady nodes one reconcile replaces. Default:
	// DefaultMaxReplacements.
	MaxReplacements int
	// JoinRetries is how many machines, in all, one reconcile replaces because their join
	// failed with a code another machine is likely not to fail with (nodestatus.MachineLevel);
	// zero fails at the first failure.
	JoinRetries int
}

// Defaults of a HealthCheck: AKS's 10 minutes, one node at a time.
const (
	DefaultNotReadyTimeout = 10 * time.Minute
	DefaultMaxReplacements = 1
)

func (h HealthCheck) timeout() time.Duration {
	return cmp.Or(h.NotReadyTimeout, DefaultNotReadyTimeout)
}

func (h HealthCheck) bound() int { return cmp.Or(h.MaxReplacements, DefaultMaxReplacements) }

// verdict is what a reconcile does with a member of the pool.
type verdict int

const (
	// joining: its join runs; the reconcile waits for it.
	joining verdict = iota
	// ready: a Ready node.
	ready
	// kept: NotReady within the timeout, or past it beyond the bound; it counts as a node of
	// the pool and is left alone.
	kept
	// replaced: NotReady past the timeout; drained and replaced, new node first.
	replaced
	// removed: its machine stopped or is gone, or its join failed; drained and removed, then
	// replaced by the count.
	removed
)

// finding is a member's verdict, and for one that is not Ready, why.
type finding struct {
	verdict
	// state says what is wrong; action what the reconcile does about it.
	state, action string
	// unreachable is a member whose kubelet is gone: its drain does not wait for its pods to
	// terminate (drain.Options.Unreachable).
	unreachable bool
	since       time.Time
}

// assess decides what a reconcile at now does with each member. Join reports come from the
// cluster (one request for the pool), else from the machines themselves.
func (m *Manager) assess(ctx context.Context, s Spec, members []member, now time.Time) (map[string]finding, error) {
	out := make(map[string]finding, len(members))
	notReady := names(members, func(x member) bool { return x.machine && x.Running && !x.ready() })
	reports := map[string]*nodestatus.Report{}
	if len(notReady) > 0 {
		var err error
		if reports, err = m.clusterReports(ctx, s); err != nil {
			return nil, err
		}
		var unreported []string
		for _, name := range notReady {
			if reports[name] == nil {
				unreported = append(unreported, name)
			}
		}
		if len(unreported) > 0 {
			for name, r := range m.Compute.Reports(ctx, unreported) {
				if r != nil {
					reports[name] = r
				}
			}
		}
	}
	tokenLive := true
	if slices.ContainsFunc(members, func(x member) bool { return x.machine && x.Running && !x.ready() && needsToken(x, reports[x.Name]) }) {
		var err error
		if tokenLive, err = bootstraptoken.Live(ctx, m.Client, s.Pool, now); err != nil {
			return nil, err
		}
	}
	h := s.Health
	var candidates []string
	for _, x := range members {
		r := reports[x.Name]
		switch {
		case !x.machine:
			out[x.Name] = finding{verdict: removed, unreachable: true, state: "its machine is gone",
				action: "the next apply deletes its Node object (its pods evicted first) and adds a machine in its place"}
		case !x.Running:
			out[x.Name] = finding{verdict: removed, unreachable: true, state: "its machine stopped",
				action: "the next apply evicts its pods, deletes the machine and adds one in its place"}
		case x.ready():
			out[x.Name] = finding{verdict: ready}
		case r != nil && r.State == nodestatus.StateFailed:
			f := finding{verdict: removed, unreachable: true, state: "its join failed: " + r.Failure(),
				action: "the next apply deletes the machine and adds one in its place"}
			if r.Code == nodestatus.CodeTokenNotFound {
				f.state += " (a machine added outside Terraform — by the portal, a reimage, automatic repairs or an autoscaler — finds " +
					"the bootstrap token of its custom data deleted)"
			}
			out[x.Name] = f
		case (r == nil || r.State != nodestatus.StateDone) && needsToken(x, r) && !tokenLive:
			out[x.Name] = finding{verdict: removed, unreachable: true,
				state: "it has not joined, and the pool has no bootstrap token left to join with " +
					"(the apply that created it was interrupted, or the token expired)",
				action: "the next apply deletes the machine and adds one in its place"}
		case r == nil || r.State != nodestatus.StateDone:
			out[x.Name] = finding{verdict: joining, state: "it is joining", action: "the next apply waits until it is Ready"}
		case neverReady(x.Node) && now.Sub(r.Updated) < h.timeout():
			// The kubelet starts at the end of the join: until it posts the node's first status,
			// a node whose join is done (an apply interrupted then, say) is still joining.
			out[x.Name] = finding{verdict: joining, state: "its join is done and its kubelet has not posted the node's first status yet",
				action: "the next apply waits until it is Ready"}
		default:
			since := notReadySince(x.Node, r)
			f := finding{verdict: kept, since: since, unreachable: unreachable(x.Node)}
			f.state = fmt.Sprintf("NotReady for %s (%s)", now.Sub(since).Round(time.Second), notReadyWhy(x.Node))
			if now.Sub(since) < h.timeout() {
				f.action = fmt.Sprintf("it is kept: the pool replaces a node NotReady for %s (health_check.not_ready_timeout), "+
					"after cordoning and draining it", h.timeout())
			} else {
				candidates = append(candidates, x.Name)
			}
			out[x.Name] = f
		}
	}
	// The nodes NotReady longest go first, at most MaxReplacements of them.
	slices.SortStableFunc(candidates, func(a, b string) int { return out[a].since.Compare(out[b].since) })
	for i, name := range candidates {
		f := out[name]
		if i < h.bound() {
			f.verdict = replaced
			f.action = fmt.Sprintf("the next apply adds a node in its place, cordons it, drains it through the Eviction API and deletes its machine "+
				"(it has been NotReady longer than health_check.not_ready_timeout, %s)", h.timeout())
		} else {
			f.action = fmt.Sprintf("it is kept for now: an apply replaces at most %d NotReady nodes (health_check.max_replacements); "+
				"a later apply replaces it", h.bound())
		}
		out[name] = f
	}
	return out, nil
}

// tokenPhases are nodeboot's join phases that use the bootstrap token: discovery checks
// cluster-info's signature for it, the TLS bootstrap requests the kubelet's certificate with it
// (nodeboot/internal/join/phases.go); later phases use the node's own credential.
var tokenPhases = []string{"preflight", "discovery", "tlsbootstrap"}

// needsToken reports whether a member that has not joined still needs the pool's bootstrap token:
// it has no Node yet and, as far as its report says, has not passed the TLS bootstrap.
func needsToken(x member, r *nodestatus.Report) bool {
	return x.Node == nil && (r == nil || r.State != nodestatus.StateDone && (r.Phase == "" || slices.Contains(tokenPhases, r.Phase)))
}

// notReadySince is when a node that joined was last seen to stop being Ready: its Ready
// condition's last transition, as MachineHealthCheck measures its conditions, or the end of its
// join when that is later (a node that re-joined).
func notReadySince(n *corev1.Node, r *nodestatus.Report) time.Time {
	since := r.Updated
	if n == nil {
		return since
	}
	t := n.CreationTimestamp.Time
	if c := readyCondition(n); c != nil && !c.LastTransitionTime.IsZero() {
		t = c.LastTransitionTime.Time
	}
	if t.After(since) {
		return t
	}
	return since
}

func readyCondition(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// neverReady reports whether a node's kubelet has never posted its status: the Node has no
// Ready condition, or the node lifecycle controller's for a kubelet that never posted
// (NodeStatusNeverUpdated, kubernetes pkg/controller/nodelifecycle/node_lifecycle_controller.go).
func neverReady(n *corev1.Node) bool {
	if n == nil {
		return false
	}
	c := readyCondition(n)
	return c == nil || c.Status == corev1.ConditionUnknown && c.Reason == "NodeStatusNeverUpdated"
}

// unreachable reports whether a node's kubelet stopped posting its status: its Ready condition
// is Unknown (the node lifecycle controller's verdict) or missing, or its Node is gone.
func unreachable(n *corev1.Node) bool {
	if n == nil {
		return true
	}
	c := readyCondition(n)
	return c == nil || c.Status == corev1.ConditionUnknown
}

// notReadyWhy is the reason a NotReady node gives.
func notReadyWhy(n *corev1.Node) string {
	c := (*corev1.NodeCondition)(nil)
	if n != nil {
		c = readyCondition(n)
	}
	switch {
	case n == nil:
		return "its Node object is gone"
	case c == nil:
		return "it reports no Ready condition"
	case c.Status == corev1.ConditionUnknown:
		return "its kubelet stopped posting node status"
	case c.Status == corev1.ConditionTrue && !NodeReady(n):
		return "its cloud provider has not initialized it: it keeps the " + nodecmd.TaintExternalCloudProvider +
			" taint until the cloud provider's node manager (cloud-node-manager) on it has"
	case c.Message != "":
		return c.Reason + ": " + c.Message
	default:
		return cmp.Or(c.Reason, "Ready is "+string(c.Status))
	}
}

// Finding is a machine or Node of the pool that is not a Ready node, and what the next apply
// does with it.
type Finding struct {
	Node string
	// State says what is wrong ("NotReady for 3m0s (its kubelet stopped posting node status)").
	State string
	// Action says what the next apply does.
	Action string
	// Kept is whether the node stays a node of the pool (counted by node_count) through the next
	// apply.
	Kept bool
}

// Health returns the pool's members that are not Ready nodes, in name order, with what the
// next apply does with each.
func (m *Manager) Health(ctx context.Context, s Spec) ([]Finding, error) {
	members, err := m.observe(ctx, s)
	if err != nil {
		return nil, err
	}
	verdicts, err := m.assess(ctx, s, members, time.Now())
	if err != nil {
		return nil, err
	}
	var out []Finding
	for _, x := range members {
		if f := verdicts[x.Name]; f.verdict != ready {
			out = append(out, Finding{Node: x.Name, State: f.state, Action: f.action, Kept: f.verdict == kept})
		}
	}
	return out, nil
}
