package armtest

import (
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"
)

// This host carries no virtual network. A private address a simulated machine listens at, or
// that a connection goes to, has a loopback stand-in here, from 127.128.0.0/10 (public addresses
// are 127.64.0.0/10 and their own stand-ins), given out the first time it is asked for. A
// connection to an internal load balancer frontend goes to the stand-in of a backend of the
// frontend's load-balancing rule that accepts connections on the rule's backend port — the
// backend the load balancer's health probe would let it forward to
// (https://learn.microsoft.com/azure/load-balancer/load-balancer-custom-probe-overview). Whether
// Azure carries the connection at all is Reach's to say, before it is made.

// HostAddress is where on this host a connection to an address goes: a loopback address and port.
func (s *Server) HostAddress(to netip.AddrPort) netip.AddrPort {
	s.mu.Lock()
	backends := s.internalBackends(to)
	if len(backends) == 0 {
		defer s.mu.Unlock()
		return netip.AddrPortFrom(s.standIn(to.Addr()), to.Port())
	}
	s.mu.Unlock()
	for _, b := range backends {
		if c, err := net.DialTimeout("tcp", b.String(), time.Second); err == nil {
			_ = c.Close() // the probe's connection
			return b
		}
	}
	return backends[0]
}

// internalBackends are the stand-ins of the backends an internal frontend's rule for to's port
// forwards to; s.mu is held.
func (s *Server) internalBackends(to netip.AddrPort) []netip.AddrPort {
	lb, f := s.frontendAt(to.Addr())
	if lb == nil || f.Properties.PublicIPAddress != nil {
		return nil
	}
	var out []netip.AddrPort
	for _, r := range as[*armnetwork.LoadBalancer](lb.model).Properties.LoadBalancingRules {
		rp := r.Properties
		if !strings.EqualFold(deref(rp.FrontendIPConfiguration.ID), deref(f.ID)) || rp.FrontendPort == nil || int(*rp.FrontendPort) != int(to.Port()) ||
			rp.BackendAddressPool == nil || rp.BackendPort == nil {
			continue
		}
		for _, e := range s.poolEndpoints(strings.ToLower(deref(rp.BackendAddressPool.ID))) {
			out = append(out, netip.AddrPortFrom(s.standIn(e.addr), uint16(*rp.BackendPort)))
		}
	}
	return out
}

// standIn is a private address's loopback stand-in; loopback addresses (the server's public
// ones, a machine's own) stand for themselves. Stand-ins are counted from a random base, so that
// servers in test processes that run at once give out different ones. s.mu is held.
func (s *Server) standIn(a netip.Addr) netip.Addr {
	if !a.Is4() || a.IsLoopback() {
		return a
	}
	if x, ok := s.standIns[a]; ok {
		return x
	}
	n := (s.standInBase + uint32(len(s.standIns)) + 1) % (1 << 22)
	x := netip.AddrFrom4([4]byte{127, 128 + byte(n>>16)&63, byte(n >> 8), byte(n)})
	s.standIns[a] = x
	return x
}
