package local

import (
	"context"
	"net/netip"

	"github.com/kubewin/kubewin/internal/routetable"
	"github.com/kubewin/kubewin/provider/internal/route"
)

// Table is a route table of the local backend, a file in its state directory.
type Table struct {
	Backend *Backend
	Name    string
}

var _ route.Table = Table{}

// Key names the table among every backend's of the process: a local table is a file of one state
// directory, and the provider instances of one process (the acceptance tests', which run in
// parallel) may each have a table pods in a state directory of their own.
func (t Table) Key() string { return "local/" + t.Backend.StateDir + "/" + t.Name }

// Read reads the table's file.
func (t Table) Read(context.Context) (*routetable.Table, error) { return t.Backend.RouteTable(t.Name) }

// Get reads the table's file and finds the route.
func (t Table) Get(_ context.Context, name string) (routetable.Route, bool, error) {
	table, err := t.Backend.RouteTable(t.Name)
	if err != nil {
		return routetable.Route{}, false, err
	}
	route, ok := table.Find(name)
	return route, ok, nil
}

// Put writes the route into the table's file.
func (t Table) Put(_ context.Context, route routetable.Route) error {
	return t.Backend.UpdateRouteTable(t.Name, func(table *routetable.Table) error { return table.Put(route) })
}

// Remove deletes the route from the table's file.
func (t Table) Remove(_ context.Context, name string) error {
	return t.Backend.UpdateRouteTable(t.Name, func(table *routetable.Table) error {
		table.Remove(name)
		return nil
	})
}

// RouteID is <route_table>/<name>.
func (t Table) RouteID(name string) string { return t.Name + "/" + name }

// Serves is true: the local backend has no subnets.
func (t Table) Serves(context.Context, netip.Addr) bool { return true }
