package join

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/nodestatus"
	"github.com/kubewin/kubewin/nodeboot/internal/platform"
)

// routesData is what the routes phase reads.
type routesData interface {
	config() *v1alpha1.NodeConfig
	nodeName() string
	machine() platform.Platform
	out() io.Writer
	NodeClient() (kubernetes.Interface, error)
}

// runRoutes programs the way to the other nodes' pod CIDRs in the network modes that route.
func runRoutes(ctx context.Context, d routesData) error {
	mode := d.config().Network.Mode
	switch mode {
	case v1alpha1.NetworkModeHostGateway, v1alpha1.NetworkModeOverlay:
	default:
		_, _ = fmt.Fprintf(d.out(), "[%s] nothing to program in network mode %s\n", PhaseRoutes, mode)
		return nil
	}
	c, err := d.NodeClient()
	if err != nil {
		return nodestatus.Errorf(nodestatus.CodeRoutesFailed, "%w", err)
	}
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nodestatus.Errorf(nodestatus.CodeRoutesFailed, "list nodes: %w", err)
	}
	_, err = programPeers(ctx, d, nodes.Items)
	return err
}

// programPeers programs the way to every other node's pod CIDR: host-gateway routes through
// their addresses, or the overlay's remote subnets through their VTEPs. It reports whether it
// changed any.
func programPeers(ctx context.Context, d routesData, nodes []corev1.Node) (bool, error) {
	network, p := d.config().Network, d.machine()
	var changed bool
	var err error
	switch network.Mode {
	case v1alpha1.NetworkModeHostGateway:
		changed, err = p.Routes().Replace(ctx, PeerRoutes(d.nodeName(), nodes))
	case v1alpha1.NetworkModeOverlay:
		changed, err = p.Network().ReplaceRemoteSubnets(ctx, network.Name, PeerRemoteSubnets(d.nodeName(), nodes))
	}
	if err != nil {
		return changed, nodestatus.Errorf(nodestatus.CodeRoutesFailed, "%w", err)
	}
	return changed, nil
}

// PeerRoutes are the host-gateway routes of node self: each other node's pod CIDR via its
// InternalIP, sorted by destination.
func PeerRoutes(self string, nodes []corev1.Node) []platform.Route {
	var out []platform.Route
	for _, node := range nodes {
		if node.Name == self || node.Spec.PodCIDR == "" {
			continue
		}
		dst, err := netip.ParsePrefix(node.Spec.PodCIDR)
		if err != nil {
			continue
		}
		for _, a := range node.Status.Addresses {
			if a.Type != corev1.NodeInternalIP {
				continue
			}
			if hop, err := netip.ParseAddr(a.Address); err == nil && hop.Is4() {
				out = append(out, platform.Route{Destination: dst, NextHop: hop})
				break
			}
		}
	}
	slices.SortFunc(out, func(a, b platform.Route) int { return strings.Compare(a.Destination.String(), b.Destination.String()) })
	return out
}
