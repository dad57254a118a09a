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
)

// Serve is what the nodeboot service does on every boot: finish the join if it is not done,
// re-create the HNS network before the kubelet starts, start the node services, and keep
// host-gateway routes in step with the Nodes until ctx ends.
func (n *Node) Serve(ctx context.Context) error {
	if !n.Joined() {
		if err := n.Join(ctx); err != nil {
			return err
		}
	}
	if err := n.EnsureNetwork(ctx); err != nil {
		return err
	}
	if err := n.services(ctx); err != nil {
		return err
	}
	fmt.Fprintf(n.Out, "[run] node %s is up\n", n.Name)
	if n.Config.Network.Mode == v1alpha1.NetworkModeHostGateway {
		return n.reconcileRoutes(ctx)
	}
	<-ctx.Done()
	return nil
}

// reconcileRoutes reprograms the routes whenever a Node's pod CIDR or address changes.
func (n *Node) reconcileRoutes(ctx context.Context) error {
	c, err := n.NodeClient()
	if err != nil {
		return err
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
		AddFunc: poke, DeleteFunc: poke, UpdateFunc: func(_, o any) { poke(o) },
	}); err != nil {
		return err
	}
	go informer.RunWithContext(ctx)
	cache.WaitForCacheSync(ctx.Done(), informer.HasSynced)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
			var nodes []corev1.Node
			for _, obj := range informer.GetStore().List() {
				nodes = append(nodes, *obj.(*corev1.Node))
			}
			if err := n.ReplaceRoutes(ctx, nodes); err != nil {
				fmt.Fprintf(n.Out, "[routes] %v\n", err)
			}
		}
	}
}
