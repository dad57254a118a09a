package ipam

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestParsePrefix(t *testing.T) {
	tests := []struct {
		in, want, wantErr string
	}{
		{in: "10.244.0.0/16", want: "10.244.0.0/16"},
		{in: "10.244.1.0/24", want: "10.244.1.0/24"},
		{in: "10.244.1.5/24", wantErr: `has host bits set: use 10.244.1.0/24`},
		{in: "10.244.0.0", wantErr: `is not a CIDR`},
		{in: "", wantErr: `is not a CIDR`},
		{in: "fd00::/64", wantErr: "IPv6 is not supported yet"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParsePrefix(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got.String() != tt.want {
				t.Fatalf("got %v, %v; want %s", got, err, tt.want)
			}
		})
	}
	if _, err := ParsePrefix("2001:db8::/32"); !errors.Is(err, ErrIPv6) {
		t.Errorf("IPv6 error = %v, want ErrIPv6", err)
	}
}

func TestSplitter(t *testing.T) {
	s, err := NewSplitter(netip.MustParsePrefix("10.244.0.0/16"), DefaultNodeMaskSize)
	if err != nil {
		t.Fatal(err)
	}
	if s.Count() != 256 {
		t.Errorf("Count() = %d, want 256", s.Count())
	}
	for i, want := range map[uint64]string{0: "10.244.0.0/24", 1: "10.244.1.0/24", 255: "10.244.255.0/24"} {
		got, err := s.PodCIDR(i)
		if err != nil || got.String() != want {
			t.Errorf("PodCIDR(%d) = %v, %v; want %s", i, got, err, want)
		}
	}
	if _, err := s.PodCIDR(256); err == nil || !strings.Contains(err.Error(), "holds only 256 /24 pod CIDRs") {
		t.Errorf("PodCIDR(256) error = %v", err)
	}
	s26, _ := NewSplitter(netip.MustParsePrefix("10.10.187.0/24"), 26)
	if got, _ := s26.PodCIDR(1); got.String() != "10.10.187.64/26" {
		t.Errorf("/26 PodCIDR(1) = %s", got)
	}
	for _, bad := range []int{15, 30, 32} {
		if _, err := NewSplitter(netip.MustParsePrefix("10.244.0.0/16"), bad); err == nil {
			t.Errorf("mask /%d: want an error", bad)
		}
	}
}

func TestBridgeAddresses(t *testing.T) {
	b, err := BridgeAddresses(netip.MustParsePrefix("10.10.187.64/26"))
	if err != nil {
		t.Fatal(err)
	}
	got := []string{b.Gateway.String(), b.HostEndpoint.String(), b.FirstPod.String(), b.LastPod.String()}
	want := []string{"10.10.187.65", "10.10.187.66", "10.10.187.67", "10.10.187.126"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("BridgeAddresses = %v, want %v", got, want)
	}
	if _, err := BridgeAddresses(netip.MustParsePrefix("10.0.0.0/30")); err == nil {
		t.Error("a /30 pod CIDR was accepted")
	}
}

func TestOverlaps(t *testing.T) {
	errs := Overlaps(
		Named{"cluster CIDR", netip.MustParsePrefix("10.0.0.0/8")},
		Named{"service CIDR", netip.MustParsePrefix("10.96.0.0/12")},
		Named{"node subnet", netip.MustParsePrefix("192.168.0.0/24")},
		Named{"pod CIDR", netip.MustParsePrefix("192.168.0.128/25")},
	)
	if len(errs) != 2 {
		t.Fatalf("got %d overlaps, want 2: %v", len(errs), errs)
	}
	if !strings.Contains(errs[0].Error(), "cluster CIDR 10.0.0.0/8 overlaps service CIDR 10.96.0.0/12") {
		t.Errorf("first error = %v", errs[0])
	}
	if errs := Overlaps(Named{"a", netip.MustParsePrefix("10.0.0.0/16")}, Named{"b", netip.MustParsePrefix("10.1.0.0/16")}); len(errs) != 0 {
		t.Errorf("disjoint prefixes reported: %v", errs)
	}
}

func TestNth(t *testing.T) {
	if a, _ := Nth(netip.MustParsePrefix("10.96.0.0/12"), 10); a.String() != "10.96.0.10" {
		t.Errorf("Nth(10) = %s", a)
	}
	if a, _ := Nth(netip.MustParsePrefix("10.0.254.0/23"), 300); a.String() != "10.0.255.44" {
		t.Errorf("carry: %s", a)
	}
	if _, err := Nth(netip.MustParsePrefix("10.0.0.0/30"), 4); err == nil {
		t.Error("Nth beyond the prefix succeeded")
	}
}
