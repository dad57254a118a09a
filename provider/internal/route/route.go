// Package route is the seam between kubewin_pod_route and its backends: a route table that
// pod routes are written to. The local backend keeps a table as a file in its state directory
// (package local); the azure backend writes an Azure route table (package azure).
package route

import (
	"context"
	"net/netip"

	"github.com/kubewin/kubewin/internal/routetable"
)

// Table is a backend's route table. Writes to one table are serialised within the provider
// process by the backend, where Terraform writes many routes at once; the azure backend writes
// the routes that wait meanwhile together, in one write of the table.
type Table interface {
	// Key identifies the table within the provider process. It costs nothing.
	Key() string
	// Read returns the table with its routes: one read of the table.
	Read(ctx context.Context) (*routetable.Table, error)
	// Get returns a route; ok is false when the table or the route does not exist. One read.
	Get(ctx context.Context, name string) (route routetable.Route, ok bool, err error)
	// Put creates or replaces a route, checking the table's limits against its current routes
	// first: one read and one write of the table, shared with the routes written at once.
	Put(ctx context.Context, route routetable.Route) error
	// Remove deletes a route; a route already gone is not an error. At most one read and one
	// write, shared likewise.
	Remove(ctx context.Context, name string) error
	// RouteID is a route's ID, the resource's id. It costs nothing.
	RouteID(name string) string
	// Serves reports whether the traffic of hop's subnet uses the table: false only when it
	// read that no subnet associated with the table holds hop. It costs a read of the table and
	// one of each subnet associated with it.
	Serves(ctx context.Context, hop netip.Addr) bool
}
