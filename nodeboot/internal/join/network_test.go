package join

import (
	"context"
	"errors"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubewin/kubewin/internal/nodestatus"
	"github.com/kubewin/kubewin/internal/sim/simmachine"
)

// testNetwork serves a machine's network: each connection is asked for, and carry answers.
func testNetwork(t *testing.T, carry func(to netip.AddrPort) (netip.AddrPort, error)) (string, func() []netip.AddrPort) {
	t.Helper()
	var mu sync.Mutex
	var asked []netip.AddrPort
	srv := httptest.NewServer(simmachine.NetworkHandler(func(to netip.AddrPort) (netip.AddrPort, error) {
		mu.Lock()
		asked = append(asked, to)
		mu.Unlock()
		return carry(to)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []netip.AddrPort {
		mu.Lock()
		defer mu.Unlock()
		return append([]netip.AddrPort(nil), asked...)
	}
}

// Every connection of a machine in a virtual network crosses it — discovery's, the TLS
// bootstrap's, the node credential's and the kubelet's — and goes where the network sends it.
func TestJoinCrossesTheMachinesNetwork(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The network carries the machine's connections to the API server through a proxy that
	// counts them; the machine addresses the API server itself.
	proxy := newCountingProxy(t, cp.HostPort())
	network, asked := testNetwork(t, func(to netip.AddrPort) (netip.AddrPort, error) {
		if to.String() != cp.HostPort() {
			return netip.AddrPort{}, errors.New("only the API server is reachable")
		}
		return netip.MustParseAddrPort(proxy.addr), nil
	})
	n := newNode(t, nodeOpts{network: network})
	if err := n.Join(ctx); err != nil {
		t.Fatalf("join: %v\n%s", err, output(t, n))
	}
	waitReady(t, n.Name)
	// Two anonymous reads, the token's connection, the node credential's and the kubelet's, at
	// least; every one asked the network first.
	got := int(proxy.accepted.Load())
	if got < 5 || got != len(asked()) {
		t.Errorf("the API server got %d connections of the machine, its network was asked for %d (%v): want every connection through the network, "+
			"at least 5", got, len(asked()), asked())
	}
}

// A connection the network does not carry fails as it would on the machine: discovery cannot
// reach the API server and says why, and the API server sees no connection.
func TestJoinNetworkRefuses(t *testing.T) {
	proxy := newCountingProxy(t, cp.HostPort())
	network, _ := testNetwork(t, func(to netip.AddrPort) (netip.AddrPort, error) {
		return netip.AddrPort{}, errors.New("subnet agents has no outbound path to " + to.String())
	})
	n := newNode(t, nodeOpts{network: network, endpoint: proxy.addr})
	n.Timeouts.Discovery = time.Second
	err := n.RunPhase(context.Background(), PhaseDiscovery)
	if nodestatus.CodeOf(err) != nodestatus.CodeAPIServerUnreachable || !strings.Contains(err.Error(), "has no outbound path to "+proxy.addr) {
		t.Errorf("discovery: %v (code %s), want %s naming the network's reason", err, nodestatus.CodeOf(err), nodestatus.CodeAPIServerUnreachable)
	}
	if got := proxy.accepted.Load(); got != 0 {
		t.Errorf("the API server got %d connections of a machine whose network carries none", got)
	}
}
