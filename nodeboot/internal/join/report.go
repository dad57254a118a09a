package join

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubewin/kubewin/internal/nodestatus"
	"github.com/kubewin/kubewin/internal/version"
	"github.com/kubewin/kubewin/nodeboot/internal/discovery"
	"github.com/kubewin/kubewin/nodeboot/internal/workflow"
)

// reporter is the background writer of a Node's report.
type reporter struct {
	mu sync.Mutex
	// pending asks the writer for a write; flushed closes when the writer stops.
	pending chan struct{}
	flushed chan struct{}
	// warned is set once a failed write has been told on Out.
	warned bool
	// unprepared says the last write found no report object, or no access to it, yet.
	unprepared bool
}

// Report builds the node's report from its state.
func (n *Node) Report() *nodestatus.Report {
	r := &nodestatus.Report{
		Node: n.Name, State: nodestatus.StateDone, Phases: n.state.Phases, NodebootVersion: version.Version, Updated: time.Now().UTC(),
	}
	for _, p := range n.state.Phases {
		switch p.State {
		case nodestatus.StateFailed:
			r.State, r.Phase, r.Code, r.Message = nodestatus.StateFailed, p.Name, p.Code, p.Message
			return r
		case nodestatus.StateRunning:
			r.State, r.Phase = nodestatus.StateRunning, p.Name
		}
	}
	if !n.Joined() && r.State == nodestatus.StateDone {
		r.State = nodestatus.StateRunning
	}
	return r
}

// report writes the current report to the serial console, and asks the reporter to write it
// to the cluster. Writing to the cluster happens in the background, so that reporting costs the
// join no round trips, and changes less than reportLag apart are written together: a join that
// takes less than that writes its report once, when Join or RunPhase flushes it.
func (n *Node) report(*workflow.State[Learned]) {
	if n.Serial != nil {
		n.mu.Lock()
		line, err := nodestatus.SerialLine(n.Report())
		n.mu.Unlock()
		if err == nil {
			_, _ = n.Serial.Write(line)
		}
	}
	r := &n.reporter
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending == nil {
		r.pending = make(chan struct{}, 1)
		r.flushed = make(chan struct{})
		go n.reportLoop(r.pending, r.flushed)
	}
	select {
	case r.pending <- struct{}{}:
	default: // a write is already pending; it will carry this change too
	}
}

// reportLag is how long the report in the cluster may lag a change of the state.
const reportLag = time.Second

// flushReports waits until the last change is written and stops the reporter. When that write
// found the report object not prepared yet, it is tried again in the background until it is
// (writeWhenPrepared): the pool makes the object, and grants the node its access, once the cloud
// has answered its scale-out, and a join can be over before that; without it the cluster kept no
// report of such a join at all.
func (n *Node) flushReports() {
	r := &n.reporter
	r.mu.Lock()
	pending, flushed := r.pending, r.flushed
	r.pending = nil
	r.mu.Unlock()
	if pending == nil {
		return
	}
	close(pending)
	<-flushed
	r.mu.Lock()
	unprepared := r.unprepared
	r.mu.Unlock()
	if unprepared {
		go func() { _ = n.writeWhenPrepared(context.Background(), n.writeReport) }()
	}
}

func (n *Node) reportLoop(pending <-chan struct{}, flushed chan<- struct{}) {
	defer close(flushed)
	for range pending {
		lag := time.NewTimer(reportLag)
	wait:
		for {
			select {
			case _, open := <-pending:
				if !open { // flushed: write now
					break wait
				}
			case <-lag.C:
				break wait
			}
		}
		lag.Stop()
		n.writeReportNow()
	}
}

