// Package ipam does the address arithmetic of a Windows pod network: parsing CIDRs, splitting a
// cluster CIDR into per-node pod CIDRs, detecting overlaps, and the l2bridge addresses of a pod
// CIDR. It is pure: no I/O, deterministic results. IPv4 only for now.
package ipam

import (
	"errors"
	"fmt"
	"net/netip"
)

// ErrIPv6 is returned for IPv6 input: Windows nodes are IPv4-only in kubewin for now.
var ErrIPv6 = errors.New("IPv6 is not supported yet: kubewin Windows nodes are IPv4-only, use an IPv4 CIDR")

// ParsePrefix parses an IPv4 CIDR in canonical form (no host bits set).
func ParsePrefix(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR such as 10.244.0.0/16", s)
	}
	if !p.Addr().Is4() {
		return netip.Prefix{}, ErrIPv6
	}
	if m := p.Masked(); m != p {
		return netip.Prefix{}, fmt.Errorf("%q has host bits set: use %s", s, m)
	}
	return p, nil
}

// ParseAddr parses an IPv4 address.
func ParseAddr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%q is not an IP address", s)
	}
	if !a.Is4() {
		return netip.Addr{}, ErrIPv6
	}
	return a, nil
}

// Nth returns the n-th address of p (0 is the network address), or an error when p is too small.
func Nth(p netip.Prefix, n uint64) (netip.Addr, error) {
	size := uint64(1) << (32 - p.Bits())
	if n >= size {
		return netip.Addr{}, fmt.Errorf("%s has no address number %d", p, n)
	}
	b := p.Addr().As4()
	v := uint64(b[0])<<24 | uint64(b[1])<<16 | uint64(b[2])<<8 | uint64(b[3])
	v += n
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), nil
}

// Bridge holds the addresses an l2bridge network uses in a node's pod CIDR.
type Bridge struct {
	// Gateway is the HNS network gateway: the CIDR's first address.
	Gateway netip.Addr
	// HostEndpoint is the host vNIC (cbr0) endpoint, the pods' gateway: the second address.
	HostEndpoint netip.Addr
	// FirstPod is the first address handed to pods.
	FirstPod netip.Addr
	// LastPod is the last address handed to pods (the one before broadcast).
	LastPod netip.Addr
}

// MaxPodCIDRBits is the longest pod CIDR prefix that still leaves room for pods on l2bridge.
const MaxPodCIDRBits = 29

// BridgeAddresses returns the l2bridge addresses of a pod CIDR.
func BridgeAddresses(pod netip.Prefix) (Bridge, error) {
	if !pod.Addr().Is4() {
		return Bridge{}, ErrIPv6
	}
	if pod.Bits() > MaxPodCIDRBits {
		return Bridge{}, fmt.Errorf("pod CIDR %s is too small for l2bridge: use /%d or shorter", pod, MaxPodCIDRBits)
	}
	size := uint64(1) << (32 - pod.Bits())
	var b Bridge
	b.Gateway, _ = Nth(pod, 1)
	b.HostEndpoint, _ = Nth(pod, 2)
	b.FirstPod, _ = Nth(pod, 3)
	b.LastPod, _ = Nth(pod, size-2)
	return b, nil
}

// Splitter divides a cluster CIDR into equal per-node pod CIDRs, in address order, the way the
// controller manager's node IPAM does.
type Splitter struct {
	cluster netip.Prefix
	bits    int
}

// DefaultNodeMaskSize is the default pod CIDR size per node.
const DefaultNodeMaskSize = 24

// NewSplitter returns a splitter of cluster into /maskSize pod CIDRs.
func NewSplitter(cluster netip.Prefix, maskSize int) (*Splitter, error) {
	if !cluster.Addr().Is4() {
		return nil, ErrIPv6
	}
	if maskSize < cluster.Bits() || maskSize > MaxPodCIDRBits {
		return nil, fmt.Errorf("node mask size /%d does not fit cluster CIDR %s: use a size from /%d to /%d", maskSize, cluster, cluster.Bits(),
			MaxPodCIDRBits)
	}
	return &Splitter{cluster: cluster.Masked(), bits: maskSize}, nil
}

// Count is how many pod CIDRs the cluster CIDR holds.
func (s *Splitter) Count() uint64 { return uint64(1) << (s.bits - s.cluster.Bits()) }

// PodCIDR returns the i-th pod CIDR.
func (s *Splitter) PodCIDR(i uint64) (netip.Prefix, error) {
	if i >= s.Count() {
		return netip.Prefix{}, fmt.Errorf("cluster CIDR %s holds only %d /%d pod CIDRs, not %d", s.cluster, s.Count(), s.bits, i+1)
	}
	a, err := Nth(s.cluster, i<<(32-s.bits))
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, s.bits), nil
}

// Named is a prefix with the name an error message should give it.
type Named struct {
	Name   string
	Prefix netip.Prefix
}

// Overlaps returns one error for every pair of prefixes that overlap, in input order.
func Overlaps(prefixes ...Named) []error {
	var errs []error
	for i, a := range prefixes {
		for _, b := range prefixes[i+1:] {
			if a.Prefix.IsValid() && b.Prefix.IsValid() && a.Prefix.Overlaps(b.Prefix) {
				errs = append(errs, fmt.Errorf("%s %s overlaps %s %s: choose ranges that do not intersect", a.Name, a.Prefix, b.Name, b.Prefix))
			}
		}
	}
	return errs
}
