package join

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kubewin/kubewin/internal/nodeaccess"
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

// A join that fails before it trusts the cluster (preflight) still reports the failure there,
// after discovering the cluster and checking its CA against the pins, even when the report object
// appears only after the failure (the pool makes it once the cloud has answered its scale-out);
// with pins the cluster's CA does not match, the failure stays on the machine and no token is
// sent.
func TestFailureBeforeTrustReported(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name         string
		pinned, late bool
	}{{"pinned", true, false}, {"object made late", true, true}, {"wrong pins", false, false}} {
		t.Run(tc.name, func(t *testing.T) {
			o := nodeOpts{pool: "before-trust-" + strings.ReplaceAll(tc.name, " ", "-")}
			if !tc.pinned {
				o.pins = []string{"sha256:" + strings.Repeat("0", 64)}
			}
			n := newNode(t, o)
			// The payload no longer matches the image manifest: preflight fails, before discovery.
			if err := os.WriteFile(n.Platform.Path(`C:\k\kubelet.exe`), []byte("tampered"), 0o755); err != nil {
				t.Fatal(err)
			}
			if tc.late {
				if err := nodeaccess.Cleanup(ctx, admin(t), o.pool); err != nil {
					t.Fatal(err)
				}
				go func() {
					time.Sleep(2 * time.Second)
					if err := nodeaccess.Prepare(ctx, admin(t), o.pool, []string{n.Name}); err != nil {
						t.Error(err)
					}
				}()
			}
			err := n.Join(ctx)
			if err == nil || !strings.Contains(err.Error(), string(nodestatus.CodePayloadCorrupt)) {
				t.Fatalf("join: %v", err)
			}
			r, err := nodestatus.Read(ctx, admin(t), n.Name)
			if err != nil {
				t.Fatal(err)
			}
			reported := r != nil && r.State == nodestatus.StateFailed && r.Phase == PhasePreflight && r.Code == nodestatus.CodePayloadCorrupt
			if reported != tc.pinned {
				t.Errorf("the cluster's report is %+v\n%s", r, output(t, n))
			}
		})
	}
}
