package join

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/kubewin/kubewin/internal/nodeaccess"
)

// credentials runs a join from discovery to the kubelet credential, with the state file and
// the reports nodeboot keeps on the way, and returns its wall time.
func credentials(ctx context.Context, n *Node) (time.Duration, error) {
	if err := n.RunPhase(ctx, PhasePreflight); err != nil {
		return 0, err
	}
	start := time.Now()
	err := n.RunPhase(ctx, PhaseTLSBootstrap) // runs discovery first
	return time.Since(start), err
}

// BenchmarkJoin measures one join at a time, from discovery to the kubelet credential, and,
// alternating with it against the same control plane, the floor (floor.Join). It reports p50
// and p95 of both and nodeboot's as ratios to the floor.
func BenchmarkJoin(b *testing.B) {
	var joins, floors []float64
	for b.Loop() {
		b.StopTimer()
		n, f := newNode(b, nodeOpts{}), newNode(b, nodeOpts{})
		start := time.Now()
		if err := floorNode(context.Background(), f); err != nil {
			b.Fatal(err)
		}
		floors = append(floors, ms(time.Since(start)))
		b.StartTimer()
		d, err := credentials(context.Background(), n)
		if err != nil {
			b.Fatal(err)
		}
		joins = append(joins, ms(d))
	}
	joins, floors = sortedMS(joins), sortedMS(floors)
	for _, p := range []struct {
		name string
		at   int
	}{{"p50", 50}, {"p95", 95}} {
		b.ReportMetric(percentile(joins, p.at), p.name+"-ms")
		b.ReportMetric(percentile(floors, p.at), "floor-"+p.name+"-ms")
		b.ReportMetric(percentile(joins, p.at)/percentile(floors, p.at), p.name+"-x-floor")
	}
}

// BenchmarkConcurrentJoins measures the wall time of 100 nodes joining at once, and of 100
// floor joins at once (floor.Join) in the same iteration, and reports the ratio.
func BenchmarkConcurrentJoins(b *testing.B) {
	const nodes = 100
	var walls, floors []float64
	for b.Loop() {
		b.StopTimer()
		join, floor := poolOf(b, nodes), poolOf(b, nodes)
		floors = append(floors, wall(b, floor, func(ctx context.Context, n *Node) error { return floorNode(ctx, n) }))
		b.StartTimer()
		walls = append(walls, wall(b, join, func(ctx context.Context, n *Node) error {
			_, err := credentials(ctx, n)
			return err
		}))
	}
	walls, floors = sortedMS(walls), sortedMS(floors)
	b.ReportMetric(percentile(walls, 50)/1000, "wall-s/100-joins")
	b.ReportMetric(percentile(floors, 50)/1000, "floor-wall-s/100-joins")
	b.ReportMetric(percentile(walls, 50)/percentile(floors, 50), "wall-x-floor")
}

// poolOf prepares nodes of one pool, sharing its token, with the report objects and access of
// all of them, as a pool makes them (newNode prepares its pool for its one node).
func poolOf(b *testing.B, nodes int) []*Node {
	first := newNode(b, nodeOpts{})
	pool := first.Config.Node.Labels[nodeaccess.PoolLabel]
	ns, names := []*Node{first}, []string{first.Name}
	for len(ns) < nodes {
		n := newNode(b, nodeOpts{pool: pool, token: first.Config.Cluster.BootstrapToken})
		ns, names = append(ns, n), append(names, n.Name)
	}
	if err := nodeaccess.Prepare(context.Background(), admin(b), pool, names); err != nil {
		b.Fatal(err)
	}
	return ns
}

// wall runs join for every node at once and returns the wall time in milliseconds.
func wall(b *testing.B, ns []*Node, join func(context.Context, *Node) error) float64 {
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, len(ns))
	for _, n := range ns {
		wg.Go(func() { errs <- join(context.Background(), n) })
	}
	wg.Wait()
	took := ms(time.Since(start))
	close(errs)
	for err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	return took
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
