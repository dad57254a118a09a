package join

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/nodeboot/internal/platform/sim"
	"github.com/kubewin/kubewin/nodeboot/internal/platform/windows"
	"github.com/kubewin/kubewin/nodeboot/internal/platform/windows/hcnjson"
	"github.com/kubewin/kubewin/nodeboot/internal/platform/windows/winfake"
)

// setDNS gives the node's machine a cluster DNS that answers the API service's name as a
// working one does, with the kubernetes Service's ClusterIP (the first address of the service
// CIDR), or, broken, times out.
func setDNS(t *testing.T, n *Node, broken bool) {
	t.Helper()
	p, ok := n.Platform.(*sim.Platform)
	if !ok {
		t.Fatalf("node %s is not on a simulated machine", n.Name)
	}
	want := "kubernetes.default.svc." + n.Config.Cluster.ClusterDomain
	p.SetDNS(func(_ context.Context, server netip.AddrPort, host string) ([]netip.Addr, error) {
		if broken {
			return nil, fmt.Errorf("read udp %s: i/o timeout", server)
		}
		if host != want || server != netip.MustParseAddrPort("10.96.0.10:53") {
			return nil, fmt.Errorf("lookup %s on %s: no such host", host, server)
		}
		return []netip.Addr{netip.MustParseAddr("10.96.0.1")}, nil
	})
}

// condition is the node's condition of type typ as the API server has it.
func condition(t *testing.T, n *Node, typ corev1.NodeConditionType) (corev1.NodeCondition, []corev1.NodeCondition) {
	t.Helper()
	node, err := admin(t).CoreV1().Nodes().Get(context.Background(), n.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range node.Status.Conditions {
		if c.Type == typ {
			return c, node.Status.Conditions
		}
	}
	return corev1.NodeCondition{}, node.Status.Conditions
}

func waitCondition(t *testing.T, n *Node, typ corev1.NodeConditionType, status corev1.ConditionStatus, reason string) corev1.NodeCondition {
	t.Helper()
	var c corev1.NodeCondition
	var all []corev1.NodeCondition
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		c, all = condition(t, n, typ)
		return c.Status == status && (reason == "" || c.Reason == reason), nil
	}); err != nil {
		t.Fatalf("Node %s has no condition %s=%s %s: %+v\n%s", n.Name, typ, status, reason, all, output(t, n))
	}
	return c
}

// conditionWatch records every state of a Node's conditions the API server sends, so that a test
// sees a condition that held only for a moment.
type conditionWatch struct {
	mu   sync.Mutex
	seen []corev1.NodeCondition
}

// watchConditions watches node n from now until the test ends.
func watchConditions(t *testing.T, n *Node) *conditionWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := admin(t).CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + n.Name})
	if err != nil {
		t.Fatal(err)
	}
	cw := &conditionWatch{}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			if node, ok := ev.Object.(*corev1.Node); ok {
				cw.mu.Lock()
				cw.seen = append(cw.seen, node.Status.Conditions...)
				cw.mu.Unlock()
			}
		}
	}()
	return cw
}

// waitSeen waits until the API server has sent the condition typ with that status and reason and
// a message holding msg.
func (cw *conditionWatch) waitSeen(t *testing.T, typ corev1.NodeConditionType, status corev1.ConditionStatus, reason, msg string) {
	t.Helper()
	match := func(c corev1.NodeCondition) bool {
		return c.Type == typ && c.Status == status && c.Reason == reason && strings.Contains(c.Message, msg)
	}
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		cw.mu.Lock()
		defer cw.mu.Unlock()
		return slices.ContainsFunc(cw.seen, match), nil
	}); err != nil {
		cw.mu.Lock()
		defer cw.mu.Unlock()
		t.Errorf("the API server never had %s=%s %s %q; it had: %+v", typ, status, reason, msg, cw.seen)
	}
}

