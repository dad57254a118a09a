package simmachine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"
)

// A simulated machine's network: this host carries no virtual network, so a machine in one asks
// it before each TCP connection, GET <Machine.Network>?to=<address:port>. The network answers 200
// with the address on this host the connection goes to ("127.128.0.7:6443"), or 403 with why it
// would not carry the connection (no route, no outbound path, a security group); the machine
// then fails to connect, as it would.

// Dialer returns the machine's dialer for its connections to its cluster: through its network
// when it has one, nil (the host's own) when it has none.
func (m Machine) Dialer() func(ctx context.Context, network, address string) (net.Conn, error) {
	if m.Network == "" {
		return nil
	}
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		to, err := netip.ParseAddrPort(address)
		if err != nil {
			return nil, &net.OpError{Op: "dial", Net: network, Err: fmt.Errorf("%s: a simulated machine in a virtual network resolves no names; "+
				"address its cluster by IP", address)}
		}
		at, err := askNetwork(ctx, m.Network, to)
		if err != nil {
			return nil, &net.OpError{Op: "dial", Net: network, Addr: net.TCPAddrFromAddrPort(to), Err: err}
		}
		var d net.Dialer
		return d.DialContext(ctx, network, at.String())
	}
}

// ErrNotCarried is wrapped by the error of a connection the machine's network does not carry.
var ErrNotCarried = errors.New("the virtual network does not carry the connection")

// networkClient asks the machine's network, over connections it keeps for the next question.
var networkClient = &http.Client{Transport: &http.Transport{Proxy: nil}}

// askNetwork asks the network at base where a connection to to goes.
func askNetwork(ctx context.Context, base string, to netip.AddrPort) (netip.AddrPort, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"?to="+url.QueryEscape(to.String()), nil)
	if err != nil {
		return netip.AddrPort{}, err
	}
	resp, err := networkClient.Do(req)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("ask the machine's network: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("ask the machine's network: %w", err)
	}
	answer := strings.TrimSpace(string(body))
	switch resp.StatusCode {
	case http.StatusOK:
		return netip.ParseAddrPort(answer)
	case http.StatusForbidden:
		return netip.AddrPort{}, fmt.Errorf("%w: %s", ErrNotCarried, answer)
	}
	return netip.AddrPort{}, fmt.Errorf("ask the machine's network: %s: %s", resp.Status, answer)
}

// NetworkHandler serves a machine's network, its answers from carry: the address on this host a
// connection to to goes to, or why the network does not carry it.
func NetworkHandler(carry func(to netip.AddrPort) (netip.AddrPort, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		to, err := netip.ParseAddrPort(r.URL.Query().Get("to"))
		if err != nil {
			http.Error(w, "to: "+err.Error(), http.StatusBadRequest)
			return
		}
		at, err := carry(to)
		if err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		_, _ = fmt.Fprintln(w, at)
	})
}
