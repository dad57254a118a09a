package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// MaxRoutes is how many routes a route table holds: Azure's limit per route table, which the
// local backend enforces too so that a configuration that works here works there.
const MaxRoutes = 400

// Route is one entry of a route table: pods of Destination are reached through NextHop.
type Route struct {
	Name        string       `json:"name"`
	Destination netip.Prefix `json:"destination"`
	NextHop     netip.Addr   `json:"nextHop"`
}

// RouteTable is a route table of the local backend, kept in a file.
type RouteTable struct {
	Name   string  `json:"name"`
	Routes []Route `json:"routes"`
}

// tableLocks serialises changes to a table within the provider process, where Terraform
// creates many routes at once.
var tableLocks sync.Map

func (b *Backend) tablePath(name string) string {
	return filepath.Join(b.StateDir, "routetables", name+".json")
}

// RouteTable reads a table; a table never written is empty.
func (b *Backend) RouteTable(name string) (*RouteTable, error) {
	t := &RouteTable{Name: name}
	data, err := os.ReadFile(b.tablePath(name))
	if errors.Is(err, os.ErrNotExist) {
		return t, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, t); err != nil {
		return nil, fmt.Errorf("route table %s: %w", name, err)
	}
	return t, nil
}

// UpdateRouteTable applies f to a table under its lock and saves the result.
func (b *Backend) UpdateRouteTable(name string, f func(*RouteTable) error) error {
	mu, _ := tableLocks.LoadOrStore(b.tablePath(name), &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	t, err := b.RouteTable(name)
	if err != nil {
		return err
	}
	if err := f(t); err != nil {
		return err
	}
	slices.SortFunc(t.Routes, func(a, b Route) int { return strings.Compare(a.Name, b.Name) })
	data, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	path := b.tablePath(name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Find returns the route of that name.
func (t *RouteTable) Find(name string) (Route, bool) {
	i := slices.IndexFunc(t.Routes, func(r Route) bool { return r.Name == name })
	if i < 0 {
		return Route{}, false
	}
	return t.Routes[i], true
}

// CheckAdd returns why r cannot join the table: a full table, or a destination that overlaps
// another route's.
func (t *RouteTable) CheckAdd(r Route) error {
	others := 0
	for _, o := range t.Routes {
		if o.Name == r.Name {
			continue
		}
		others++
		if o.Destination.Overlaps(r.Destination) {
			return fmt.Errorf("destination %s overlaps %s of route %q in route table %s: each pod CIDR needs exactly one route", r.Destination, o.Destination, o.Name, t.Name)
		}
	}
	if others >= MaxRoutes {
		return fmt.Errorf("route table %s already holds %d routes, the most a route table may hold: spread the routes over several tables or use host-gateway or overlay networking", t.Name, MaxRoutes)
	}
	return nil
}

// Put adds or replaces a route, after CheckAdd.
func (t *RouteTable) Put(r Route) error {
	if err := t.CheckAdd(r); err != nil {
		return err
	}
	t.Remove(r.Name)
	t.Routes = append(t.Routes, r)
	return nil
}

// Remove deletes the route of that name, if any.
func (t *RouteTable) Remove(name string) {
	t.Routes = slices.DeleteFunc(t.Routes, func(r Route) bool { return r.Name == name })
}