// waitRepaired waits until `nodeboot run` has counted a repair of kind more than before.
func waitRepaired(t *testing.T, n *Node, kind string, before int) Health {
	t.Helper()
	var h Health
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		var err error
		h, _, err = n.Health()
		return err == nil && h.Repairs[kind] > before, nil
	}); err != nil {
		t.Fatalf("no %s repair counted: %+v\n%s", kind, h, output(t, n))
	}
	return h
}

func repairs(t *testing.T, n *Node, kind string) int {
	t.Helper()
	h, _, err := n.Health()
	if err != nil {
		t.Fatal(err)
	}
	return h.Repairs[kind]
}

// peer is a node of the cluster the node under test routes to: on host-gateway through its
// InternalIP, on overlay through the VTEP its flannel annotations publish.
func peer(t *testing.T, n *Node) *corev1.Node {
	t.Helper()
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "peer-" + n.Name, Annotations: map[string]string{
		AnnotationKubeSubnetManager: "true", AnnotationBackendType: "vxlan", AnnotationPublicIP: "127.9.9.7",
		AnnotationBackendData: `{"VNI":4096,"VtepMAC":"5a:1e:ab:cd:00:07"}`,
	}}, Spec: corev1.NodeSpec{PodCIDR: "10.244.249.0/24", PodCIDRs: []string{"10.244.249.0/24"}}}
	if _, err := admin(t).CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := admin(t).CoreV1().Nodes().Delete(context.Background(), node.Name, metav1.DeleteOptions{}); err != nil {
			t.Error(err)
		}
	})
	// The node controllers change a new Node at once: its status is set on the latest version.
	var updated *corev1.Node
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := admin(t).CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.9.9.7"}}
		updated, err = admin(t).CoreV1().Nodes().UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return updated
}

// remoteSubnets are the overlay network's remote subnet routes, by destination.
func remoteSubnets(st winfake.State, network string) []string {
	var out []string
	if nw := st.Network(network); nw != nil {
		for _, p := range nw.Policies {
			var s hcnjson.RemoteSubnetRoutePolicySetting
			if p.Type == hcnjson.RemoteSubnetRoute && json.Unmarshal(p.Settings, &s) == nil {
				out = append(out, s.DestinationPrefix)
			}
		}
	}
	return out
}

// waitMachine waits until cond holds on the node's simulated machine.
func waitMachine(t *testing.T, n *Node, what string, cond func(winfake.State) bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return cond(windowsState(t, n)), nil
	}); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, output(t, n))
	}
}

