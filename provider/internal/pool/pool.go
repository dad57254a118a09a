// Package pool reconciles a Windows node pool towards its desired size and settings, on any
// backend that can create, list and delete machines with custom data: it mints a short-lived
// bootstrap token for the pool, renders each node's NodeConfig, creates machines surge-first
// when settings change, waits until every new node is Ready or reports a failure (node, phase,
// code), and cordons and drains nodes before their machines are deleted.
package pool

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubewin/kubewin/internal/api"
	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/bootstraptoken"
	"github.com/kubewin/kubewin/internal/drain"
	"github.com/kubewin/kubewin/internal/nodeaccess"
	"github.com/kubewin/kubewin/internal/nodestatus"
	"github.com/kubewin/kubewin/internal/winname"
)

// VM is a machine of the pool as the backend sees it.
type VM struct {
	Name       string
	Generation string
	Running    bool
}

// Compute is the backend's side of a pool.
type Compute interface {
	// Create makes a machine that boots with customData (the NodeConfig).
	Create(ctx context.Context, name, generation string, customData []byte) error
	List(ctx context.Context) ([]VM, error)
	Delete(ctx context.Context, name string) error
	// LocalReport is what the machine itself recorded of its join, including failures before
	// the cluster was trusted; nil when the backend cannot see it.
	LocalReport(name string) *nodestatus.Report
	// Log is the end of the machine's boot log, for error messages.
	Log(name string) string
}

// Spec is the desired pool.
type Spec struct {
	Pool   string
	Prefix string
	Count  int
	// Image identifies the image the machines are created from (the manifest's digest).
	Image string
	// Template is every node's NodeConfig but for the node's name and the token.
	Template v1alpha1.NodeConfig
	MaxSurge int
	TokenTTL time.Duration
	Drain    drain.Options
}

// Generation identifies the image and settings nodes are created with: a change replaces the
// nodes.
func (s Spec) Generation() string {
	b, _ := api.EncodeJSON(s.Template)
	sum := sha256.Sum256(append([]byte(s.Image+"\n"), b...))
	return hex.EncodeToString(sum[:6])
}

// Node is a node of the pool.
type Node struct {
	Name    string
	IP      string
	PodCIDR string
	Ready   bool
}

// Manager reconciles pools.
type Manager struct {
	Client  kubernetes.Interface
	Compute Compute
	Out     io.Writer
}

// Reconcile brings the pool to spec: broken machines are removed, nodes with other settings
// are replaced surge-first, the count is met, and the nodes are returned.
func (m *Manager) Reconcile(ctx context.Context, s Spec) ([]Node, error) {
	m.defaults()
	if s.MaxSurge < 1 {
		s.MaxSurge = 1
	}
	gen := s.Generation()
	vms, err := m.Compute.List(ctx)
	if err != nil {
		return nil, err
	}
	// A machine that no longer runs is gone for good: remove it, then its Node.
	for _, vm := range vms {
		if !vm.Running {
			if err := m.remove(ctx, s, vm.Name, false); err != nil {
				return nil, err
			}
		}
	}
	current, old := m.split(ctx, gen)
	var token string
	defer func() {
		if token != "" {
			_ = bootstraptoken.Delete(context.Background(), m.Client, token)
		}
	}()
	grow := func(n int) error {
		if n <= 0 {
			return nil
		}
		if token == "" {
			if token, err = bootstraptoken.Create(ctx, m.Client, s.Pool, s.TokenTTL); err != nil {
				return err
			}
		}
		names, err := m.create(ctx, s, gen, token, n)
		if err != nil {
			return err
		}
		current = append(current, names...)
		return nil
	}
	// Settings changed: new nodes first, then the old ones go, max_surge at a time, so that
	// the pool never has fewer Ready nodes than it should.
	for len(old) > 0 {
		batch := min(s.MaxSurge, len(old))
		if len(current) < s.Count {
			if err := grow(min(batch, s.Count-len(current))); err != nil {
				return nil, err
			}
		}
		for _, name := range old[:batch] {
			if err := m.remove(ctx, s, name, true); err != nil {
				return nil, err
			}
		}
		old = old[batch:]
	}
	if err := grow(s.Count - len(current)); err != nil {
		return nil, err
	}
	// Scale in: the newest nodes go first.
	slices.Sort(current)
	for len(current) > s.Count {
		name := current[len(current)-1]
		if err := m.remove(ctx, s, name, true); err != nil {
			return nil, err
		}
		current = current[:len(current)-1]
	}
	if err := nodeaccess.Prepare(ctx, m.Client, s.Pool, current); err != nil {
		return nil, err
	}
	return m.Nodes(ctx)
}

func (m *Manager) defaults() {
	if m.Out == nil {
		m.Out = io.Discard
	}
}

// split sorts the pool's running machines into those with the current settings and the rest.
func (m *Manager) split(ctx context.Context, gen string) (current, old []string) {
	vms, _ := m.Compute.List(ctx)
	for _, vm := range vms {
		if vm.Generation == gen {
			current = append(current, vm.Name)
		} else {
			old = append(old, vm.Name)
		}
	}
	return current, old
}

