package pool

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-log/tflog"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubewin/kubewin/internal/ipam"
	"github.com/kubewin/kubewin/internal/routetable"
	"github.com/kubewin/kubewin/provider/internal/route"
)

// maxRouteName is the longest route name Azure takes: 1-80 letters, digits, '.', '_' or '-'
// (learn.microsoft.com/azure/azure-resource-manager/management/resource-name-rules#microsoftnetwork).
const maxRouteName = 80

// maxNodeName is the longest node name of a pool: a Windows computer name.
const maxNodeName = 15

// RoutePrefix begins the name of every route pool keeps: "kubewin." + pool + ".". A pool name
// too long for a route name with its longest node name is cut and given 8 hex digits of its
// SHA-256, so that the prefix stays the pool's alone. kubewin_pod_route's names and the
// cloud provider's route controller's (a node's name) do not begin with "kubewin.".
func RoutePrefix(pool string) string {
	const room = maxRouteName - maxNodeName - len("kubewin.") - len(".")
	if len(pool) > room {
		sum := sha256.Sum256([]byte(pool))
		pool = pool[:room-9] + "-" + hex.EncodeToString(sum[:4])
	}
	return "kubewin." + pool + "."
}

// RouteName is the name of the route pool keeps for node.
func RouteName(pool, node string) string { return RoutePrefix(pool) + node }

// nodeRoute is the route a Node needs: its pod CIDR through its InternalIP; ok is false while
// the Node has either not yet.
func nodeRoute(pool string, n *corev1.Node) (r routetable.Route, ok bool) {
	dst, err := ipam.ParsePrefix(n.Spec.PodCIDR)
	if err != nil {
		return routetable.Route{}, false
	}
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		if hop, err := ipam.ParseAddr(a.Address); err == nil {
			return routetable.Route{Name: RouteName(pool, n.Name), Destination: dst, NextHop: hop}, true
		}
	}
	return routetable.Route{}, false
}

// putRoute writes a node's route into the pool's table.
func putRoute(ctx context.Context, s Spec, r routetable.Route) error {
	tflog.Info(ctx, "writing the node's pod route", map[string]any{"route": r.Name, "destination": r.Destination.String(),
		"next_hop": r.NextHop.String()})
	if err := s.Routes.Put(ctx, r); err != nil {
		return fmt.Errorf("write the pod route of pool %s's node: %w", s.Pool, err)
	}
	return nil
}

// removeRoutes deletes the routes of the named nodes from the pool's table.
func removeRoutes(ctx context.Context, s Spec, nodes []string) error {
	if s.Routes == nil || len(nodes) == 0 {
		return nil
	}
	var errs []error
	for _, name := range nodes {
		tflog.Info(ctx, "removing the node's pod route", map[string]any{"route": RouteName(s.Pool, name)})
		if err := s.Routes.Remove(ctx, RouteName(s.Pool, name)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// syncRoutes makes the pool's table hold exactly the routes of the members' nodes: a member's
// route is written when it is missing or differs, and a route of the pool whose node is no
// member is removed. A member whose Node has no pod CIDR or address yet keeps its route as it
// is. One read of the table (shared with other readers), and a write for each route changed.
func syncRoutes(ctx context.Context, s Spec, members []member) error {
	if s.Routes == nil {
		return nil
	}
	table, err := s.Routes.Read(ctx)
	if err != nil {
		return fmt.Errorf("read the route table of pool %s: %w", s.Pool, err)
	}
	kept := map[string]bool{}
	for _, x := range members {
		kept[RouteName(s.Pool, x.Name)] = true
		if x.Node == nil {
			continue
		}
		r, ok := nodeRoute(s.Pool, x.Node)
		if have, found := table.Find(r.Name); !ok || found && have == r {
			continue
		}
		if err := putRoute(ctx, s, r); err != nil {
			return err
		}
	}
	var gone []string
	for _, r := range table.Routes {
		if node, ok := strings.CutPrefix(r.Name, RoutePrefix(s.Pool)); ok && !kept[r.Name] {
			gone = append(gone, node)
		}
	}
	return removeRoutes(ctx, s, gone)
}

// RemoveRoutes deletes every route pool keeps in t: the pool's routes in a table it no longer
// keeps them in.
func RemoveRoutes(ctx context.Context, t route.Table, pool string) error {
	return syncRoutes(ctx, Spec{Pool: pool, Routes: t}, nil)
}

// Unrouted returns the Ready nodes whose route t lacks or holds with another destination or
// next hop: one read of the table (shared with other readers).
func Unrouted(ctx context.Context, t route.Table, pool string, nodes []Node) ([]string, error) {
	table, err := t.Read(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the route table of pool %s: %w", pool, err)
	}
	var out []string
	for _, n := range nodes {
		if !n.Ready {
			continue
		}
		have, found := table.Find(RouteName(pool, n.Name))
		if !found || have.Destination.String() != n.PodCIDR || have.NextHop.String() != n.IP {
			out = append(out, n.Name)
		}
	}
	return out, nil
}
