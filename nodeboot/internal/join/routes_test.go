package join

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/nodeboot/internal/platform"
	"github.com/kubewin/kubewin/nodeboot/internal/platform/windows/hcnjson"
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
	var running sync.WaitGroup
	defer running.Wait()
	defer cancel()
	for _, n := range []*Node{a, b} {
		running.Go(func() {
			if err := n.Serve(ctx); err != nil && ctx.Err() == nil {
				t.Errorf("serve %s: %v\n%s", n.Name, err, n.Out)
			}
		})
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

// On an overlay, every node publishes its VTEP in flannel's Node annotations and programs a
// remote subnet route to each peer's pod CIDR through the peer's VTEP: to the other kubewin
// node and to a flannel node (a Linux node with flannel's vxlan backend, VNI 4096), not to a
// node on VNI 1 (flannel's Linux default, which Windows cannot use). A peer that leaves loses
// its route.
func TestOverlayPeers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := newNode(t, nodeOpts{mode: v1alpha1.NetworkModeOverlay})
	b := newNode(t, nodeOpts{mode: v1alpha1.NetworkModeOverlay})
	var running sync.WaitGroup
	defer running.Wait()
	defer cancel()
	for _, n := range []*Node{a, b} {
		running.Go(func() {
			if err := n.Serve(ctx); err != nil && ctx.Err() == nil {
				t.Errorf("serve %s: %v\n%s", n.Name, err, n.Out)
			}
		})
	}
	flannel := func(name, cidr string, vni int, mac, ip string) *corev1.Node {
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
				AnnotationKubeSubnetManager: "true", AnnotationBackendType: "vxlan", AnnotationPublicIP: ip,
				AnnotationBackendData: fmt.Sprintf(`{"VNI":%d,"VtepMAC":%q}`, vni, mac),
			}},
			Spec: corev1.NodeSpec{PodCIDR: cidr, PodCIDRs: []string{cidr}},
		}
	}
	linux, err := admin(t).CoreV1().Nodes().Create(ctx, flannel("linux-flannel-"+a.Name, "10.244.250.0/24", 4096, "5a:1e:ab:cd:00:01", "127.9.9.9"),
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vni1, err := admin(t).CoreV1().Nodes().Create(ctx, flannel("linux-vni1-"+a.Name, "10.244.251.0/24", 1, "5a:1e:ab:cd:00:02", "127.9.9.8"),
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := admin(t).CoreV1().Nodes().Delete(context.Background(), vni1.Name, metav1.DeleteOptions{}); err != nil {
			t.Error(err)
		}
	}()

	// routesOf are n's remote subnet routes: pod CIDR → provider address and VTEP MAC (as
	// net.HardwareAddr prints it: HNS reports it in its own form).
	routesOf := func(n *Node) map[string]string {
		out := map[string]string{}
		nw := windowsState(t, n).Network(n.Config.Network.Name)
		if nw == nil {
			return out
		}
		for _, p := range nw.Policies {
			var s hcnjson.RemoteSubnetRoutePolicySetting
			if p.Type == hcnjson.RemoteSubnetRoute && json.Unmarshal(p.Settings, &s) == nil {
				mac, err := net.ParseMAC(s.DistributedRouterMacAddress)
				if err != nil {
					t.Fatalf("node %s holds a route with MAC %q: %v", n.Name, s.DistributedRouterMacAddress, err)
				}
				out[s.DestinationPrefix] = s.ProviderAddress + " " + mac.String() + fmt.Sprintf(" %d", s.IsolationId)
			}
		}
		return out
	}
	// vtep is the VTEP n publishes, read back as flannel reads a lease (pkg/subnet/kube
	// nodeToLease, pkg/backend/vxlan vxlanLeaseAttrs).
	vtep := func(n *Node) (string, string) {
		node, err := admin(t).CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return "", "" // not registered yet
		}
		var lease struct {
			VNI     uint16
			VtepMAC string
		}
		if node.Annotations[AnnotationKubeSubnetManager] != "true" || node.Annotations[AnnotationBackendType] != "vxlan" ||
			json.Unmarshal([]byte(node.Annotations[AnnotationBackendData]), &lease) != nil || lease.VNI != 4096 {
			return "", ""
		}
		mac, err := net.ParseMAC(lease.VtepMAC)
		if err != nil {
			t.Fatalf("node %s publishes VTEP MAC %q: %v", n.Name, lease.VtepMAC, err)
		}
		return node.Spec.PodCIDR, node.Annotations[AnnotationPublicIP] + " " + mac.String() + " 4096"
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			return cond(),
				nil
		}); err != nil {
			t.Fatalf("%s: %v\nA: %v\nB: %v", what, err, routesOf(a), routesOf(b))
		}
	}
	waitFor("both nodes publish their VTEP", func() bool { c1, _ := vtep(a); c2, _ := vtep(b); return c1 != "" && c2 != "" })
	cidrA, viaA := vtep(a)
	cidrB, viaB := vtep(b)
	if !strings.HasPrefix(viaA, a.state.Data.NodeIP.String()+" ") || !strings.HasPrefix(viaB, b.state.Data.NodeIP.String()+" ") {
		t.Errorf("public IPs %q, %q; node IPs %s, %s", viaA, viaB, a.state.Data.NodeIP, b.state.Data.NodeIP)
	}
	viaLinux := "127.9.9.9 5a:1e:ab:cd:00:01 4096"
	waitFor("each node routes to the other and to the flannel node", func() bool {
		ra, rb := routesOf(a), routesOf(b)
		return ra[cidrB] == viaB && rb[cidrA] == viaA && ra[linux.Spec.PodCIDR] == viaLinux && rb[linux.Spec.PodCIDR] == viaLinux
	})
	for _, n := range []*Node{a, b} {
		if r := routesOf(n); r[vni1.Spec.PodCIDR] != "" {
			t.Errorf("node %s routes to a VNI 1 peer: %v", n.Name, r)
		}
		if _, own := routesOf(n)[n.state.Data.PodCIDR.String()]; own {
			t.Errorf("node %s routes to its own pod CIDR", n.Name)
		}
	}

	if err := admin(t).CoreV1().Nodes().Delete(ctx, linux.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("the route to the node that left is removed", func() bool {
		ra, rb := routesOf(a), routesOf(b)
		_, inA := ra[linux.Spec.PodCIDR]
		_, inB := rb[linux.Spec.PodCIDR]
		return !inA && !inB && ra[cidrB] == viaB && rb[cidrA] == viaA
	})
}

