package controlplane_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/kubewin/kubewin/internal/controlplane"
	"github.com/kubewin/kubewin/internal/testkit/testenv"
)

// BenchmarkStart measures a whole control plane's start, from an empty directory to working
// controllers, and reports the median of the runs besides Go's mean.
func BenchmarkStart(b *testing.B) {
	bin, err := testenv.BinDir()
	if err != nil {
		b.Fatal(err)
	}
	var took []time.Duration
	for b.Loop() {
		started, err := controlplane.Start(context.Background(), controlplane.Config{Dir: b.TempDir(), BinDir: bin})
		if err != nil {
			b.Fatal(err)
		}
		took = append(took, started.StartedIn)
		b.StopTimer()
		if err := started.Destroy(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	slices.Sort(took)
	b.ReportMetric(took[len(took)/2].Seconds(), "median-s/start")
}
