package simkubelet

import (
	"context"
	"errors"
	"io"
	"net/netip"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	kubeletapis "k8s.io/kubelet/pkg/apis"
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

// A pod whose RuntimeClass names a handler the node's runtime cannot run stays Pending with the
// kubelet's FailedCreatePodSandBox event, as on a real node; one it can run is Running. A
// RuntimeClass that no longer exists is refused the same way.
func TestSandboxRefusedHandler(t *testing.T) {
	rc := func(name, handler string) *nodev1.RuntimeClass {
		return &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Handler: handler}
	}
	for _, tc := range []struct {
		name         string
		runtime      SandboxRuntime
		runtimeClass string
		refusal      string // "" when the pod runs
	}{
		{"no RuntimeClass", WindowsContainerd(false), "", ""},
		{"process handler", WindowsContainerd(false), "process", ""},
		{"hyperv on a Hyper-V node", WindowsContainerd(true), "windows-hyperv", ""},
		{"hyperv without the feature", WindowsContainerd(false), "windows-hyperv", "a required feature is not installed"},
		{"unknown handler", WindowsContainerd(true), "kata",
			`Failed to create pod sandbox: rpc error: code = Unknown desc = failed to get sandbox runtime: no runtime for "kata-qemu" is configured`},
		{"missing RuntimeClass", WindowsContainerd(true), "deleted", `Failed to create pod sandbox: runtimeclasses.node.k8s.io "deleted" not found`},
		{"docker, hyperv", WindowsDocker(), "windows-hyperv", `RuntimeHandler "runhcs-wcow-hypervisor" not supported`},
		{"linux, runc", LinuxContainerd(), "runc", ""},
		{"linux, hyperv", LinuxContainerd(), "windows-hyperv", `no runtime for "runhcs-wcow-hypervisor" is configured`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u1"},
				Spec: corev1.PodSpec{NodeName: "win1", Containers: []corev1.Container{{Name: "iis", Image: "iis"}}}}
			if tc.runtimeClass != "" {
				pod.Spec.RuntimeClassName = &tc.runtimeClass
			}
			c := fake.NewClientset(pod, rc("process", "runhcs-wcow-process"), rc("windows-hyperv", "runhcs-wcow-hypervisor"),
				rc("kata", "kata-qemu"), rc("runc", "runc"))
			var out strings.Builder
			k := &Kubelet{Client: c, Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "win1"}}, NodeIP: netip.MustParseAddr("10.0.0.4"),
				Out: &out, Sandbox: tc.runtime}
			k.syncPod(ctx, pod)
			got, err := c.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			events, err := c.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if tc.refusal == "" {
				if got.Status.Phase != corev1.PodRunning || len(events.Items) != 0 {
					t.Fatalf("phase %s, events %v; want Running and none", got.Status.Phase, events.Items)
				}
				return
			}
			if got.Status.Phase != corev1.PodPending || got.Status.ContainerStatuses[0].State.Waiting == nil ||
				got.Status.ContainerStatuses[0].State.Waiting.Reason != "ContainerCreating" {
				t.Fatalf("status %+v; want Pending, ContainerCreating", got.Status)
			}
			if len(events.Items) != 1 || events.Items[0].Reason != "FailedCreatePodSandBox" || events.Items[0].Type != corev1.EventTypeWarning ||
				!strings.Contains(events.Items[0].Message, tc.refusal) {
				t.Fatalf("events %+v; want one FailedCreatePodSandBox saying %q", events.Items, tc.refusal)
			}
			// The same refusal at the next sync is not reported again.
			k.syncPod(ctx, got)
			if events, _ = c.CoreV1().Events("default").List(ctx, metav1.ListOptions{}); len(events.Items) != 1 {
				t.Errorf("%d events after a second sync, want 1", len(events.Items))
			}
		})
	}
}

// The lease is renewed as the kubelet's lease controller renews it: one update of the Lease last
// written, no read; a conflict (another writer) makes it read the Lease again.
func TestLeaseRenewedWithoutReads(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "win1", UID: "u1"}})
	k := &Kubelet{Client: c, Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "win1"}}, Out: io.Discard}
	if err := k.renewLease(ctx); err != nil {
		t.Fatal(err)
	}
	c.ClearActions()
	for range 3 {
		if err := k.renewLease(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var verbs []string
	for _, a := range c.Actions() {
		verbs = append(verbs, a.GetVerb()+" "+a.GetResource().Resource)
	}
	if strings.Join(verbs, ",") != "update leases,update leases,update leases" {
		t.Errorf("three renewals made %v, want three updates and no read", verbs)
	}
	l, err := c.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "win1", metav1.GetOptions{})
	if err != nil || l.OwnerReferences[0].UID != "u1" || l.Spec.RenewTime == nil {
		t.Fatalf("lease %+v: %v", l, err)
	}
	// Another writer changed the Lease: the update conflicts once, and the Lease is read again.
	conflicted := false
	c.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if conflicted {
			return false, nil, nil
		}
		conflicted = true
		return true, nil, apierrors.NewConflict(coordinationv1.Resource("leases"), "win1", errors.New("the object has been modified"))
	})
	c.ClearActions()
	if err := k.renewLease(ctx); err != nil {
		t.Fatal(err)
	}
	verbs = nil
	for _, a := range c.Actions() {
		verbs = append(verbs, a.GetVerb()+" "+a.GetResource().Resource)
	}
	if strings.Join(verbs, ",") != "update leases,get leases,update leases" {
		t.Errorf("a renewal after a conflict made %v, want the update, a read and an update", verbs)
	}
}

// A kubelet that finds its Node registered brings the default labels it has values for to those
// values, as the kubelet's registration does (updateDefaultLabels); other labels stay.
func TestRegisteredNodeDefaultLabels(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "win1", Labels: map[string]string{
		corev1.LabelHostname: "WIN1.example", corev1.LabelOSStable: "windows", "example.com/team": "a",
	}}})
	k := &Kubelet{Client: c, Out: io.Discard, Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "win1", Labels: map[string]string{
		corev1.LabelHostname: "win1", corev1.LabelOSStable: "windows", corev1.LabelArchStable: "amd64", kubeletapis.LabelOS: "windows",
	}}}}
	if err := k.register(ctx); err != nil {
		t.Fatal(err)
	}
	node, err := c.CoreV1().Nodes().Get(ctx, "win1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{corev1.LabelHostname: "win1", corev1.LabelOSStable: "windows", corev1.LabelArchStable: "amd64",
		kubeletapis.LabelOS: "windows", "example.com/team": "a"}
	if len(node.Labels) != len(want) {
		t.Errorf("labels %v, want %v", node.Labels, want)
	}
	for k, v := range want {
		if node.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, node.Labels[k], v)
		}
	}
}
