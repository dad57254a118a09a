package local

import (
	"context"

	"github.com/kubewin/kubewin/internal/nodestatus"
	"github.com/kubewin/kubewin/provider/internal/pool"
)

// Compute is a pool's machines on the local backend.
type Compute struct {
	Backend  *Backend
	Pool     string
	ImageDir string
}

var _ pool.Compute = (*Compute)(nil)

func (c *Compute) Create(_ context.Context, name, generation string, customData []byte) error {
	_, err := c.Backend.CreateMachine(c.Pool, name, generation, c.ImageDir, customData)
	return err
}

func (c *Compute) List(context.Context) ([]pool.VM, error) {
	ms, err := c.Backend.Machines(c.Pool)
	if err != nil {
		return nil, err
	}
	vms := make([]pool.VM, len(ms))
	for i, m := range ms {
		vms[i] = pool.VM{Name: m.Name, Generation: m.Generation, Running: m.Running()}
	}
	return vms, nil
}

func (c *Compute) Delete(ctx context.Context, name string) error {
	ms, err := c.Backend.Machines(c.Pool)
	if err != nil {
		return err
	}
	for _, m := range ms {
		if m.Name == name {
			return c.Backend.DeleteMachine(ctx, c.Pool, m)
		}
	}
	return nil
}

func (c *Compute) LocalReport(name string) *nodestatus.Report {
	r, err := c.Backend.JoinReport(c.Pool, name)
	if err != nil {
		return nil
	}
	return r
}

func (c *Compute) Log(name string) string { return c.Backend.LogTail(c.Pool, name, 15) }