// `nodeboot run` repairs what a reboot, an HNS restart or a Windows update takes from a running
// node, on l2bridge, host-gateway and overlay: the HNS pod network (made again with the boot's
// steps, kube-proxy restarted around it), the l2bridge host endpoint, the routes to the metadata
// endpoints, a host-gateway route, the
// overlay's remote subnets, and a killed kube-proxy. Each repair is counted, and the node's
// conditions on the real API server go False while the network is broken and True again, with
// the kubelet's own conditions kept beside them; a broken cluster DNS sets KubewinDNSReady False
// until it answers again.
func TestDriftRepaired(t *testing.T) {
	for _, mode := range []v1alpha1.NetworkMode{v1alpha1.NetworkModeL2Bridge, v1alpha1.NetworkModeHostGateway, v1alpha1.NetworkModeOverlay} {
		t.Run(string(mode), func(t *testing.T) {
			n := newNode(t, nodeOpts{mode: mode})
			n.CheckInterval = 100 * time.Millisecond
			setDNS(t, n, false)
			routes := mode != v1alpha1.NetworkModeL2Bridge
			var via *corev1.Node
			if routes {
				via = peer(t, n)
			}
			fake := simWindows(t, n)
			stop := serve(t, n)
			defer stop()
			network := n.Config.Network.Name
			for _, typ := range conditionTypes {
				waitCondition(t, n, typ, corev1.ConditionTrue, "")
			}
			// The kubelet posts Ready on its own schedule, racing nodeboot's first report.
			waitCondition(t, n, corev1.NodeReady, corev1.ConditionTrue, "")
			if routes {
				waitMachine(t, n, "the peer's route is programmed", func(st winfake.State) bool { return peerProgrammed(st, n, via) })
			}

			// The pod network is lost: it is made again, kube-proxy restarted around it, the
			// condition False then True.
			mark := fake.Mark()
			lost := repairs(t, n, RepairNetwork)
			cw := watchConditions(t, n)
			if err := fake.LoseNetwork(network); err != nil {
				t.Fatal(err)
			}
			h := waitRepaired(t, n, RepairNetwork, lost)
			st := windowsState(t, n)
			assertNetworkReady(t, n, st)
			ops := fake.Log()[mark:]
			if !before(ops, call("scm", "Stop", "kube-proxy"), call("hns", "CreateNetwork", network)) ||
				!before(ops, call("hns", "CreateNetwork", network), call("scm", "Start", "kube-proxy")) {
				t.Errorf("kube-proxy was not stopped before the network was made again and started after:\n%s", strings.Join(changed(ops), "\n"))
			}
			if s := st.Service("kube-proxy"); s == nil || s.State != windows.Running {
				t.Errorf("kube-proxy after the repair: %+v", s)
			}
			// The Node said so, then that it was repaired, with the count.
			cw.waitSeen(t, ConditionNetworkReady, corev1.ConditionFalse, "NetworkDrift", "HNS network "+network+" is missing")
			c := waitCondition(t, n, ConditionNetworkReady, corev1.ConditionTrue, "NetworkRepaired")
			if !strings.Contains(c.Message, "HNS network "+network+" is missing") || !strings.Contains(c.Message, "repairs since nodeboot started") {
				t.Errorf("condition message %q", c.Message)
			}
			// nodeboot's reports since the kubelet posted Ready merged beside it.
			if _, all := condition(t, n, corev1.NodeReady); !slices.ContainsFunc(all, func(c corev1.NodeCondition) bool {
				return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
			}) {
				t.Errorf("the kubelet's Ready condition is gone beside nodeboot's: %+v", all)
			}
			if h.LastRepair == "" || h.total() < 1 {
				t.Errorf("health %+v", h)
			}
			if routes {
				waitMachine(t, n, "the peer's route is programmed again", func(st winfake.State) bool { return peerProgrammed(st, n, via) })
			}

			switch mode {
			case v1alpha1.NetworkModeL2Bridge, v1alpha1.NetworkModeHostGateway:
				lost = repairs(t, n, RepairHost)
				if err := fake.LoseEndpoint(network + "_ep"); err != nil {
					t.Fatal(err)
				}
				waitRepaired(t, n, RepairHost, lost)
				assertNetworkReady(t, n, windowsState(t, n))
			}
			// Another program's network takes the routes to the metadata endpoints and leaves
			// this node's network as it was (hcsshim issue 299): they are put back.
			lost = repairs(t, n, RepairHost)
			imds := netip.MustParsePrefix("169.254.169.254/32")
			if err := fake.LoseRoute(imds); err != nil {
				t.Fatal(err)
			}
			waitRepaired(t, n, RepairHost, lost)
			waitMachine(t, n, "the route to the instance metadata service is back", func(st winfake.State) bool {
				return slices.ContainsFunc(st.Routes, func(r winfake.Route) bool { return r.Destination == imds && r.Store == windows.ActiveStore })
			})
			switch mode {
			case v1alpha1.NetworkModeHostGateway:
				lost = repairs(t, n, RepairRoutes)
				if err := fake.LoseRoute(netip.MustParsePrefix(via.Spec.PodCIDR)); err != nil {
					t.Fatal(err)
				}
				waitRepaired(t, n, RepairRoutes, lost)
				waitMachine(t, n, "the lost route is back", func(st winfake.State) bool { return peerProgrammed(st, n, via) })
			case v1alpha1.NetworkModeOverlay:
				lost = repairs(t, n, RepairPeers)
				// HNS loses the network's remote subnet policies (no winfake call: Edit stands
				// for HNS here).
				if err := fake.Edit(func(st *winfake.State) {
					nw := st.Network(network)
					for i := range st.Networks {
						if st.Networks[i].Id == nw.Id {
							st.Networks[i].Policies = slices.DeleteFunc(st.Networks[i].Policies, func(p hcnjson.NetworkPolicy) bool {
								return p.Type == hcnjson.RemoteSubnetRoute
							})
						}
					}
				}); err != nil {
					t.Fatal(err)
				}
				waitRepaired(t, n, RepairPeers, lost)
				waitMachine(t, n, "the remote subnet is back", func(st winfake.State) bool { return peerProgrammed(st, n, via) })
			}

			// kube-proxy is killed: nodeboot starts it again before the service manager's
			// recovery (10 s later) would.
			lost = repairs(t, n, repairServicePf+"kube-proxy")
			mark = fake.Mark()
			fake.Failed("kube-proxy", winfake.Crash)
			waitRepaired(t, n, repairServicePf+"kube-proxy", lost)
			if !slices.ContainsFunc(fake.Log()[mark:], call("scm", "Start", "kube-proxy")) {
				t.Errorf("kube-proxy was not started by nodeboot:\n%s", strings.Join(changed(fake.Log()[mark:]), "\n"))
			}
			waitCondition(t, n, ConditionRuntimeReady, corev1.ConditionTrue, "ServicesRestarted")

			// DNS breaks, then answers again.
			setDNS(t, n, true)
			c = waitCondition(t, n, ConditionDNSReady, corev1.ConditionFalse, "ClusterDNSFailed")
			if !strings.Contains(c.Message, "kubernetes.default.svc.cluster.local at 10.96.0.10:53") {
				t.Errorf("DNS condition message %q", c.Message)
			}
			setDNS(t, n, false)
			waitCondition(t, n, ConditionDNSReady, corev1.ConditionTrue, "ClusterDNSResolves")
		})
	}
}

