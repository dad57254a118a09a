package join

import (
	"context"
	"io"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// A join that is over before the pool made its report object (a scale-out the cloud answered
// after the machine joined; every machine of a 50-node local pool) still leaves its report in
// the cluster: the last write is tried again until the object is there. The cluster kept no
// report of such a join.
func TestReportWrittenOnceObjectMade(t *testing.T) {
	ctx := context.Background()
	o := nodeOpts{pool: "report-late"}
	n := newNode(t, o)
	if err := nodeaccess.Cleanup(ctx, admin(t), o.pool); err != nil {
		t.Fatal(err)
	}
	if err := n.Join(ctx); err != nil {
		t.Fatalf("join: %v\n%s", err, output(t, n))
	}
	if err := nodeaccess.Prepare(ctx, admin(t), o.pool, []string{n.Name}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := nodestatus.Read(ctx, admin(t), n.Name)
		if err != nil {
			t.Fatal(err)
		}
		if r != nil && r.State == nodestatus.StateDone {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the report in the cluster is still %+v\n%s", r, output(t, n))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Discovery and the TLS bootstrap open the connections the minimal kubeadm-style join of the
// bench does (floor.Join), three: one for each anonymous read of cluster-info, since the API
// server keeps no connection of an unauthenticated client open (UnauthenticatedHTTP2DOSMitigation,
// kubernetes/kubernetes#121120), and the bootstrap token's, which the certificate's request, its
// watch and the report share; the report opens no fourth with the new credential. Once the token
// is refused (it expired while a resumed join ran), the report is written with the node's own
// credential.
func TestReportConnections(t *testing.T) {
	ctx := context.Background()
	proxy := newCountingProxy(t, cp.HostPort())
	n := newNode(t, nodeOpts{endpoint: proxy.addr})
	if err := n.RunPhase(ctx, PhasePreflight); err != nil {
		t.Fatal(err)
	}
	if err := n.RunPhase(ctx, PhaseTLSBootstrap); err != nil {
		t.Fatal(err)
	}
	if got := proxy.accepted.Load(); got != 3 {
		t.Errorf("discovery, the TLS bootstrap and the report opened %d connections, want 3", got)
	}
	first := reportedPhase(t, n, PhaseTLSBootstrap)
	if first.State != nodestatus.StateDone {
		t.Fatalf("the report's %s phase is %+v", PhaseTLSBootstrap, first)
	}

	id, _, _ := strings.Cut(n.Config.Cluster.BootstrapToken, ".")
	if err := admin(t).CoreV1().Secrets(metav1.NamespaceSystem).Delete(ctx, "bootstrap-token-"+id, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	n = reopen(t, n)
	if err := n.RunPhase(ctx, PhaseTLSBootstrap); err != nil {
		t.Fatal(err)
	}
	if again := reportedPhase(t, n, PhaseTLSBootstrap); !again.Started.After(first.Started) {
		t.Errorf("the report was not written once the token was gone: %+v\n%s", again, output(t, n))
	}
}

// reportedPhase is the record of a phase in the node's report in the cluster.
func reportedPhase(t *testing.T, n *Node, phase string) nodestatus.PhaseRecord {
	t.Helper()
	r, err := nodestatus.Read(context.Background(), admin(t), n.Name)
	if err != nil || r == nil {
		t.Fatalf("the node's report: %v %v", r, err)
	}
	for _, p := range r.Phases {
		if p.Name == phase {
			return p
		}
	}
	t.Fatalf("the node's report has no %s phase: %+v", phase, r)
	return nodestatus.PhaseRecord{}
}

// countingProxy forwards loopback connections to an address and counts them.
type countingProxy struct {
	addr     string
	accepted atomic.Int32
}

func newCountingProxy(t *testing.T, to string) *countingProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	p := &countingProxy{addr: l.Addr().String()}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			p.accepted.Add(1)
			go func() {
				defer func() { _ = c.Close() }()
				up, err := net.Dial("tcp", to)
				if err != nil {
					return
				}
				defer func() { _ = up.Close() }()
				go func() { _, _ = io.Copy(up, c) }()
				_, _ = io.Copy(c, up)
			}()
		}
	}()
	return p
}
