// Package join joins a Windows node to a cluster in named phases (preflight, discovery,
// tls-bootstrap, register, network, kubelet-config, services, routes), each runnable alone and
// recorded in a state file so that a restarted nodeboot resumes where it stopped. Progress and
// failures go to the console as [phase] lines and, once the cluster is trusted, into the node's
// report object for the provisioner.
package join

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/nodecmd"
	"github.com/kubewin/kubewin/internal/nodestatus"
	"github.com/kubewin/kubewin/internal/version"
	"github.com/kubewin/kubewin/nodeboot/internal/platform"
	"github.com/kubewin/kubewin/nodeboot/internal/workflow"
)

// Timeouts of the waiting phases.
type Timeouts struct {
	// Discovery bounds retries while the endpoint is unreachable or the token unsigned.
	Discovery time.Duration
	// CSR bounds the wait for the kubelet certificate.
	CSR time.Duration
	// PodCIDR bounds the wait for node IPAM.
	PodCIDR time.Duration
}

// DefaultTimeouts are generous enough for a cloud control plane under load.
var DefaultTimeouts = Timeouts{Discovery: 2 * time.Minute, CSR: 5 * time.Minute, PodCIDR: 2 * time.Minute}

// Node is a machine joining a cluster. It implements the phases' Data.
type Node struct {
	Config   *v1alpha1.NodeConfig
	Manifest *v1alpha1.ImageManifest
	Platform platform.Platform
	Paths    nodecmd.Paths
	// Name is the Node object's name.
	Name     string
	Timeouts Timeouts
	// Clock is the machine's clock. Default: time.Now.
	Clock func() time.Time
	// Out receives progress lines.
	Out io.Writer
	// Serial receives the join report as a line at every change (the machine's serial console,
	// which clouds keep); nil for none.
	Serial io.Writer

	store  *workflow.Store[Learned]
	state  *workflow.State[Learned]
	runner *workflow.Runner[Learned]

	mu              sync.Mutex
	bootstrapClient kubernetes.Interface
	nodeClient      kubernetes.Interface
	reportWarned    bool
	// vtepMAC is the overlay network's VTEP (distributed router) MAC, as its last Ensure
	// reported it.
	vtepMAC string
	reports chan struct{}
	flushed chan struct{}
}

// Learned is what the phases learn that later phases, `nodeboot run` and a restarted join need;
// it is kept in the state file with the phases' outcomes.
type Learned struct {
	// Server is the API server URL discovery trusted.
	Server string `json:"server,omitempty"`
	// CSR names the kubelet's certificate request, once submitted.
	CSR string `json:"csr,omitempty"`
	// NodeIP and Subnet are the node's address and its subnet.
	NodeIP netip.Addr   `json:"nodeIP,omitzero"`
	Subnet netip.Prefix `json:"nodeSubnet,omitzero"`
	// PodCIDR is the node's pod CIDR, static or from node IPAM.
	PodCIDR netip.Prefix `json:"podCIDR,omitzero"`
}

// Open loads the node's state and prepares its phases.
func (n *Node) Open() error {
	if n.Timeouts == (Timeouts{}) {
		n.Timeouts = DefaultTimeouts
	}
	n.store = &workflow.Store[Learned]{Path: n.Platform.Path(n.statePath()), Write: func(_ string, b []byte) error {
		return n.Platform.WriteSecret(n.statePath(), b)
	}}
	var err error
	if n.state, err = n.store.Load(); err != nil {
		return err
	}
	n.runner = &workflow.Runner[Learned]{Phases: phasesOf(n), Store: n.store, State: n.state, Out: n.Out, Changed: n.report}
	return nil
}

func (n *Node) statePath() string { return n.Paths.NodebootDir + `\state.json` }

// Phases lists the join phases in order.
func (n *Node) Phases() []workflow.Phase { return n.runner.Phases }

// State is the recorded state.
func (n *Node) State() *workflow.State[Learned] { return n.state }

