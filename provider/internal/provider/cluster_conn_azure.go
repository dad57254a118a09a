package provider

import (
	"context"
	"sync"
	"time"

	"github.com/kubewin/kubewin/provider/internal/azure"
)

// azureAccesses caches the admin credentials of azure clusters for the provider process: taking
// one costs a run command on a control plane.
type azureAccesses struct {
	mu     sync.Mutex
	byID   map[string]*azure.Access
	flight map[string]*sync.Mutex
}

// azureAccess returns a short-lived admin credential of the azure cluster with this ID.
func (d *providerData) azureAccess(ctx context.Context, id string) (*azure.Access, error) {
	a := &d.azureClusters
	a.mu.Lock()
	if a.byID == nil {
		a.byID, a.flight = map[string]*azure.Access{}, map[string]*sync.Mutex{}
	}
	if acc := a.byID[id]; acc != nil && time.Until(acc.Expires) > 10*time.Minute {
		a.mu.Unlock()
		return acc, nil
	}
	one := a.flight[id]
	if one == nil {
		one = &sync.Mutex{}
		a.flight[id] = one
	}
	a.mu.Unlock()
	// One run command per cluster at a time: the others wait for its credential.
	one.Lock()
	defer one.Unlock()
	a.mu.Lock()
	if acc := a.byID[id]; acc != nil && time.Until(acc.Expires) > 10*time.Minute {
		a.mu.Unlock()
		return acc, nil
	}
	a.mu.Unlock()
	client, err := d.azure(ctx)
	if err != nil {
		return nil, err
	}
	c, err := client.OpenCluster(id)
	if err != nil {
		return nil, err
	}
	endpoint, masters, err := c.Endpoint(ctx)
	if err != nil {
		return nil, err
	}
	acc, err := c.Access(ctx, endpoint, masters)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	a.byID[id] = acc
	a.mu.Unlock()
	return acc, nil
}

// forgetAzureAccess drops a deleted cluster's credential.
func (d *providerData) forgetAzureAccess(id string) {
	d.azureClusters.mu.Lock()
	defer d.azureClusters.mu.Unlock()
	delete(d.azureClusters.byID, id)
}