// create makes n new machines with fresh indices and waits until their nodes are Ready.
func (m *Manager) create(ctx context.Context, s Spec, gen, token string, n int) ([]string, error) {
	vms, err := m.Compute.List(ctx)
	if err != nil {
		return nil, err
	}
	next := 0
	all := make([]string, 0, len(vms)+n)
	for _, vm := range vms {
		if i, ok := winname.Index(s.Prefix, vm.Name); ok && i >= next {
			next = i + 1
		}
		all = append(all, vm.Name)
	}
	var names []string
	for range n {
		name, err := winname.ComputerName(s.Prefix, next)
		if err != nil {
			return nil, err
		}
		next++
		names = append(names, name)
	}
	// The report objects and the pool's access exist before the machines boot.
	if err := nodeaccess.Prepare(ctx, m.Client, s.Pool, append(all, names...)); err != nil {
		return nil, err
	}
	for _, name := range names {
		cfg := s.Template
		cfg.Node.Name = name
		cfg.Cluster.BootstrapToken = token
		data, err := api.EncodeJSON(cfg)
		if err != nil {
			return nil, err
		}
		if err := m.Compute.Create(ctx, name, gen, data); err != nil {
			return nil, fmt.Errorf("create machine %s: %w", name, err)
		}
		fmt.Fprintf(m.Out, "created machine %s\n", name)
	}
	return names, m.waitReady(ctx, names)
}

// waitReady waits until every node is Ready, or fails naming the first node that reports a
// failure, with its phase and code.
func (m *Manager) waitReady(ctx context.Context, names []string) error {
	pending := slices.Clone(names)
	for {
		var still []string
		for _, name := range pending {
			ready, err := m.nodeReady(ctx, name)
			if err != nil {
				return err
			}
			if !ready {
				still = append(still, name)
			}
		}
		if pending = still; len(pending) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("nodes %s were not Ready in time: %s", strings.Join(pending, ", "), m.progress(ctx, pending))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (m *Manager) nodeReady(ctx context.Context, name string) (bool, error) {
	node, err := m.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err == nil && ready(node) {
		return true, nil
	}
	if r := m.report(ctx, name); r != nil && r.State == nodestatus.StateFailed {
		return false, &JoinError{Report: *r, Log: m.Compute.Log(name)}
	}
	// A machine that stopped will not become Ready: say so now rather than at the timeout.
	vms, err := m.Compute.List(ctx)
	if err != nil {
		return false, err
	}
	for _, vm := range vms {
		if vm.Name == name && !vm.Running {
			return false, fmt.Errorf("machine %s stopped before its node was Ready; last lines of its log:\n%s", name, m.Compute.Log(name))
		}
	}
	return false, nil
}

// report is the node's join report: from the cluster, or from the machine when it failed
// before it could trust the cluster.
func (m *Manager) report(ctx context.Context, name string) *nodestatus.Report {
	if r, err := nodestatus.Read(ctx, m.Client, name); err == nil && r != nil && r.State == nodestatus.StateFailed {
		return r
	}
	return m.Compute.LocalReport(name)
}

func (m *Manager) progress(ctx context.Context, names []string) string {
	var parts []string
	for _, n := range names {
		phase := "not started"
		if r := m.report(ctx, n); r != nil && r.Phase != "" {
			phase = "in phase " + r.Phase
		}
		parts = append(parts, n+" "+phase)
	}
	return strings.Join(parts, "; ")
}

// JoinError is a node that failed to join.
type JoinError struct {
	Report nodestatus.Report
	Log    string
}

func (e *JoinError) Error() string {
	msg := e.Report.Failure()
	if info, ok := nodestatus.Lookup(e.Report.Code); ok {
		msg += " — " + info.Remedy
	}
	return msg
}

// remove drains a node (when asked), deletes its machine, then its Node object.
func (m *Manager) remove(ctx context.Context, s Spec, name string, drainFirst bool) error {
	if drainFirst {
		fmt.Fprintf(m.Out, "draining node %s\n", name)
		if err := drain.Node(ctx, m.Client, name, s.Drain); err != nil {
			return err
		}
	}
	if err := m.Compute.Delete(ctx, name); err != nil {
		return fmt.Errorf("delete machine %s: %w", name, err)
	}
	if err := m.Client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Node %s: %w", name, err)
	}
	fmt.Fprintf(m.Out, "removed node %s\n", name)
	return nil
}

// Nodes returns the pool's machines with their Node's state.
func (m *Manager) Nodes(ctx context.Context) ([]Node, error) {
	vms, err := m.Compute.List(ctx)
	if err != nil {
		return nil, err
	}
	var out []Node
	for _, vm := range vms {
		n := Node{Name: vm.Name}
		if node, err := m.Client.CoreV1().Nodes().Get(ctx, vm.Name, metav1.GetOptions{}); err == nil {
			n.Ready = vm.Running && ready(node)
			n.PodCIDR = node.Spec.PodCIDR
			for _, a := range node.Status.Addresses {
				if a.Type == corev1.NodeInternalIP {
					n.IP = a.Address
				}
			}
		}
		out = append(out, n)
	}
	return out, nil
}

// Destroy drains and removes every node, then the pool's tokens and access.
func (m *Manager) Destroy(ctx context.Context, s Spec) error {
	m.defaults()
	s.Count = 0
	vms, err := m.Compute.List(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, vm := range vms {
		if err := m.remove(ctx, s, vm.Name, vm.Running); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return errors.Join(bootstraptoken.DeletePool(ctx, m.Client, s.Pool), nodeaccess.Cleanup(ctx, m.Client, s.Pool))
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
