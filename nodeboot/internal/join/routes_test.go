package join

import (
	"context"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/nodeboot/internal/platform"
)

func TestPeerRoutes(t *testing.T) {
	node := func(name, cidr, ip string) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{PodCIDR: cidr}}
		if ip != "" {
			n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}, {Type: corev1.NodeInternalIP, Address: ip}}
		}
		return n
	}
	got := PeerRoutes("b", []corev1.Node{
		node("c", "10.244.2.0/24", "10.240.0.6"),
		node("a", "10.244.0.0/24", "10.240.0.4"),
		node("b", "10.244.1.0/24", "10.240.0.5"), // self
		node("d", "", "10.240.0.7"),              // no pod CIDR yet
		node("e", "10.244.4.0/24", ""),           // no address yet
	})
	want := []platform.Route{
		{Destination: netip.MustParsePrefix("10.244.0.0/24"), NextHop: netip.MustParseAddr("10.240.0.4")},
		{Destination: netip.MustParsePrefix("10.244.2.0/24"), NextHop: netip.MustParseAddr("10.240.0.6")},
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("PeerRoutes = %v, want %v", got, want)
	}
}

// In host-gateway mode every running node routes to the others' pod CIDRs, and follows changes.
func TestHostGatewayRoutes(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := newNode(t, nodeOpts{mode: v1alpha1.NetworkModeHostGateway})
	b := newNode(t, nodeOpts{mode: v1alpha1.NetworkModeHostGateway})
	for _, n := range []*Node{a, b} {
		go func() {
			if err := n.Serve(ctx); err != nil {
				t.Errorf("serve %s: %v\n%s", n.Name, err, n.Out)
			}
		}()
	}
	nodeA, nodeB := waitReady(t, a.Name), waitReady(t, b.Name)
	wantRoute := func(n *Node, peer *corev1.Node) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
			for _, r := range windowsState(t, n).KubewinRoutes() {
				if r.Destination.String() == peer.Spec.PodCIDR && r.NextHop.String() == peer.Status.Addresses[0].Address {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			rs := windowsState(t, n).KubewinRoutes()
			t.Fatalf("node %s has no route to %s via %s: %v", n.Name, peer.Spec.PodCIDR, peer.Status.Addresses, rs)
		}
	}
	wantRoute(a, nodeB)
	wantRoute(b, nodeA)
}
