package simboot

import (
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/kubewin/kubewin/internal/sim/simmachine"
	"github.com/kubewin/kubewin/internal/testkit/armtest"
)

// A Windows machine's nodeboot runs in a process of its own and asks its network before each
// connection it opens, and each its kubelet opens (simmachine.Machine.Network): the Booter
// serves each machine's network at a path of its own on one loopback listener, which answers
// as the test server's network carries the connection (armtest.Instance.Reach: routes, outbound
// paths, load balancer hairpins, security groups) and where on this host it goes
// (armtest.Instance.HostAddress).

// Connection is a connection a Windows machine asked its network for, and the network's answer.
type Connection struct {
	// Machine is the instance's computer name.
	Machine string
	To      netip.AddrPort
	// Err is why the network did not carry it, "" when it did.
	Err string
}

// Connections lists the connections the Windows machines asked their networks for, in order.
func (b *Booter) Connections() []Connection {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Connection(nil), b.asked...)
}

func networkPath(in armtest.Instance) string { return "/" + instanceName(in) }

// network is the URL of the instance's network, "" when the server gives the instance none (no
// Reach); the listener starts with the first.
func (b *Booter) network(in armtest.Instance) (string, error) {
	if in.Reach == nil {
		return "", nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.netURL == "" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		// It serves while this process lives, as the test server's machines may.
		srv := &http.Server{Handler: http.HandlerFunc(b.serveNetwork), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		b.netURL, b.nets = "http://"+ln.Addr().String(), map[string]armtest.Instance{}
	}
	b.nets[networkPath(in)] = in
	return b.netURL + networkPath(in), nil
}

func (b *Booter) serveNetwork(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	in, ok := b.nets[r.URL.Path]
	b.mu.Unlock()
	if !ok {
		http.Error(w, "no machine "+r.URL.Path+" (it was deleted)", http.StatusNotFound)
		return
	}
	simmachine.NetworkHandler(func(to netip.AddrPort) (netip.AddrPort, error) {
		err := in.Reach(to)
		c := Connection{Machine: in.ComputerName, To: to}
		if err != nil {
			c.Err = err.Error()
		}
		b.mu.Lock()
		b.asked = append(b.asked, c)
		b.mu.Unlock()
		if err != nil {
			return netip.AddrPort{}, err
		}
		if in.HostAddress == nil {
			return to, nil
		}
		return in.HostAddress(to), nil
	}).ServeHTTP(w, r)
}
