package join

import (
	"context"
	"slices"

	"github.com/kubewin/kubewin/internal/testkit/floor"
)

// floorNode runs the floor's join (floor.Join: the least a correct kubeadm-style join does) with
// a node's token, pin, name and dialer.
func floorNode(ctx context.Context, n *Node) error {
	c := n.Config.Cluster
	_, err := floor.Join(ctx, c.APIServerEndpoint, c.BootstrapToken, c.CACertHashes[0], n.Name, n.Platform.Dialer())
	return err
}

// percentile returns the p-th percentile (0–100) of sorted durations, in milliseconds.
func percentile(sorted []float64, p int) float64 {
	return sorted[min(len(sorted)-1, len(sorted)*p/100)]
}

// sortedMS sorts and returns the figures.
func sortedMS(v []float64) []float64 {
	slices.Sort(v)
	return v
}
