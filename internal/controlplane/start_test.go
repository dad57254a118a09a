package controlplane

import "testing"

// Ports for the components are taken below the kernel's ephemeral range, where no outbound
// connection's source port can take them between the check and the component's bind.
func TestFreePortsBelowEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	if low == 0 {
		t.Fatal("the ephemeral port range cannot be read on this machine (/proc/sys/net/ipv4/ip_local_port_range)")
	}
	ports, err := freePorts(5)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p >= low || p <= 1024 || seen[p] {
			t.Errorf("ports %v: want 5 distinct ports above 1024 and below %d", ports, low)
		}
		seen[p] = true
	}
}
