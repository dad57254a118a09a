// Package routetable holds the rules of the route tables kubewin_pod_route writes, whatever the
// backend: at most MaxRoutes routes, and no two routes whose destinations overlap.
package routetable

import (
	"fmt"
	"net/netip"
	"slices"
)

// MaxRoutes is how many routes a route table holds: Azure's limit per route table, which the
// local backend keeps too, so that a configuration that works there works on Azure.
const MaxRoutes = 400

// Route is one entry of a route table: pods of Destination are reached through NextHop.
type Route struct {
	Name        string       `json:"name"`
	Destination netip.Prefix `json:"destination"`
	NextHop     netip.Addr   `json:"nextHop"`
}

// Table is a route table: what a backend stores, or what a plan leaves.
type Table struct {
	Name   string  `json:"name"`
	Routes []Route `json:"routes"`
}

// Find returns the route of that name.
func (t *Table) Find(name string) (Route, bool) {
	i := slices.IndexFunc(t.Routes, func(r Route) bool { return r.Name == name })
	if i < 0 {
		return Route{}, false
	}
	return t.Routes[i], true
}

// CheckAdd returns why r cannot join the table: a full table, or a destination that overlaps
// another route's.
func (t *Table) CheckAdd(r Route) error {
	others := 0
	for _, o := range t.Routes {
		if o.Name == r.Name {
			continue
		}
		others++
		if o.Destination.Overlaps(r.Destination) {
			return fmt.Errorf("destination %s overlaps %s of route %q in route table %s: each pod CIDR needs exactly one route", r.Destination, o.Destination,
				o.Name, t.Name)
		}
	}
	if others >= MaxRoutes {
		return fmt.Errorf("route table %s already holds %d routes, the most a route table may hold: spread the routes over several tables or use "+
			"host-gateway or overlay networking", t.Name, MaxRoutes)
	}
	return nil
}

// Put adds or replaces a route, after CheckAdd.
func (t *Table) Put(r Route) error {
	if err := t.CheckAdd(r); err != nil {
		return err
	}
	t.Remove(r.Name)
	t.Routes = append(t.Routes, r)
	return nil
}

// Remove deletes the route of that name, if any.
func (t *Table) Remove(name string) {
	t.Routes = slices.DeleteFunc(t.Routes, func(r Route) bool { return r.Name == name })
}
