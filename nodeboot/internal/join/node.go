// Package join joins a Windows node to a cluster in named phases (preflight, discovery,
// tls-bootstrap, register, network, kubelet-config, services, routes), each runnable alone and
// recorded in a state file so that a restarted nodeboot resumes where it stopped. Progress and
// failures go to the console as [phase] lines and, once the cluster is trusted, into the node's
// report object for the provisioner.
package join

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/nodecmd"
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

// Node is a machine joining a cluster: its configuration, image, machine and paths, the
// recorded state of its join, its clients to the cluster and the writer of its report. Each
// phase takes it through an interface of what that phase uses, declared next to the phase
// (data.go lists them); Node implements them all.
type Node struct {
	Config   *v1alpha1.NodeConfig
	Manifest *v1alpha1.ImageManifest
	Platform platform.Platform
	Paths    nodecmd.Paths
	// Name is the Node object's name.
	Name     string
	Timeouts Timeouts
	// CheckInterval is how often `nodeboot run` checks the node for drift. Default:
	// DefaultCheckInterval.
	CheckInterval time.Duration
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

	// mu guards the clients.
	mu              sync.Mutex
	bootstrapClient kubernetes.Interface
	nodeClient      kubernetes.Interface

	reporter reporter
	plan     renderedPlan
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
		n.reportBeforeTrust(ctx)
		return err
	}
	_, _ = fmt.Fprintf(n.Out, "[join] node %s joined the cluster at %s\n", n.Name, n.state.Data.Server)
	return nil
}

// RunPhase runs one phase, and the phases it depends on when they are not done yet.
func (n *Node) RunPhase(ctx context.Context, name string) error {
	defer n.flushReports()
	var names []string
	for _, p := range n.runner.Phases {
		if p.Name == name {
			break
		}
		if !n.state.Done(p.Name) {
			names = append(names, p.Name)
		}
	}
	return n.runner.RunPhases(ctx, append(names, name)...)
}
