package azure

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"

	"github.com/kubewin/kubewin/internal/routetable"
)

// RouteTable is an Azure route table that pod routes are written to.
type RouteTable struct {
	Client *Client
	// ID is the route table's resource ID.
	ID                  string
	resourceGroup, name string
}

// OpenRouteTable parses a route table's resource ID.
func (c *Client) OpenRouteTable(id string) (*RouteTable, error) {
	rg, name, err := ParseRouteTableID(id)
	if err != nil {
		return nil, err
	}
	return &RouteTable{Client: c, ID: id, resourceGroup: rg, name: name}, nil
}

// ParseRouteTableID splits a route table's resource ID into its resource group and name.
func ParseRouteTableID(id string) (resourceGroup, name string, err error) {
	r, err := arm.ParseResourceID(id)
	if err != nil || !strings.EqualFold(r.ResourceType.String(), "Microsoft.Network/routeTables") {
		return "", "", fmt.Errorf("%q is not a route table's resource ID "+
			"(/subscriptions/<id>/resourceGroups/<group>/providers/Microsoft.Network/routeTables/<name>)", id)
	}
	return r.ResourceGroupName, r.Name, nil
}

// RouteID is a route's resource ID.
func (t *RouteTable) RouteID(name string) string { return t.ID + "/routes/" + name }

// ParseRouteID splits a route's resource ID into its table's ID and its name.
func ParseRouteID(id string) (tableID, name string, err error) {
	r, err := arm.ParseResourceID(id)
	if err != nil || !strings.EqualFold(r.ResourceType.String(), "Microsoft.Network/routeTables/routes") || r.Parent == nil {
		return "", "", fmt.Errorf("%q is not a route's resource ID (<route table ID>/routes/<name>)", id)
	}
	return r.Parent.String(), r.Name, nil
}

func (t *RouteTable) routes() *armnetwork.RoutesClient { return t.Client.network.NewRoutesClient() }

// tableReads share one GET of a route table among the kubewin_pod_route resources Terraform
// plans and refreshes at once: hundreds of routes reading their table one by one would spend
// the subscription's ARM read budget (a bucket of 250 refilled at 25 a second, then 429s:
// learn.microsoft.com/azure/azure-resource-manager/management/request-limits-and-throttling).
// A read serves for readReuse, and the process's own writes to the table drop it.
var tableReads = struct {
	sync.Mutex
	m map[string]*sharedRead
}{m: map[string]*sharedRead{}}

const readReuse = 5 * time.Second

type sharedRead struct {
	done    chan struct{}
	at      time.Time
	table   *routetable.Table
	subnets []string
	err     error
}

