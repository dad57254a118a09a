package join

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
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

// waitPodCIDR waits for the pod CIDR node IPAM assigns the node's Node: one read, then a watch
// of that Node from the read's version (as the kubelet watches its own Node), not a read every
// 100 ms — a pool's joins all wait here at once, while the controller assigns their CIDRs. A
// failed read or watch is tried again after 100 ms until the timeout.
func waitPodCIDR(ctx context.Context, d networkData) (netip.Prefix, error) {
	if static := d.config().Node.PodCIDR; static != "" {
		return ipam.ParsePrefix(static)
	}
	c, err := d.NodeClient()
	if err != nil {
		return netip.Prefix{}, nodestatus.Errorf(nodestatus.CodeNetworkFailed, "%w", err)
	}
	name, timeout := d.nodeName(), d.timeouts().PodCIDR
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var cidr string
	var readErr error // the last read's failure, retried until the timeout; nil once a read answers
	for cidr == "" && wctx.Err() == nil {
		var failed error
		cidr, failed = watchPodCIDR(wctx, c, name, &readErr)
		if failed != nil {
			select {
			case <-wctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	switch {
	case cidr != "":
	case ctx.Err() != nil:
		return netip.Prefix{}, ctx.Err()
	case readErr != nil:
		return netip.Prefix{}, nodestatus.Errorf(nodestatus.CodePodCIDRTimeout, "node %s got no pod CIDR within %s (last read: %v)", name, timeout,
			readErr)
	default:
		return netip.Prefix{}, nodestatus.Errorf(nodestatus.CodePodCIDRTimeout, "node %s got no pod CIDR within %s", name, timeout)
	}
	p, err := ipam.ParsePrefix(cidr)
	if err != nil {
		return netip.Prefix{}, nodestatus.Errorf(nodestatus.CodeNetworkFailed, "pod CIDR %q assigned to the node: %w", cidr, err)
	}
	return p, nil
}

// watchPodCIDR reads the Node and, while it has no pod CIDR, watches it until it has one, the
// watch ends or ctx ends. It returns the pod CIDR, or the failure of the read or the watch to
// back off from. readErr keeps the last read's failure (nil once a read answers); a read or
// watch that ctx's deadline cut short is not the cluster's answer and changes nothing.
func watchPodCIDR(ctx context.Context, c kubernetes.Interface, name string, readErr *error) (string, error) {
	node, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if ctx.Err() == nil {
			*readErr = err
		}
		return "", err
	}
	*readErr = nil
	if node.Spec.PodCIDR != "" {
		return node.Spec.PodCIDR, nil
	}
	w, err := c.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: node.ResourceVersion,
	})
	if err != nil {
		return "", err
	}
	defer w.Stop()
	for {
		var ev watch.Event
		select {
		case <-ctx.Done():
			return "", nil
		case e, ok := <-w.ResultChan():
			if !ok {
				return "", nil
			}
			ev = e
		}
		switch obj := ev.Object.(type) {
		case *corev1.Node:
			if obj.Spec.PodCIDR != "" {
				return obj.Spec.PodCIDR, nil
			}
		case *metav1.Status: // the watch failed (its version is too old): read again
			return "", apierrors.FromObject(obj)
		}
	}
}
