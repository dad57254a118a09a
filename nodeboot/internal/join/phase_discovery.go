package join

import (
	"context"
	"time"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/nodecmd"
	"github.com/kubewin/kubewin/internal/nodestatus"
	"github.com/kubewin/kubewin/nodeboot/internal/discovery"
	"github.com/kubewin/kubewin/nodeboot/internal/platform"
)

// discoveryData is what the discovery phase reads and sets.
type discoveryData interface {
	config() *v1alpha1.NodeConfig
	machine() platform.Platform
	paths() nodecmd.Paths
	timeouts() Timeouts
	clock() func() time.Time
	learned() *Learned
	setBootstrapClient(server string, ca []byte) error
}

// discoveryOptions finds cluster c within timeout, trusting it as its NodeConfig says, over the
// machine's connections.
func discoveryOptions(c v1alpha1.Cluster, timeout time.Duration, now func() time.Time, dial platform.DialFunc) discovery.Options {
	return discovery.Options{Endpoint: c.APIServerEndpoint, Token: c.BootstrapToken, CACertHashes: c.CACertHashes,
		UnsafeSkipCAVerification: c.UnsafeSkipCAVerification, Timeout: timeout, Now: now, Dial: dial}
}

// runDiscovery finds the cluster, pins its CA and keeps the server it trusted.
func runDiscovery(ctx context.Context, d discoveryData) error {
	res, err := discovery.Discover(ctx, discoveryOptions(d.config().Cluster, d.timeouts().Discovery, d.clock(), d.machine().Dialer()))
	if err != nil {
		return err
	}
	if err := d.machine().WriteFile(d.paths().ClusterCA, res.CACert); err != nil {
		return nodestatus.Errorf(nodestatus.CodeInternal, "write the cluster CA: %w", err)
	}
	d.learned().Server = res.Server
	return d.setBootstrapClient(res.Server, res.CACert)
}
