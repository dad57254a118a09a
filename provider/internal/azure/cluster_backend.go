package azure

import (
	"context"
	"strings"

	"k8s.io/client-go/kubernetes"

	"github.com/kubewin/kubewin/provider/internal/cluster"
)

// ClusterBackend is an azure cluster as kubewin_cluster's backend.
type ClusterBackend struct {
	*Cluster
	// Access returns an admin credential of the cluster, which Repair needs.
	Access func(ctx context.Context) (*Access, error)
}

var _ cluster.Cluster = ClusterBackend{}

// Create makes the cluster (Cluster.Create).
func (c ClusterBackend) Create(ctx context.Context) (*cluster.State, error) {
	s, err := c.Cluster.Create(ctx)
	if s == nil {
		return nil, err
	}
	return &cluster.State{
		Endpoint: "https://" + s.Endpoint,
		FQDN:     s.FQDN,
		CACert:   s.CACert,
		CAHash:   s.CAHash,
		Running:  true,
	}, err
}

// Observe counts the control planes and agents that exist; the cluster runs when they are
// those of its spec.
func (c ClusterBackend) Observe(ctx context.Context) (*cluster.State, error) {
	o, err := c.Cluster.Observe(ctx)
	if err != nil || !o.Exists {
		return nil, err
	}
	return &cluster.State{
		ControlPlanes: o.ControlPlanes,
		Agents:        o.Agents,
		Running:       o.ControlPlanes == c.Spec.ControlPlanes.Count && o.Agents == c.Spec.Agents.Count,
	}, nil
}

// Repair makes missing control planes again and adds new ones, gives the cloud provider's
// identity the roles it needs now, applies the cloud provider's and the CSI drivers' objects
// again (a changed version, routes or drivers, drift), and scales the Linux agents.
func (c ClusterBackend) Repair(ctx context.Context, last *cluster.State) (*cluster.State, error) {
	state := &ClusterState{
		Endpoint: strings.TrimPrefix(last.Endpoint, "https://"),
		FQDN:     last.FQDN,
		CACert:   last.CACert,
		CAHash:   last.CAHash,
	}
	access, err := c.Access(ctx)
	if err != nil {
		return nil, &cluster.StepError{Step: cluster.StepConnect, Err: err}
	}
	var missing []int
	for i := range c.Spec.ControlPlanes.Count {
		ok, err := c.ControlPlaneProvisioned(ctx, i)
		if err != nil {
			return nil, &cluster.StepError{Step: cluster.StepRead, Err: err}
		}
		if !ok {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		if err := c.AddControlPlanes(ctx, access, state, missing); err != nil {
			return nil, &cluster.StepError{Step: cluster.StepAddControlPlane, Err: err}
		}
	}
	client, err := kubernetes.NewForConfig(access.REST())
	if err != nil {
		return nil, &cluster.StepError{Step: cluster.StepConnect, Err: err}
	}
	if c.Spec.CloudProvider != nil {
		if err := c.ensureIdentityRoles(ctx); err != nil {
			return nil, &cluster.StepError{Step: cluster.StepCloudProvider, Err: err}
		}
	}
	if err := c.ApplyCloudProvider(ctx, client, state); err != nil {
		return nil, &cluster.StepError{Step: cluster.StepCloudProvider, Err: err}
	}
	if err := c.ScaleAgents(ctx, access, state, c.Spec.Agents.Count); err != nil {
		return nil, &cluster.StepError{Step: cluster.StepScale, Err: err}
	}
	return &cluster.State{Running: true}, nil
}
