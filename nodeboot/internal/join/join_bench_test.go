package join

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
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

// BenchmarkJoin measures one join at a time, from discovery to the kubelet credential, and
// reports p50 and p95 besides the mean.
func BenchmarkJoin(b *testing.B) {
	var took []time.Duration
	for b.Loop() {
		b.StopTimer()
		n := newNode(b, nodeOpts{})
		b.StartTimer()
		d, err := credentials(context.Background(), n)
		if err != nil {
			b.Fatal(err)
		}
		took = append(took, d)
	}
	slices.Sort(took)
	b.ReportMetric(ms(took[len(took)/2]), "p50-ms")
	b.ReportMetric(ms(took[len(took)*95/100]), "p95-ms")
}

// BenchmarkConcurrentJoins measures the wall time of 100 nodes joining at once.
func BenchmarkConcurrentJoins(b *testing.B) {
	const nodes = 100
	var walls []time.Duration
	for b.Loop() {
		b.StopTimer()
		pool := newNode(b, nodeOpts{})
		ns := []*Node{pool}
		for len(ns) < nodes {
			ns = append(ns, newNode(b, nodeOpts{pool: pool.Config.Node.Labels["kubewin.io/pool"], token: pool.Config.Cluster.BootstrapToken}))
		}
		b.StartTimer()
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, nodes)
		for _, n := range ns {
			wg.Go(func() {
				_, err := credentials(context.Background(), n)
				errs <- err
			})
		}
		wg.Wait()
		walls = append(walls, time.Since(start))
		close(errs)
		for err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	slices.Sort(walls)
	b.ReportMetric(walls[len(walls)/2].Seconds(), "wall-s/100-joins")
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
