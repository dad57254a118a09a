package controlplane

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Ports for the components are taken below the kernel's ephemeral range, where no outbound
// connection's source port can take them between the check and the component's bind.
func TestFreePortsBelowEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	if low == 0 {
		t.Fatal("the ephemeral port range cannot be read on this machine (/proc/sys/net/ipv4/ip_local_port_range)")
	}
	ports, release, err := freePorts(5, randomBelow(low))
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	seen := map[int]bool{}
	for _, p := range ports {
		if p >= low || p <= 1024 || seen[p] {
			t.Errorf("ports %v: want 5 distinct ports above 1024 and below %d", ports, low)
		}
		seen[p] = true
	}
}

// A port handed out stays taken until its holder releases it, although nothing listens on it
// yet: two control planes starting at once both found etcd's port free, and the second etcd
// failed with "bind: address already in use".
func TestFreePortsHeldUntilReleased(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port //nolint:forcetypeassert // a TCP listener's address
	_ = l.Close()
	only := func() int { return port }

	first, release, err := freePorts(1, only)
	if err != nil || first[0] != port {
		t.Fatalf("freePorts = %v, %v; want [%d]", first, err, port)
	}
	if second, _, err := freePorts(1, only); err == nil || !strings.Contains(err.Error(), "no free loopback port") {
		t.Fatalf("while %d is held, freePorts = %v, %v; want no free port", port, second, err)
	}
	release()
	again, releaseAgain, err := freePorts(1, only)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	releaseAgain()
	if again[0] != port {
		t.Fatalf("after release, freePorts = %v; want [%d]", again, port)
	}
	// Nothing of the lock is left behind in the temp directory.
	lock := filepath.Join(os.TempDir(), fmt.Sprintf("kubewin-%d-locks", os.Getuid()), fmt.Sprintf("port-%d", port))
	if _, err := os.Stat(lock); !os.IsNotExist(err) {
		t.Errorf("after release, %s: %v; want it gone", lock, err)
	}
}
