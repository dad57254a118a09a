package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/kubewin/kubewin/internal/atomicfile"
	"github.com/kubewin/kubewin/internal/routetable"
)

// tableLocks serialises changes to a table within the provider process, where Terraform
// creates many routes at once.
var tableLocks sync.Map

func (b *Backend) tablePath(name string) string {
	return filepath.Join(b.StateDir, "routetables", name+".json")
}

// RouteTable reads a table; a table never written is empty.
func (b *Backend) RouteTable(name string) (*routetable.Table, error) {
	t := &routetable.Table{Name: name}
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
func (b *Backend) UpdateRouteTable(name string, f func(*routetable.Table) error) error {
	v, _ := tableLocks.LoadOrStore(b.tablePath(name), &sync.Mutex{})
	mu, ok := v.(*sync.Mutex)
	if !ok {
		panic(fmt.Sprintf("local: tableLocks holds a %T, not a *sync.Mutex", v))
	}
	mu.Lock()
	defer mu.Unlock()
	t, err := b.RouteTable(name)
	if err != nil {
		return err
	}
	if err := f(t); err != nil {
		return err
	}
	slices.SortFunc(t.Routes, func(a, b routetable.Route) int { return strings.Compare(a.Name, b.Name) })
	data, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	path := b.tablePath(name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(path, data, 0o644)
}
