package windows

import (
	"slices"
	"testing"
)

// An empty dependency list is the empty string, which removes a service's dependencies; a
// NULL list (what x/sys/windows/svc/mgr passes for an empty one) leaves them unchanged.
func TestDependencyList(t *testing.T) {
	for _, c := range []struct {
		deps []string
		want []uint16
	}{
		{nil, []uint16{0, 0}},
		{[]string{"containerd"}, append([]uint16{'c', 'o', 'n', 't', 'a', 'i', 'n', 'e', 'r', 'd'}, 0, 0)},
		{[]string{"a", "b"}, []uint16{'a', 0, 'b', 0, 0}},
	} {
		if got := dependencyList(c.deps); !slices.Equal(got, c.want) {
			t.Errorf("dependencyList(%q) = %v, want %v", c.deps, got, c.want)
		}
	}
}