// A change of a peer Node updates the peers and nothing else: the node's network and services
// are checked on the check interval, not on each of the Node changes a pool's joins make (on
// Windows every check is a run of HNS, SCM and PowerShell calls).
func TestPeerChangeUpdatesPeersOnly(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := newNode(t, nodeOpts{mode: v1alpha1.NetworkModeHostGateway})
	a.CheckInterval = time.Hour // no check falls in the test
	var running sync.WaitGroup
	defer running.Wait()
	defer cancel()
	running.Go(func() {
		if err := a.Serve(ctx); err != nil && ctx.Err() == nil {
			t.Errorf("serve %s: %v\n%s", a.Name, err, a.Out)
		}
	})
	waitReady(t, a.Name)
	routed := func(cidr string) bool {
		for _, r := range windowsState(t, a).KubewinRoutes() {
			if r.Destination.String() == cidr {
				return true
			}
		}
		return false
	}
	// The first check is over once the node's conditions are published.
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		return strings.Contains(output(t, a), "[conditions]"), nil
	}); err != nil {
		t.Fatalf("no conditions published: %v\n%s", err, output(t, a))
	}
	mark, logged := simWindows(t, a).Mark(), len(output(t, a))
	peer := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "peer-of-" + a.Name},
		Spec:       corev1.NodeSpec{PodCIDR: "10.244.249.0/24", PodCIDRs: []string{"10.244.249.0/24"}},
	}
	peer, err := admin(t).CoreV1().Nodes().Create(ctx, peer, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := admin(t).CoreV1().Nodes().Delete(context.Background(), peer.Name, metav1.DeleteOptions{}); err != nil {
			t.Error(err)
		}
	}()
	address := []byte(`{"status":{"addresses":[{"type":"InternalIP","address":"127.9.9.7"}]}}`)
	if _, err := admin(t).CoreV1().Nodes().Patch(ctx, peer.Name, types.MergePatchType, address, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		return routed(peer.Spec.PodCIDR), nil
	}); err != nil {
		t.Fatalf("node %s has no route to the new peer: %v", a.Name, err)
	}
	for _, op := range simWindows(t, a).Log()[mark:] {
		if op.Backend == "hns" || op.Backend == "scm" {
			t.Errorf("a peer's change ran %s %s %s: the network and services wait for the check\n%s", op.Backend, op.Call, op.Target,
				output(t, a)[logged:])
		}
	}
}
