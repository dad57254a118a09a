package join

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The node's own conditions, which `nodeboot run` publishes on its Node beside the kubelet's, in
// node-problem-detector's manner (a type of its own per problem, with reason and message; the
// kubelet keeps the conditions it does not own: pkg/kubelet/nodestatus/setters.go updates its
// own types only).
const (
	// ConditionNetworkReady: the HNS network, the l2bridge host endpoint and the way to the
	// peers are as the boot made them, or were repaired.
	ConditionNetworkReady corev1.NodeConditionType = "KubewinNetworkReady"
	// ConditionDNSReady: the cluster DNS service resolves the API service's name.
	ConditionDNSReady corev1.NodeConditionType = "KubewinDNSReady"
	// ConditionRuntimeReady: the container runtime answers and the node services run.
	ConditionRuntimeReady corev1.NodeConditionType = "KubewinRuntimeReady"
)

// conditionTypes are the node's own condition types, in the order they are published.
var conditionTypes = []corev1.NodeConditionType{ConditionNetworkReady, ConditionDNSReady, ConditionRuntimeReady}

// heartbeatPeriod is how often unchanged conditions are published again, as
// node-problem-detector does (--k8s-exporter-heartbeat-period, default 5m0s), so that a stale
// lastHeartbeatTime shows an agent that stopped.
const heartbeatPeriod = 5 * time.Minute

// conditions are the node's conditions as last set; dirty says they differ from what was
// last published.
type conditions struct {
	list  []corev1.NodeCondition
	dirty bool
}

// seed starts from the conditions the Node has (one read of the node's own Node), so that a
// restarted nodeboot keeps their transition times.
func (c *conditions) seed(ctx context.Context, n *Node) {
	client, err := n.NodeClient()
	if err != nil {
		return
	}
	node, err := client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	if err != nil {
		return
	}
	for _, t := range conditionTypes {
		for _, have := range node.Status.Conditions {
			if have.Type == t {
				c.list = append(c.list, have)
			}
		}
	}
}

func (c *conditions) get(t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range c.list {
		if c.list[i].Type == t {
			return &c.list[i]
		}
	}
	return nil
}

// set records a condition; its transition time changes with its status only.
func (c *conditions) set(t corev1.NodeConditionType, status corev1.ConditionStatus, reason, message string) {
	now := metav1.Now()
	have := c.get(t)
	if have == nil {
		c.list = append(c.list, corev1.NodeCondition{Type: t, Status: status, Reason: reason, Message: message, LastHeartbeatTime: now,
			LastTransitionTime: now})
		c.dirty = true
		return
	}
	if have.Status == status && have.Reason == reason && have.Message == message {
		return
	}
	if have.Status != status {
		have.LastTransitionTime = now
	}
	have.Status, have.Reason, have.Message = status, reason, message
	c.dirty = true
}

// publish patches the conditions into the Node's status when they changed or the heartbeat is
// due, with the node's own credential: the Node authorizer and NodeRestriction let a node
// change its own Node's status only. The strategic merge patch merges conditions by type, so
// the kubelet's stay. The health file follows. The conditions are logged when they changed, and
// at the first publication.
func (k *keeper) publish(ctx context.Context) error {
	if !k.conds.dirty && time.Since(k.published) < heartbeatPeriod {
		return nil
	}
	c, err := k.n.NodeClient()
	if err != nil {
		return err
	}
	now := metav1.Now()
	for i := range k.conds.list {
		k.conds.list[i].LastHeartbeatTime = now
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": k.conds.list}})
	if err != nil {
		return err
	}
	if _, err := c.CoreV1().Nodes().PatchStatus(ctx, k.n.Name, patch); err != nil {
		return fmt.Errorf("publish the node's conditions on Node %s: %w", k.n.Name, err)
	}
	if k.conds.dirty || k.published.IsZero() {
		for _, cond := range k.conds.list {
			_, _ = fmt.Fprintf(k.n.Out, "[conditions] %s=%s %s: %s\n", cond.Type, cond.Status, cond.Reason, cond.Message)
		}
	}
	k.conds.dirty, k.published = false, now.Time
	k.health.Updated, k.health.Conditions = now.UTC(), k.conds.list
	return k.n.writeHealth(&k.health)
}

// Health is what `nodeboot run` last found of the node: its conditions and the repairs it
// made since it started, by kind (network, host, routes, overlay-peers, service/<name>). It is
// kept in health.json beside the join state, for `nodeboot status`.
type Health struct {
	Updated        time.Time              `json:"updated"`
	Conditions     []corev1.NodeCondition `json:"conditions"`
	Repairs        map[string]int         `json:"repairs,omitempty"`
	LastRepair     string                 `json:"lastRepair,omitempty"`
	LastRepairTime time.Time              `json:"lastRepairTime,omitzero"`
}

func (h *Health) total() int {
	t := 0
	for _, c := range h.Repairs {
		t += c
	}
	return t
}

func (n *Node) healthPath() string { return n.Paths.NodebootDir + `\health.json` }

func (n *Node) writeHealth(h *Health) error {
	b, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		return err
	}
	return n.Platform.WriteFile(n.healthPath(), append(b, '\n'))
}

// Health reads what `nodeboot run` last found of the node; ok is false when it has not run.
func (n *Node) Health() (h Health, ok bool, err error) {
	b, err := os.ReadFile(n.Platform.Path(n.healthPath()))
	if errors.Is(err, os.ErrNotExist) {
		return Health{}, false, nil
	}
	if err != nil {
		return Health{}, false, err
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return Health{}, false, fmt.Errorf("%s: %w", n.healthPath(), err)
	}
	return h, true, nil
}
