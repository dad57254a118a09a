package azure

import (
	"context"
	"net/netip"
	"strings"

	"github.com/kubewin/kubewin/internal/routetable"
	"github.com/kubewin/kubewin/provider/internal/route"
)

// PodRouteTable is an Azure route table as kubewin_pod_route's backend.
type PodRouteTable struct{ *RouteTable }

var _ route.Table = PodRouteTable{}

// Key is the table's resource ID, which Azure compares without case.
func (t PodRouteTable) Key() string { return "azure/" + strings.ToLower(t.ID) }

// Read reads the table without its associations.
func (t PodRouteTable) Read(ctx context.Context) (*routetable.Table, error) {
	table, _, err := t.RouteTable.Read(ctx)
	return table, err
}

// Remove deletes the route.
func (t PodRouteTable) Remove(ctx context.Context, name string) error { return t.Delete(ctx, name) }

// Serves reports whether a subnet associated with the table holds hop; true when a read fails:
// the check is a warning at plan time, and the route's write reports the table's errors.
func (t PodRouteTable) Serves(ctx context.Context, hop netip.Addr) bool {
	_, subnets, err := t.RouteTable.Read(ctx)
	if err != nil {
		return true
	}
	prefixes, err := t.Client.SubnetPrefixes(ctx, subnets)
	if err != nil {
		return true
	}
	for _, ps := range prefixes {
		for _, p := range ps {
			if p.Contains(hop) {
				return true
			}
		}
	}
	return false
}