// reportBeforeTrust makes a join that failed before it trusted the cluster (preflight: a port
// in use, a corrupt payload, the wrong OS build) tell the cluster all the same, where the pool
// waiting for the node reads it: the cluster is discovered for that alone, its CA checked against
// the pins as the discovery phase does before the token is ever sent, and the failed report is
// written with the bootstrap token. Without it such a failure is on the machine only, and a cloud
// whose serial console the machine cannot write (a Windows VM on Azure: EMS holds COM1) shows
// it nowhere until the pool's wait runs out. A failed discovery is not tried again, and a cluster
// that cannot be discovered leaves the report on the machine, as before.
func (n *Node) reportBeforeTrust(ctx context.Context) {
	n.mu.Lock()
	trusted := n.bootstrapClient != nil || n.nodeClient != nil
	failed := n.Report()
	n.mu.Unlock()
	c := n.Config.Cluster
	if trusted || c.BootstrapToken == "" || failed.State != nodestatus.StateFailed || failed.Phase == PhaseDiscovery || ctx.Err() != nil {
		return
	}
	res, err := discovery.Discover(ctx, discoveryOptions(c, min(cmp.Or(n.Timeouts.Discovery, DefaultTimeouts.Discovery), 30*time.Second), n.Clock,
		n.Platform.Dialer()))
	if err != nil {
		_, _ = fmt.Fprintf(n.Out, "[report] the failure stays on this machine: the cluster cannot be discovered to report it: %v\n", err)
		return
	}
	if err := n.setBootstrapClient(res.Server, res.CACert); err != nil {
		return
	}
	n.mu.Lock()
	client := n.bootstrapClient
	n.mu.Unlock()
	// The pool makes the report object, and grants the token its access, once the cloud has
	// answered its scale-out, which may be after a machine that failed at once got here.
	if err := n.writeWhenPrepared(ctx, func(ctx context.Context) error { return nodestatus.Write(ctx, client, failed) }); err != nil {
		_, _ = fmt.Fprintf(n.Out, "[report] the failure stays on this machine: %v\n", err)
		return
	}
	_, _ = fmt.Fprintf(n.Out, "[report] the failure is reported to the cluster at %s\n", res.Server)
}

// reportBackoff spans about three minutes: the time a cloud's scale-out may still take to answer
// once its first machines run. A node joined by hand has no report object: its report stays on
// the machine after that wait.
var reportBackoff = wait.Backoff{Duration: time.Second, Factor: 1.5, Cap: 30 * time.Second, Steps: 13}

// notPrepared says a report write found no report object (ErrNotPrepared) or no access to it
// (Forbidden): the pool has not prepared it yet.
func notPrepared(err error) bool {
	return errors.Is(err, nodestatus.ErrNotPrepared) || apierrors.IsForbidden(err)
}

// writeWhenPrepared runs write until the report object is there to take it, on reportBackoff.
func (n *Node) writeWhenPrepared(ctx context.Context, write func(context.Context) error) error {
	told := false
	return wait.ExponentialBackoffWithContext(ctx, reportBackoff, func(ctx context.Context) (bool, error) {
		err := write(ctx)
		if notPrepared(err) {
			if !told {
				told = true
				_, _ = fmt.Fprintf(n.Out, "[report] waiting up to 3 minutes for the report object %s/%s, which the node pool makes: %v\n",
					nodestatus.Namespace, nodestatus.ObjectName(n.Name), err)
			}
			return false, nil
		}
		return true, err
	})
}

// writeReport writes the report over the connection the join has open: the bootstrap token's
// until a phase uses the node's own credential (register and after), so that the TLS bootstrap
// opens no connection with the new credential only to report, and the node's own after that,
// or when the token is refused (it expired while a resumed join ran). Before the cluster is
// trusted there is neither, and the state file and consoles are the only record.
func (n *Node) writeReport(ctx context.Context) error {
	n.mu.Lock()
	c, byToken := n.nodeClient, false
	if c == nil {
		c, byToken = n.bootstrapClient, true
	}
	report := n.Report()
	n.mu.Unlock()
	if c == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := nodestatus.Write(ctx, c, report)
	if byToken && apierrors.IsUnauthorized(err) {
		if own, ownErr := n.NodeClient(); ownErr == nil {
			err = nodestatus.Write(ctx, own, report)
		}
	}
	return err
}

// writeReportNow is the reporter's write: a failure is told once on Out, and one that found
// the report object not prepared is remembered for flushReports.
func (n *Node) writeReportNow() {
	err := n.writeReport(context.Background())
	r := &n.reporter
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unprepared = notPrepared(err)
	if err == nil || r.warned {
		return
	}
	r.warned = true
	if r.unprepared {
		_, _ = fmt.Fprintf(n.Out, "[report] no report object %s/%s yet (the node pool makes it): %v\n", nodestatus.Namespace,
			nodestatus.ObjectName(n.Name), err)
		return
	}
	_, _ = fmt.Fprintf(n.Out, "[report] cannot write the report: %v\n", err)
}
