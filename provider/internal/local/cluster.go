package local

import (
	"context"
	"errors"
	"io"
	"os"

	"github.com/kubewin/kubewin/internal/capin"
	"github.com/kubewin/kubewin/internal/controlplane"
	"github.com/kubewin/kubewin/provider/internal/cluster"
)

// Cluster is a cluster of the local backend: a control plane whose processes run on 127.0.0.1,
// with its data in ClusterDir(Name).
type Cluster struct {
	Backend                  *Backend
	Name                     string
	ClusterCIDR, ServiceCIDR string
	NodeCIDRMaskSize         int
}

var _ cluster.Cluster = (*Cluster)(nil)

// Create starts the control plane, detached: it outlives the provider. A failed start leaves
// nothing behind.
func (c *Cluster) Create(ctx context.Context) (*cluster.State, error) {
	bin, err := c.Backend.ControlPlaneBinDir()
	if err != nil {
		return nil, err
	}
	dir := c.Backend.ClusterDir(c.Name)
	cp, err := controlplane.Start(ctx, controlplane.Config{
		Dir:              dir,
		BinDir:           bin,
		ClusterName:      c.Name,
		Detach:           true,
		Progress:         io.Discard,
		ClusterCIDR:      c.ClusterCIDR,
		ServiceCIDR:      c.ServiceCIDR,
		NodeCIDRMaskSize: c.NodeCIDRMaskSize,
	})
	if err != nil {
		_ = os.RemoveAll(dir) // nothing half-created: Start stopped whatever it had started
		return nil, err
	}
	return stateOf(cp)
}

// Observe loads the control plane; a cluster whose directory is gone is gone.
func (c *Cluster) Observe(context.Context) (*cluster.State, error) {
	cp, err := controlplane.Load(c.Backend.ClusterDir(c.Name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return stateOf(cp)
}

// Repair starts a stopped control plane again.
func (c *Cluster) Repair(ctx context.Context, _ *cluster.State) (*cluster.State, error) {
	cp, err := controlplane.Resume(ctx, c.Backend.ClusterDir(c.Name), io.Discard)
	if err != nil {
		return nil, err
	}
	return stateOf(cp)
}

// Delete stops the control plane and removes its directory.
func (c *Cluster) Delete(ctx context.Context) error {
	dir := c.Backend.ClusterDir(c.Name)
	cp, err := controlplane.Load(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return &cluster.StepError{Step: cluster.StepRead, Err: err}
	}
	return cp.Destroy(ctx)
}

// ReadError is a failure to read a running cluster's CA.
type ReadError struct{ Err error }

func (e *ReadError) Error() string { return e.Err.Error() }
func (e *ReadError) Unwrap() error { return e.Err }

// stateOf is what the control plane's files and processes say of the cluster.
func stateOf(cp *controlplane.ControlPlane) (*cluster.State, error) {
	ca, err := cp.CACert()
	if err != nil {
		return nil, &ReadError{err}
	}
	pin, err := capin.HashPEM(ca)
	if err != nil {
		return nil, &ReadError{err}
	}
	running := true
	for _, up := range cp.Running() {
		running = running && up
	}
	return &cluster.State{
		Endpoint:       cp.Endpoint(),
		CACert:         ca,
		CAHash:         pin,
		Version:        cp.Version,
		KubeconfigPath: cp.AdminKubeconfig(),
		Running:        running,
	}, nil
}
