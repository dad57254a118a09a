package join

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/nodeboot/internal/logfile"
)

// Serve is what the nodeboot service does on every boot: finish the join if it is not done,
// make the HNS network exist, and only then start the node services, which the service manager
// never starts on its own; then, until ctx ends, keep the node as it should be (keep): the way
// to the other nodes' pods (host-gateway routes, overlay remote subnets and this node's VTEP)
// in step with the Nodes, the network and services repaired when they drift, and the node's
// conditions published.
func (n *Node) Serve(ctx context.Context) error {
	if !n.Joined() {
		if err := n.Join(ctx); err != nil {
			return err
		}
	}
	if err := removeStalePodState(ctx, n); err != nil {
		return err
	}
	vtepMAC, err := ensureNetwork(ctx, n)
	if err != nil {
		return err
	}
	if err := runServices(ctx, n); err != nil {
		return err
	}
	_, _ = fmt.Fprintf(n.Out, "[run] node %s is up\n", n.Name)
	if n.Config.Runtime.Name == v1alpha1.RuntimeContainerd {
		go n.rotateContainerdLog(ctx)
	}
	return n.keep(ctx, vtepMAC)
}

// removeStalePodState removes, before the network is ensured, what the pods and kube-proxy of
// an earlier boot left in HNS (the endpoints of pods that no longer exist, the services' load
// balancers), as Windows node setups do at every boot (aks-engine windowsnodereset.ps1). It does
// so only while neither the kubelet nor kube-proxy runs, as after a restart (nodeboot starts
// them): a nodeboot restarted beside running services leaves their pods' state alone.
func removeStalePodState(ctx context.Context, n *Node) error {
	if n.Config.Network.Mode == v1alpha1.NetworkModeExternal {
		return nil
	}
	for _, name := range []string{"kubelet", "kube-proxy"} {
		running, err := n.Platform.Services().Running(ctx, name)
		if err != nil || running {
			return err
		}
	}
	if err := n.Platform.Network().RemovePodState(ctx, n.Config.Network.Name); err != nil {
		return fmt.Errorf("remove the stale pod endpoints and load balancers of the last boot: %w", err)
	}
	return nil
}

// logRotationInterval is how often containerd's log is checked for rotation: hourly, as
// Kubernetes' Windows node setup schedules its log rotation (cluster/gce/windows/configure.ps1:
// Schedule-LogRotation -RepetitionInterval $(New-Timespan -Hour 1)).
const logRotationInterval = time.Hour

// rotateContainerdLog rotates the log containerd writes itself, and never rotates, until ctx
// ends. containerd holds the file open, so it is copied aside and truncated.
func (n *Node) rotateContainerdLog(ctx context.Context) {
	t := time.NewTicker(logRotationInterval)
	defer t.Stop()
	for {
		if err := logfile.CopyTruncate(n.Platform.Path(n.Paths.ContainerdLog()), logfile.Default, time.Now()); err != nil {
			_, _ = fmt.Fprintf(n.Out, "[run] rotate %s: %v\n", n.Paths.ContainerdLog(), err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// watchNodes runs an informer on the Nodes until ctx ends, waits for its first list, and
// returns its store and a channel that receives when a Node's peer key changes: one watch,
// the node's only one (on Windows each reconciliation runs PowerShell, so status heartbeats
// are not passed on).
func (n *Node) watchNodes(ctx context.Context) (cache.Store, <-chan struct{}, error) {
	c, err := n.NodeClient()
	if err != nil {
		return nil, nil, err
	}
	lw := cache.NewListWatchFromClient(c.CoreV1().RESTClient(), "nodes", metav1.NamespaceAll, fields.Everything())
	informer := cache.NewSharedIndexInformer(lw, &corev1.Node{}, 10*time.Minute, cache.Indexers{})
	changed := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: poke, DeleteFunc: poke,
		UpdateFunc: func(old, cur any) {
			if peerKey(old) != peerKey(cur) {
				poke(cur)
			}
		},
	}); err != nil {
		return nil, nil, err
	}
	go informer.RunWithContext(ctx)
	cache.WaitForCacheSync(ctx.Done(), informer.HasSynced)
	return informer.GetStore(), changed, nil
}

// storedNodes are the Nodes in an informer's store.
func storedNodes(store cache.Store) []corev1.Node {
	var nodes []corev1.Node
	for _, obj := range store.List() {
		if node, ok := obj.(*corev1.Node); ok { // the informer lists Nodes only
			nodes = append(nodes, *node)
		}
	}
	return nodes
}

// peerKey is what of a Node the way to its pods depends on: its name, pod CIDR, addresses and
// flannel lease annotations.
func peerKey(obj any) string {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return ""
	}
	a := node.Annotations
	return fmt.Sprint(node.Name, node.Spec.PodCIDR, node.Status.Addresses,
		a[AnnotationKubeSubnetManager], a[AnnotationBackendType], a[AnnotationBackendData], a[AnnotationPublicIP])
}
