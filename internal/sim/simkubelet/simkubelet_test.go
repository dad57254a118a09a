package simkubelet

import (
	"context"
	"io"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// The simulated kubelet's status update keeps the conditions other writers set on the Node
// (node-problem-detector's, nodeboot's), as the kubelet does, and sets its own.
func TestStatusKeepsOtherConditions(t *testing.T) {
	ctx := context.Background()
	foreign := corev1.NodeCondition{Type: "KubewinNetworkReady", Status: corev1.ConditionFalse, Reason: "NetworkDrift",
		Message: "HNS network lost"}
	c := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "win1"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{foreign}}})
	k := &Kubelet{Client: c, Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "win1"}}, NodeIP: netip.MustParseAddr("10.0.0.4"), MaxPods: 110,
		Out: io.Discard}
	if err := k.updateStatus(ctx); err != nil {
		t.Fatal(err)
	}
	node, err := c.CoreV1().Nodes().Get(ctx, "win1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var kept, ready bool
	for _, cond := range node.Status.Conditions {
		kept = kept || (cond.Type == foreign.Type && cond.Reason == foreign.Reason && cond.Message == foreign.Message)
		ready = ready || (cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue)
	}
	if !kept || !ready {
		t.Errorf("conditions after the kubelet's status update: %+v", node.Status.Conditions)
	}
}

// With an external cloud provider the addresses it set stay (the kubelet's NodeAddress setter:
// "provider set addresses should take precedence"); without one, the kubelet's own are written.
func TestExternalKubeletKeepsProviderAddresses(t *testing.T) {
	ctx := context.Background()
	cloud := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.240.0.7"}, {Type: corev1.NodeHostName, Address: "agent"}}
	for _, external := range []bool{true, false} {
		c := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "agent"}, Status: corev1.NodeStatus{Addresses: cloud}})
		k := &Kubelet{Client: c, Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "agent"}}, NodeIP: netip.MustParseAddr("10.0.0.4"),
			MaxPods: 110, Out: io.Discard, ExternalCloudProvider: external}
		if err := k.updateStatus(ctx); err != nil {
			t.Fatal(err)
		}
		node, err := c.CoreV1().Nodes().Get(ctx, "agent", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if kept := node.Status.Addresses[0].Address == "10.240.0.7"; kept != external {
			t.Errorf("external cloud provider %v: addresses %v", external, node.Status.Addresses)
		}
	}
}
