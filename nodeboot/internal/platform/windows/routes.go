package windows

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"

	"github.com/kubewin/kubewin/nodeboot/internal/platform"
)

type routes struct{ p *Platform }

// RouteMetric marks kubewin's routes: nodeboot owns every IPv4 route with this metric.
const RouteMetric = 271

// Route stores, as Get-NetRoute -PolicyStore names them. kubewin writes routes to the active
// store only and programs them again on every boot; an older nodeboot wrote them to the
// persistent store too, where they are cleaned up.
const (
	ActiveStore     = "ActiveStore"
	PersistentStore = "PersistentStore"
)

// StoredRoute is a kubewin route as the routing table holds it.
type StoredRoute struct {
	DestinationPrefix string `json:"DestinationPrefix"`
	NextHop           string `json:"NextHop"`
	InterfaceIndex    int    `json:"InterfaceIndex"`
	Store             string `json:"Store"`
}

// RouteTable is the output of the routes.list script: kubewin's routes in both stores, and the
// interface of the default route, through which new routes go.
type RouteTable struct {
	InterfaceIndex int           `json:"InterfaceIndex"`
	Routes         []StoredRoute `json:"Routes"`
}

// Replace reads kubewin's routes from both stores and changes only what differs: a route is
// kept when the active store has it through the default route's interface; every other
// kubewin route is removed from the store that holds it, and missing ones are added to the
// active store. New-NetRoute -PolicyStore PersistentStore alone would write a route that is not
// active until a reboot (MicrosoftDocs windows-powershell-docs New-NetRoute: "By default, a
// route is saved in both stores. Use this parameter only when you need to create a route in
// just the ActiveStore"). It reports whether it changed the table.
func (r routes) Replace(ctx context.Context, want []platform.Route) (bool, error) {
	out, err := r.p.b.Shell.Run(ctx, listRoutesScript())
	if err != nil {
		return false, fmt.Errorf("read the routing table: %w", err)
	}
	var table RouteTable
	if err := json.Unmarshal(out, &table); err != nil {
		return false, fmt.Errorf("read the routing table: %w: %q", err, out)
	}
	var keep []platform.Route
	var remove []StoredRoute
	for _, sr := range table.Routes {
		dst, err1 := netip.ParsePrefix(sr.DestinationPrefix)
		hop, err2 := netip.ParseAddr(sr.NextHop)
		route := platform.Route{Destination: dst, NextHop: hop}
		if err1 == nil && err2 == nil && sr.Store == ActiveStore && sr.InterfaceIndex == table.InterfaceIndex &&
			slices.Contains(want, route) && !slices.Contains(keep, route) {
			keep = append(keep, route)
			continue
		}
		remove = append(remove, sr)
	}
	var add []platform.Route
	for _, rt := range want {
		if !slices.Contains(keep, rt) && !slices.Contains(add, rt) {
			add = append(add, rt)
		}
	}
	if len(remove) == 0 && len(add) == 0 {
		return false, nil
	}
	if len(add) > 0 && table.InterfaceIndex == 0 {
		return false, fmt.Errorf("the machine has no default route, so no interface to route %v through", add)
	}
	if _, err := r.p.b.Shell.Run(ctx, applyRoutesScript(remove, add, table.InterfaceIndex)); err != nil {
		return false, fmt.Errorf("program routes: %w", err)
	}
	return true, nil
}
