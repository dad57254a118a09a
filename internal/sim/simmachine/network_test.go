package simmachine

import (
	"context"
	"errors"
	"net"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

// A machine in a network dials where the network sends it, fails where the network does not
// carry the connection (saying why), and resolves no names; a machine in none dials as the host.
func TestDialer(t *testing.T) {
	if (Machine{}).Dialer() != nil {
		t.Error("a machine in no network has a dialer of its own")
	}
	target, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = target.Close() }()
	private := netip.MustParseAddrPort("10.240.0.4:6443")
	network := httptest.NewServer(NetworkHandler(func(to netip.AddrPort) (netip.AddrPort, error) {
		if to == private {
			return netip.MustParseAddrPort(target.Addr().String()), nil
		}
		return netip.AddrPort{}, errors.New("subnet agents has no outbound path")
	}))
	defer network.Close()
	dial := Machine{Network: network.URL}.Dialer()
	ctx := context.Background()

	c, err := dial(ctx, "tcp", private.String())
	if err != nil {
		t.Fatalf("dial %s: %v", private, err)
	}
	_ = c.Close()
	if _, err := dial(ctx, "tcp", "198.51.100.10:443"); !errors.Is(err, ErrNotCarried) || !strings.Contains(err.Error(), "no outbound path") {
		t.Errorf("dial outside: %v, want the network's refusal", err)
	}
	var opErr *net.OpError
	if _, err := dial(ctx, "tcp", "api.example.com:443"); !errors.As(err, &opErr) || !strings.Contains(err.Error(), "resolves no names") {
		t.Errorf("dial by name: %v", err)
	}
}
