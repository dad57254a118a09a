package join

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kubewin/kubewin/internal/nodestatus"
)

// A change is written to the cluster without a flush, at most reportLag later, and to the
// serial console at once.
func TestReportReachesClusterWithoutFlush(t *testing.T) {
	ctx := context.Background()
	n := newNode(t, nodeOpts{})
	serial := &syncBuffer{}
	n.Serial = serial
	if err := n.RunPhase(ctx, PhaseDiscovery); err != nil {
		t.Fatal(err)
	}
	n.state.Phases = append(n.state.Phases, nodestatus.PhaseRecord{Name: PhaseTLSBootstrap, State: nodestatus.StateRunning, Started: time.Now()})
	n.report(n.state)
	defer n.flushReports()
	if !strings.Contains(serial.String(), `"phase":"`+PhaseTLSBootstrap+`"`) {
		t.Errorf("the serial console has no line for the running %s phase:\n%s", PhaseTLSBootstrap, serial)
	}
	deadline := time.Now().Add(reportLag + 10*time.Second)
	for {
		r, err := nodestatus.Read(ctx, admin(t), n.Name)
		if err != nil {
			t.Fatal(err)
		}
		if r != nil && r.State == nodestatus.StateRunning && r.Phase == PhaseTLSBootstrap {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the report in the cluster is still %+v", r)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
