package join

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kubewin/kubewin/internal/ipam"
	"github.com/kubewin/kubewin/internal/nodestatus"
	"github.com/kubewin/kubewin/nodeboot/internal/platform"
)

// networkData is what the network phase reads and sets.
type networkData interface {
	renderData
	machine() platform.Platform
	timeouts() Timeouts
	out() io.Writer
	NodeClient() (kubernetes.Interface, error)
}

// runNetwork learns the node's address and pod CIDR, makes the HNS network, publishes the
// overlay's VTEP and writes the CNI configuration.
func runNetwork(ctx context.Context, d networkData) error {
	ip, subnet, err := nodeAddress(d)
	if err != nil {
		return nodestatus.Errorf(nodestatus.CodeNetworkFailed, "%w", err)
	}
	l := d.learned()
	l.NodeIP, l.Subnet = ip, subnet
	pod, err := waitPodCIDR(ctx, d)
	if err != nil {
		return err
	}
	l.PodCIDR = pod
	vtepMAC, err := ensureNetwork(ctx, d)
	if err != nil {
		return err
	}
	if err := publishVTEP(ctx, d, vtepMAC); err != nil {
		return nodestatus.Errorf(nodestatus.CodeNetworkFailed, "%w", err)
	}
	p, err := plan(d)
	if err != nil {
		return nodestatus.Errorf(nodestatus.CodeNetworkFailed, "%w", err)
	}
	return writeFiles(d.machine(), d.paths(), p, true, nodestatus.CodeNetworkFailed)
}

// ensureNetwork (re)creates the node's HNS network and returns the overlay's VTEP
// (distributed router) MAC as Ensure reported it; Serve calls it on every boot before it
// starts the kubelet, because HNS networks do not reliably survive a reboot.
func ensureNetwork(ctx context.Context, d networkData) (vtepMAC string, err error) {
	pod := d.learned().PodCIDR
	if !pod.IsValid() {
		return "", nodestatus.Errorf(nodestatus.CodeNetworkFailed, "the node has no pod CIDR yet: run the network phase")
	}
	spec, ok, err := platform.NetworkSpecFor(d.config(), pod)
	if err != nil {
		return "", nodestatus.Errorf(nodestatus.CodeNetworkFailed, "%w", err)
	}
	if !ok {
		return "", nil
	}
	info, err := d.machine().Network().Ensure(ctx, spec)
	if err != nil {
		return "", nodestatus.Errorf(nodestatus.CodeNetworkFailed, "HNS network %s: %w", spec.Name, err)
	}
	return info.VTEPMAC, nil
}

func nodeAddress(d networkData) (netip.Addr, netip.Prefix, error) {
	node, network := d.config().Node, d.config().Network
	var subnet netip.Prefix
	if node.Subnet != "" {
		subnet, _ = ipam.ParsePrefix(node.Subnet)
	}
	if node.IP != "" {
		ip, err := ipam.ParseAddr(node.IP)
		return ip, subnet, err
	}
	ip, found, err := d.machine().Address(network.InterfaceName)
	if err != nil {
		return netip.Addr{}, netip.Prefix{}, fmt.Errorf("address of adapter %q (network.interfaceName): %w", network.InterfaceName, err)
	}
	if !subnet.IsValid() {
		subnet = found
	}
	return ip, subnet, nil
}

func waitPodCIDR(ctx context.Context, d networkData) (netip.Prefix, error) {
	if static := d.config().Node.PodCIDR; static != "" {
		return ipam.ParsePrefix(static)
	}
	c, err := d.NodeClient()
	if err != nil {
		return netip.Prefix{}, nodestatus.Errorf(nodestatus.CodeNetworkFailed, "%w", err)
	}
	name, timeout := d.nodeName(), d.timeouts().PodCIDR
	var cidr string
	var readErr error // the last read's failure, retried until the timeout; nil once a read answers
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		node, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		switch {
		case err != nil && ctx.Err() != nil:
			return false, nil //nolint:nilerr // the wait's own deadline cut the read short: not the cluster's answer
		case err != nil:
			readErr = err
			return false, nil //nolint:nilerr // a failed read is retried until the timeout; readErr keeps it for the message
		}
		readErr = nil
		cidr = node.Spec.PodCIDR
		return cidr != "", nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return netip.Prefix{}, ctx.Err()
		}
		if readErr != nil {
			return netip.Prefix{}, nodestatus.Errorf(nodestatus.CodePodCIDRTimeout, "node %s got no pod CIDR within %s (last read: %v)", name, timeout,
				readErr)
		}
		return netip.Prefix{}, nodestatus.Errorf(nodestatus.CodePodCIDRTimeout, "node %s got no pod CIDR within %s", name, timeout)
	}
	p, err := ipam.ParsePrefix(cidr)
	if err != nil {
		return netip.Prefix{}, nodestatus.Errorf(nodestatus.CodeNetworkFailed, "pod CIDR %q assigned to the node: %w", cidr, err)
	}
	return p, nil
}
