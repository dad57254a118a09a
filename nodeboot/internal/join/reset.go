package join

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
)

// Reset undoes the join on the machine: services (newest first), the HNS network, the kubelet
// credential and kubeconfig, the cluster CA and the join state. The cluster is not touched.
func (n *Node) Reset(ctx context.Context) error {
	var errs []error
	if specs, err := n.ServiceSpecs(); err == nil {
		slices.Reverse(specs)
		for _, s := range specs {
			if err := n.Platform.Services().Delete(ctx, s.Name); err != nil {
				errs = append(errs, fmt.Errorf("remove service %s: %w", s.Name, err))
			}
		}
	}
	if err := n.Platform.Network().Delete(ctx, n.Config.Network.Name); err != nil {
		errs = append(errs, fmt.Errorf("delete HNS network %s: %w", n.Config.Network.Name, err))
	}
	for _, f := range []string{n.currentPEM(), n.bootstrapCertFile(), n.bootstrapKeyFile(), n.Paths.KubeletKubeconfig, n.Paths.ClusterCA, n.statePath()} {
		if err := os.Remove(n.Platform.Path(f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Fprintf(n.Out, "[reset] node %s: services, network, credentials and state removed; drain and delete the Node in the cluster\n", n.Name)
	return n.Open()
}
