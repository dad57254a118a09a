package local

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/kubewin/kubewin/internal/api"
	"github.com/kubewin/kubewin/internal/capin"
	"github.com/kubewin/kubewin/internal/nodestatus"
	"github.com/kubewin/kubewin/internal/winname"
	"github.com/kubewin/kubewin/provider/internal/pool"
)

// Compute is a pool's machines on the local backend, shaped like a cloud scale set: machines
// are added and deleted in batches, named prefix + base-36 index with indices never reused.
type Compute struct {
	Backend  *Backend
	Pool     string
	Prefix   string
	ImageDir string
	// AnyCluster lets the pool's simulated machines join a cluster this backend did not create
	// (the pool's explicit opt-in). Without it Add refuses a NodeConfig that pins any other CA.
	AnyCluster bool
}

var _ pool.Compute = (*Compute)(nil)

func (c *Compute) List(context.Context) ([]pool.Machine, error) {
	ms, err := c.Backend.Machines(c.Pool)
	if err != nil {
		return nil, err
	}
	out := make([]pool.Machine, len(ms))
	for i, m := range ms {
		out[i] = pool.Machine{Name: m.Name, Running: m.Running()}
	}
	return out, nil
}

// joinsAtOnce bounds how many of its machines Add has joining at once. A join costs this host's
// control plane and the machine's nodeboot about half a CPU-second, and each machine's nodeboot
// is a process of its own, which the host's scheduler gives as much CPU as the API server: 500
// started at once on 2 cores starved the control plane until the joins' requests timed out
// (discovery took 28 s, pod CIDR reads ran into their 30 s timeout and the join failed).
var joinsAtOnce = 16 * runtime.NumCPU()

// Add provisions n machines and starts their nodeboot, at most joinsAtOnce joining at a time:
// the next starts when an earlier one's join is done or failed, or its nodeboot stopped. It
// returns once the last has started; the pool waits for their nodes.
func (c *Compute) Add(ctx context.Context, n int, customData []byte, named func([]string) error) ([]string, error) {
	if err := c.checkCluster(customData); err != nil {
		return nil, err
	}
	first, err := c.Backend.reserveIndices(c.Pool, n)
	if err != nil {
		return nil, err
	}
	names := make([]string, n)
	for i := range names {
		if names[i], err = winname.ComputerName(c.Prefix, first+i); err != nil {
			return nil, err
		}
	}
	if err := named(names); err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop() // the last machines' joins are the pool's to wait for
	joining := make(chan struct{}, joinsAtOnce)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, name := range names {
		select {
		case joining <- struct{}{}:
		case <-ctx.Done():
			errs[i] = fmt.Errorf("machine %s not created: %w", name, ctx.Err())
			continue
		}
		wg.Go(func() {
			var m Machine
			m, errs[i] = c.Backend.CreateMachine(c.Pool, name, c.ImageDir, customData)
			go func() {
				if errs[i] == nil {
					c.Backend.waitJoin(ctx, c.Pool, m)
				}
				<-joining
			}()
		})
	}
	wg.Wait()
	var created []string
	for i, name := range names {
		if errs[i] == nil {
			created = append(created, name)
		}
	}
	return created, errors.Join(errs...)
}

// checkCluster refuses a NodeConfig aimed at a cluster this backend did not create, unless the
// pool opted in: simulated machines run no containers, and a real cluster would schedule its
// workloads onto them.
func (c *Compute) checkCluster(customData []byte) error {
	if c.AnyCluster {
		return nil
	}
	cfg, err := api.DecodeNodeConfig(customData)
	if err != nil {
		return err
	}
	pins, err := c.Backend.ClusterPins()
	if err != nil {
		return err
	}
	for _, pin := range cfg.Cluster.CACertHashes {
		if slices.Contains(pins, pin) {
			return nil
		}
	}
	return fmt.Errorf("the local backend's simulated machines join only clusters it created (kubewin_cluster), and %s is not one of them",
		cfg.Cluster.APIServerEndpoint)
}

func (c *Compute) Delete(ctx context.Context, names []string) error {
	ms, err := c.Backend.Machines(c.Pool)
	if err != nil {
		return err
	}
	errs := make([]error, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		if slices.Contains(names, m.Name) {
			wg.Go(func() { errs[i] = c.Backend.DeleteMachine(ctx, c.Pool, m) })
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (c *Compute) Destroy(context.Context) error { return c.Backend.DeletePool(c.Pool) }

// Diagnose fetches the machine's bundle from its directory: nodeboot diagnose run on its drive.
func (c *Compute) Diagnose(ctx context.Context, name string) (*pool.Diagnosis, error) {
	summary, bundle, err := c.Backend.Diagnose(ctx, c.Pool, name)
	if err != nil {
		return nil, err
	}
	d := &pool.Diagnosis{Bundle: bundle}
	d.Summary, d.Report, _ = nodestatus.ParseDiagnosis(summary)
	return d, nil
}

func (c *Compute) Reports(_ context.Context, names []string) map[string]*nodestatus.Report {
	out := map[string]*nodestatus.Report{}
	for _, name := range names {
		if r, err := c.Backend.JoinReport(c.Pool, name); err == nil {
			out[name] = r
		}
	}
	return out
}

func (c *Compute) Log(_ context.Context, name string) string {
	return c.Backend.LogTail(c.Pool, name, 15)
}

// ClusterPins are the CA pins of the backend's clusters.
func (b *Backend) ClusterPins() ([]string, error) {
	names, err := b.Clusters()
	if err != nil {
		return nil, err
	}
	var pins []string
	for _, name := range names {
		cp, err := b.Cluster(name)
		if err != nil {
			continue // a cluster being created or removed
		}
		ca, err := cp.CACert()
		if err != nil {
			continue
		}
		if pin, err := capin.HashPEM(ca); err == nil {
			pins = append(pins, pin)
		}
	}
	return pins, nil
}