// Joined reports whether every phase is done.
func (n *Node) Joined() bool { return n.state.Done(n.runner.Names()...) }

// Join runs every phase not done yet.
func (n *Node) Join(ctx context.Context) error {
	defer n.flushReports()
	if err := n.runner.Run(ctx); err != nil {
		return err
	}
	fmt.Fprintf(n.Out, "[join] node %s joined the cluster at %s\n", n.Name, n.state.Data.Server)
	return nil
}

// RunPhase runs one phase, and the phases it depends on when they are not done yet.
func (n *Node) RunPhase(ctx context.Context, name string) error {
	defer n.flushReports()
	for _, p := range n.runner.Phases {
		if p.Name == name {
			return n.runner.RunPhase(ctx, name)
		}
		if !n.state.Done(p.Name) {
			if err := n.runner.RunPhase(ctx, p.Name); err != nil {
				return err
			}
		}
	}
	return n.runner.RunPhase(ctx, name)
}

// Report builds the node's report from its state.
func (n *Node) Report() *nodestatus.Report {
	r := &nodestatus.Report{Node: n.Name, State: nodestatus.StateDone, Phases: n.state.Phases, NodebootVersion: version.Version, Updated: time.Now().UTC()}
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

// report asks the reporter to write the current report. Writing happens in the background,
// coalescing changes, so that reporting costs the join no round trips; Join flushes it.
func (n *Node) report(*workflow.State[Learned]) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.reports == nil {
		n.reports = make(chan struct{}, 1)
		n.flushed = make(chan struct{})
		go n.reportLoop(n.reports, n.flushed)
	}
	select {
	case n.reports <- struct{}{}:
	default: // a write is already pending; it will carry this change too
	}
}

// flushReports waits until the last change is written and stops the reporter.
func (n *Node) flushReports() {
	n.mu.Lock()
	reports, flushed := n.reports, n.flushed
	n.reports = nil
	n.mu.Unlock()
	if reports == nil {
		return
	}
	close(reports)
	<-flushed
}

func (n *Node) reportLoop(reports <-chan struct{}, flushed chan<- struct{}) {
	defer close(flushed)
	for range reports {
		n.writeReport()
	}
}

// writeReport writes the report to the serial console and with the best credential at hand;
// before the cluster is trusted there is none, and the state file and consoles are the only
// record.
func (n *Node) writeReport() {
	n.mu.Lock()
	c := n.nodeClient
	if c == nil {
		c = n.bootstrapClient
	}
	report := n.Report()
	n.mu.Unlock()
	if n.Serial != nil {
		if line, err := nodestatus.SerialLine(report); err == nil {
			_, _ = n.Serial.Write(line)
		}
	}
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := nodestatus.Write(ctx, c, report)
	if err == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.reportWarned {
		n.reportWarned = true
		if errors.Is(err, nodestatus.ErrNotPrepared) {
			fmt.Fprintf(n.Out, "[report] no report object %s/%s: progress is recorded locally only\n", nodestatus.Namespace, nodestatus.ObjectName(n.Name))
			return
		}
		fmt.Fprintf(n.Out, "[report] cannot write the report: %v\n", err)
	}
}

func (n *Node) setBootstrapClient(server string, ca []byte) error {
	c, err := kubernetes.NewForConfig(&rest.Config{Host: server, BearerToken: n.Config.Cluster.BootstrapToken, TLSClientConfig: rest.TLSClientConfig{CAData: ca}, Timeout: 30 * time.Second})
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.bootstrapClient = c
	n.mu.Unlock()
	return nil
}

// NodeClient returns a client with the node's own credentials.
func (n *Node) NodeClient() (kubernetes.Interface, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.nodeClient != nil {
		return n.nodeClient, nil
	}
	cfg, err := n.NodeRESTConfig()
	if err != nil {
		return nil, err
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	n.nodeClient = c
	return c, nil
}
