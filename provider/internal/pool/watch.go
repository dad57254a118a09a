package pool

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/kubewin/kubewin/internal/nodeaccess"
	"github.com/kubewin/kubewin/internal/nodestatus"
)

// poolWatch follows the pool's Nodes and join reports as the cluster changes them: one list and
// one watch of each, whatever the number of nodes, listed again by the informers when a watch
// ends. Waits read it instead of polling the API server.
type poolWatch struct {
	nodes, reports cache.SharedIndexInformer
	// changed receives after a change of either (it holds one signal; more coalesce).
	changed chan struct{}
	stop    context.CancelFunc

	mu      sync.Mutex
	lastErr error // the last list or watch error, for the timeout's message
	// parsed holds each node's report as decoded from the object's version.
	parsed map[string]parsedReport
}

type parsedReport struct {
	version string
	report  *nodestatus.Report
}

// watchPool starts following the pool and returns once both lists arrived, or ctx ended.
func (m *Manager) watchPool(ctx context.Context, s Spec) (*poolWatch, error) {
	f := informers.NewSharedInformerFactoryWithOptions(m.Client, 0, informers.WithNamespace(nodestatus.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = nodeaccess.PoolLabel + "=" + s.Pool }))
	ctx, cancel := context.WithCancel(ctx)
	w := &poolWatch{nodes: f.Core().V1().Nodes().Informer(), reports: f.Core().V1().ConfigMaps().Informer(), changed: make(chan struct{}, 1),
		stop: cancel, parsed: map[string]parsedReport{}}
	signal := func() {
		select {
		case w.changed <- struct{}{}:
		default:
		}
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { signal() },
		UpdateFunc: func(any, any) { signal() },
		DeleteFunc: func(any) { signal() },
	}
	for _, inf := range []cache.SharedIndexInformer{w.nodes, w.reports} {
		if _, err := inf.AddEventHandler(handler); err != nil {
			cancel()
			return nil, err
		}
		if err := inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
			w.mu.Lock()
			w.lastErr = err
			w.mu.Unlock()
		}); err != nil {
			cancel()
			return nil, err
		}
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), w.nodes.HasSynced, w.reports.HasSynced) {
		f.Shutdown()
		cancel()
		if err := w.err(); err != nil {
			return nil, fmt.Errorf("watch the nodes of pool %s: %w", s.Pool, err)
		}
		return nil, ctx.Err()
	}
	w.stop = func() { cancel(); f.Shutdown() }
	return w, nil
}

// node is the named Node as last seen, or nil.
func (w *poolWatch) node(name string) *corev1.Node {
	obj, ok, _ := w.nodes.GetStore().GetByKey(name)
	if !ok {
		return nil
	}
	n, _ := obj.(*corev1.Node) // the informer lists Nodes only
	return n
}

// report is the named node's join report as last seen, nil when it has none. Each version of a
// report object is decoded once: a wait reads the reports of its pending nodes after every change
// of the pool, and decoding all of them each time grew with the square of the pool's size.
func (w *poolWatch) report(name string) *nodestatus.Report {
	obj, ok, _ := w.reports.GetStore().GetByKey(nodestatus.Namespace + "/" + nodestatus.ObjectName(name))
	if !ok {
		return nil
	}
	cm, _ := obj.(*corev1.ConfigMap) // the informer lists ConfigMaps only
	if cm == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if p, ok := w.parsed[name]; ok && p.version == cm.ResourceVersion {
		return p.report
	}
	r := parseReport(cm)
	w.parsed[name] = parsedReport{version: cm.ResourceVersion, report: r}
	return r
}

// err is the last list or watch error, nil when none.
func (w *poolWatch) err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastErr
}
