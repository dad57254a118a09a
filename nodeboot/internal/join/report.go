package join

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

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

// flushReports waits until the last change is written and stops the reporter.
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
		n.writeReport()
	}
}

// reportBeforeTrust makes a join that failed before it trusted the cluster (preflight: a port
// in use, a corrupt payload, the wrong OS build) tell the cluster all the same, where the pool
// waiting for the node reads it: the cluster is discovered for that alone, its CA checked against
// the pins as the discovery phase does before the token is ever sent, and the failed report is
// written with the bootstrap token. Without it such a failure is on the machine only, and a cloud
// whose serial console the machine cannot write (a Windows VM on Azure: EMS holds COM1) shows
// it nowhere until the pool's wait runs out. A cluster that cannot be discovered leaves the
// report on the machine, as before.
func (n *Node) reportBeforeTrust(ctx context.Context) {
	n.mu.Lock()
	trusted := n.bootstrapClient != nil || n.nodeClient != nil
	n.mu.Unlock()
	c := n.Config.Cluster
	if trusted || c.BootstrapToken == "" || ctx.Err() != nil {
		return
	}
	res, err := discovery.Discover(ctx, discovery.Options{
		Endpoint: c.APIServerEndpoint, Token: c.BootstrapToken, CACertHashes: c.CACertHashes,
		UnsafeSkipCAVerification: c.UnsafeSkipCAVerification, Timeout: min(n.Timeouts.Discovery, 30*time.Second), Now: n.Clock,
	})
	if err != nil {
		_, _ = fmt.Fprintf(n.Out, "[report] the failure stays on this machine: the cluster cannot be discovered to report it: %v\n", err)
		return
	}
	if err := n.setBootstrapClient(res.Server, res.CACert); err != nil {
		return
	}
	_, _ = fmt.Fprintf(n.Out, "[report] the failure is reported to the cluster at %s\n", res.Server)
	n.report(nil)
}

// writeReport writes the report with the best credential at hand; before the cluster is
// trusted there is none, and the state file and consoles are the only record.
func (n *Node) writeReport() {
	n.mu.Lock()
	c := n.nodeClient
	if c == nil {
		c = n.bootstrapClient
	}
	report := n.Report()
	n.mu.Unlock()
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := nodestatus.Write(ctx, c, report)
	if err == nil {
		return
	}
	r := &n.reporter
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.warned {
		r.warned = true
		if errors.Is(err, nodestatus.ErrNotPrepared) {
			_, _ = fmt.Fprintf(n.Out, "[report] no report object %s/%s: progress is recorded locally only\n", nodestatus.Namespace,
				nodestatus.ObjectName(n.Name))
			return
		}
		_, _ = fmt.Fprintf(n.Out, "[report] cannot write the report: %v\n", err)
	}
}