// peerProgrammed reports whether the machine routes to the peer's pod CIDR: a kubewin route
// through its address (host-gateway) or a remote subnet (overlay).
func peerProgrammed(st winfake.State, n *Node, via *corev1.Node) bool {
	if n.Config.Network.Mode == v1alpha1.NetworkModeOverlay {
		return slices.Contains(remoteSubnets(st, n.Config.Network.Name), via.Spec.PodCIDR)
	}
	return slices.ContainsFunc(st.KubewinRoutes(), func(r winfake.Route) bool {
		return r.Destination.String() == via.Spec.PodCIDR && r.NextHop.String() == via.Status.Addresses[0].Address && r.Store == windows.ActiveStore
	})
}

// The node's credential (its kubelet client certificate) may publish conditions on its own
// Node only: the real API server's Node authorizer and NodeRestriction refuse it another's.
func TestConditionsOwnNodeOnly(t *testing.T) {
	ctx := context.Background()
	a, b := newNode(t, nodeOpts{}), newNode(t, nodeOpts{})
	for _, n := range []*Node{a, b} {
		if err := n.Join(ctx); err != nil {
			t.Fatalf("join %s: %v\n%s", n.Name, err, n.Out)
		}
	}
	c, err := a.NodeClient()
	if err != nil {
		t.Fatal(err)
	}
	patch := func(node string) error {
		body, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{{
			Type: ConditionNetworkReady, Status: corev1.ConditionFalse, Reason: "Test", Message: "set by " + a.Name,
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
		}}}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.CoreV1().Nodes().PatchStatus(ctx, node, body)
		return err
	}
	if err := patch(a.Name); err != nil {
		t.Errorf("node %s may not patch its own status: %v", a.Name, err)
	}
	err = patch(b.Name)
	if !apierrors.IsForbidden(err) {
		t.Fatalf("node %s patched Node %s's status: %v", a.Name, b.Name, err)
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) && !strings.Contains(status.Status().Message, a.Name) {
		t.Errorf("refusal does not name the node: %v", err)
	}
	if cond, _ := condition(t, b, ConditionNetworkReady); cond.Reason == "Test" {
		t.Errorf("Node %s has %s's condition", b.Name, a.Name)
	}
}
