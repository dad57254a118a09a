package local

import (
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/kubewin/kubewin/internal/routetable"
)

func TestRouteTable(t *testing.T) {
	b, err := New(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	route := func(i int) routetable.Route {
		return routetable.Route{Name: fmt.Sprintf("r%d", i), Destination: netip.MustParsePrefix(fmt.Sprintf("10.%d.%d.0/24", 244+i/256, i%256)),
			NextHop: netip.MustParseAddr("127.0.0.1")}
	}
	// Many concurrent writers, as Terraform's parallel creates.
	var wg sync.WaitGroup
	for i := range routetable.MaxRoutes {
		wg.Go(func() {
			if err := b.UpdateRouteTable("rt", func(t *routetable.Table) error { return t.Put(route(i)) }); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	table, err := b.RouteTable("rt")
	if err != nil || len(table.Routes) != routetable.MaxRoutes {
		t.Fatalf("table has %d routes (%v), want %d", len(table.Routes), err, routetable.MaxRoutes)
	}
	if err := table.CheckAdd(route(routetable.MaxRoutes)); err == nil || !strings.Contains(err.Error(), "already holds 400 routes") {
		t.Errorf("401st route: %v", err)
	}
	// Replacing an existing route is not an addition.
	if err := table.CheckAdd(route(7)); err != nil {
		t.Errorf("replacing a route: %v", err)
	}
	dup := routetable.Route{Name: "dup", Destination: netip.MustParsePrefix("10.244.7.128/25"), NextHop: netip.MustParseAddr("127.0.0.2")}
	table.Remove("r0")
	if err := table.CheckAdd(dup); err == nil || !strings.Contains(err.Error(), `overlaps 10.244.7.0/24 of route "r7"`) {
		t.Errorf("overlapping route: %v", err)
	}
}

// Tables of two state directories are two tables, whatever their names.
func TestTableKey(t *testing.T) {
	one, err := New(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := New(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := (Table{Backend: one, Name: "pods"}).Key(), (Table{Backend: other, Name: "pods"}).Key(); a == b {
		t.Errorf("the tables pods of two state directories have one key, %s", a)
	}
	if a, b := (Table{Backend: one, Name: "pods"}).Key(), (Table{Backend: one, Name: "pods"}).Key(); a != b {
		t.Errorf("one table has two keys, %s and %s", a, b)
	}
}