// Read returns the table with its routes, and the resource IDs of the subnets it is associated
// with: a read another caller made in the last readReuse, or a new one.
func (t *RouteTable) Read(ctx context.Context) (*routetable.Table, []string, error) {
	key := strings.ToLower(t.ID)
	tableReads.Lock()
	r := tableReads.m[key]
	fresh := r != nil
	if fresh {
		select {
		case <-r.done:
			fresh = r.err == nil && time.Since(r.at) < readReuse
		default: // in flight
		}
	}
	if !fresh {
		r = &sharedRead{done: make(chan struct{})}
		tableReads.m[key] = r
		tableReads.Unlock()
		r.table, r.subnets, r.err = t.read(ctx)
		r.at = time.Now()
		close(r.done)
	} else {
		tableReads.Unlock()
		select {
		case <-r.done:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
	if r.err != nil {
		return nil, nil, r.err
	}
	table := &routetable.Table{Name: r.table.Name, Routes: slices.Clone(r.table.Routes)}
	return table, slices.Clone(r.subnets), nil
}

// forgetRead drops the shared read of the table after a write to it.
func (t *RouteTable) forgetRead() {
	tableReads.Lock()
	delete(tableReads.m, strings.ToLower(t.ID))
	tableReads.Unlock()
}

// get reads the table from ARM, with its etag.
func (t *RouteTable) get(ctx context.Context) (armnetwork.RouteTable, error) {
	resp, err := t.Client.network.NewRouteTablesClient().Get(ctx, t.resourceGroup, t.name, nil)
	if err != nil {
		return armnetwork.RouteTable{}, fmt.Errorf("read route table %s: %w", t.ID, err)
	}
	return resp.RouteTable, nil
}

// read reads the table from ARM.
func (t *RouteTable) read(ctx context.Context) (*routetable.Table, []string, error) {
	rt, err := t.get(ctx)
	if err != nil {
		return nil, nil, err
	}
	var subnets []string
	if rt.Properties != nil {
		for _, s := range rt.Properties.Subnets {
			if s.ID != nil {
				subnets = append(subnets, *s.ID)
			}
		}
	}
	return podRoutes(t.ID, rt), subnets, nil
}

// podRoutes is the table's pod routes: those to an address prefix (not a service tag).
func podRoutes(id string, rt armnetwork.RouteTable) *routetable.Table {
	table := &routetable.Table{Name: id}
	if rt.Properties != nil {
		for _, r := range rt.Properties.Routes {
			if route, ok := routeOf(r); ok {
				table.Routes = append(table.Routes, route)
			}
		}
	}
	return table
}

// Get returns a route; ok is false when the table or the route does not exist.
func (t *RouteTable) Get(ctx context.Context, name string) (route routetable.Route, ok bool, err error) {
	resp, err := t.routes().Get(ctx, t.resourceGroup, t.name, name, nil)
	if notFound(err) {
		return routetable.Route{}, false, nil
	}
	if err != nil {
		return routetable.Route{}, false, fmt.Errorf("read route %s: %w", t.RouteID(name), err)
	}
	route, ok = routeOf(&resp.Route)
	return route, ok, nil
}

func routeOf(r *armnetwork.Route) (routetable.Route, bool) {
	if r == nil || r.Properties == nil || r.Name == nil {
		return routetable.Route{}, false
	}
	dst, err := netip.ParsePrefix(deref(r.Properties.AddressPrefix))
	if err != nil {
		return routetable.Route{}, false // a service tag or another kind of route: not a pod route
	}
	hop, _ := netip.ParseAddr(deref(r.Properties.NextHopIPAddress))
	return routetable.Route{Name: *r.Name, Destination: dst, NextHop: hop}, true
}

// Put creates or replaces a route to a node (next hop type VirtualAppliance: the node's NIC,
// which forwards IP), checking the table's limits against its current routes first.
func (t *RouteTable) Put(ctx context.Context, route routetable.Route) error {
	return t.change(ctx, &routeChange{name: route.Name, route: &route})
}

// Delete removes a route; a route already gone, or its table, is not an error.
func (t *RouteTable) Delete(ctx context.Context, name string) error {
	return t.change(ctx, &routeChange{name: name})
}

// routeBody is a route to a node: next hop type VirtualAppliance, the node's address.
func routeBody(route routetable.Route) armnetwork.Route {
	return armnetwork.Route{
		Name: to.Ptr(route.Name),
		Properties: &armnetwork.RoutePropertiesFormat{
			AddressPrefix:    to.Ptr(route.Destination.String()),
			NextHopType:      to.Ptr(armnetwork.RouteNextHopTypeVirtualAppliance),
			NextHopIPAddress: to.Ptr(route.NextHop.String()),
		},
	}
}

// SubnetPrefixes returns the address prefixes of subnets, by resource ID.
func (c *Client) SubnetPrefixes(ctx context.Context, ids []string) (map[string][]netip.Prefix, error) {
	out := map[string][]netip.Prefix{}
	for _, id := range ids {
		resp, err := c.subnet(ctx, id)
		if err != nil {
			return nil, err
		}
		if p := resp.Properties; p != nil {
			for _, s := range append([]*string{p.AddressPrefix}, p.AddressPrefixes...) {
				if pfx, err := netip.ParsePrefix(deref(s)); err == nil {
					out[id] = append(out[id], pfx)
				}
			}
		}
	}
	return out, nil
}

// subnet reads a subnet by resource ID.
func (c *Client) subnet(ctx context.Context, id string) (armnetwork.Subnet, error) {
	r, err := arm.ParseResourceID(id)
	if err != nil || r.Parent == nil {
		return armnetwork.Subnet{}, fmt.Errorf("%q is not a subnet's resource ID", id)
	}
	resp, err := c.network.NewSubnetsClient().Get(ctx, r.ResourceGroupName, r.Parent.Name, r.Name, nil)
	if err != nil {
		return armnetwork.Subnet{}, fmt.Errorf("read subnet %s: %w", id, err)
	}
	return resp.Subnet, nil
}
