// Package pool reconciles a Windows node pool towards its desired size and settings on any
// backend shaped like a scale set: machines created from one image, booting with one pool-wide
// NodeConfig, added and deleted in batches. It mints a short-lived bootstrap token for each
// change of the pool, adds machines surge-first when the image or the node settings change,
// waits until every new node is Ready or reports a failure (node, phase, code), and cordons and
// drains nodes before their machines are deleted. Every step is logged with tflog.
package pool

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-log/tflog"
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
	"github.com/kubewin/kubewin/provider/internal/route"
)

// GenerationLabel carries, on every node of a pool, the generation of the image and settings
// its machine was created with (Spec.Generation).
const GenerationLabel = "kubewin.io/generation"

// Machine is a machine of the pool as its backend sees it. Its name is its computer name,
// which its node is named after.
type Machine struct {
	Name string
	// Running is false once the machine stopped for good (failed, deallocated, deleted): it will
	// not join.
	Running bool
}

// Compute is a backend's side of a pool: a scale set. Every call costs the backend a constant
// number of writes, whatever the number of machines.
type Compute interface {
	// List returns the pool's machines.
	List(ctx context.Context) ([]Machine, error)
	// Add creates n machines from the pool's image that boot with customData (the pool's
	// NodeConfig, with a fresh token) and returns their names. A backend that names its machines
	// before it creates them calls named with those names first, and creates none when it fails:
	// the pool prepares their report objects and access there, before any of them joins.
	Add(ctx context.Context, n int, customData []byte, named func([]string) error) ([]string, error)
	// Delete removes the named machines.
	Delete(ctx context.Context, names []string) error
	// Destroy removes what is left of the pool at the backend once it has no machines.
	Destroy(ctx context.Context) error
	// Reports returns what the named machines recorded of their joins themselves, including
	// failures of discovery (which never reach the cluster), by machine name;
	// machines the backend cannot see are missing.
	Reports(ctx context.Context, names []string) map[string]*nodestatus.Report
	// Log is the end of a machine's boot log, for error messages.
	Log(ctx context.Context, name string) string
	// Diagnose gathers the machine's diagnostics bundle (nodeboot diagnose) and its own join
	// report: after a failed join, or one that did not end in time.
	Diagnose(ctx context.Context, name string) (*Diagnosis, error)
}

// Spec is the desired pool.
type Spec struct {
	Pool  string
	Count int
	// Image identifies the image the machines are created from (the manifest's digest).
	Image string
	// Template is the pool-wide NodeConfig: no node name (nodes take their computer's) and no
	// bootstrap token (each change of the pool mints one).
	Template v1alpha1.NodeConfig
	// MaxSurge is how many machines a replacement adds before it removes old ones.
	MaxSurge int
	TokenTTL time.Duration
	Drain    drain.Options
	// Health says when a NotReady node is replaced.
	Health HealthCheck
	// HyperV is whether the image runs pods under Hyper-V isolation: the pool then holds the
	// HyperVRuntimeClass.
	HyperV bool
	// Routes, when set, is the route table in which the pool keeps its nodes' pod CIDR routes
	// (RouteName): a node's route is written before the pool counts the node Ready, and removed
	// once its machine and Node are deleted.
	Routes route.Table
}

// Generation identifies what is baked into a node: the image and the settings a node reads
// when it joins. A change replaces the nodes. The control plane's version is not part of it:
// upgrading the cluster replaces no node.
func (s Spec) Generation() string {
	t := s.Template
	t.Cluster.BootstrapToken = ""
	t.Cluster.KubernetesVersion = ""
	b, _ := api.EncodeJSON(t)
	sum := sha256.Sum256(append([]byte(s.Image+"\n"), b...))
	return hex.EncodeToString(sum[:6])
}

// customData is the NodeConfig the machines of generation gen boot with.
func (s Spec) customData(gen, token string) ([]byte, error) {
	c := s.Template
	c.Node.Name = ""
	c.Node.Labels = maps.Clone(c.Node.Labels)
	if c.Node.Labels == nil {
		c.Node.Labels = map[string]string{}
	}
	c.Node.Labels[nodeaccess.PoolLabel] = s.Pool
	c.Node.Labels[GenerationLabel] = gen
	c.Cluster.BootstrapToken = token
	return api.EncodeJSON(c)
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
	// Poll is how long a wait lets pass before it first reads the backend's machines again (to
	// notice machines that stopped); the interval doubles after each read, up to 240 times Poll.
	// The wait watches the nodes themselves. Default: 250 ms (up to a minute).
	Poll time.Duration
	// MachineReportsAfter is how long a wait lets a node take to reach the cluster before it
	// reads the machine's own report; the interval doubles after each read, up to 6 times it.
	// Default: 5 s (up to 30 s).
	MachineReportsAfter time.Duration
}

// Reconcile brings the pool to spec: machines that stopped or failed to join are removed,
// machines still joining (an interrupted apply's) are waited for, nodes NotReady past the health
// check's timeout (at most its bound) and nodes of another generation are replaced
// surge-first, the count is met, the pool's routes (Spec.Routes) are made to match its nodes,
// and the nodes are returned. Nodes NotReady within the timeout
// count as nodes of the pool and are left alone. A backend or API error stops it before
// anything more is created.
func (m *Manager) Reconcile(ctx context.Context, s Spec) ([]Node, error) {
	ctx = tflog.SetField(ctx, "pool", s.Pool)
	gen := s.Generation()
	members, err := m.observe(ctx, s)
	if err != nil {
		return nil, err
	}
	// A Hyper-V pool holds the RuntimeClass before its nodes join; a pool whose image no longer
	// has Hyper-V isolation lets go of it once its nodes are replaced.
	if s.HyperV {
		if err := holdRuntimeClass(ctx, m.Client, s.Pool, true); err != nil {
			return nil, err
		}
	}
	verdicts, err := m.assess(ctx, s, members, time.Now())
	if err != nil {
		return nil, err
	}
	is := func(v verdict) func(member) bool { return func(x member) bool { return verdicts[x.Name].verdict == v } }
	if broken := pick(members, is(removed)); len(broken) > 0 {
		tflog.Info(ctx, "removing machines that stopped, are gone or failed to join", map[string]any{"machines": names(broken, all)})
		if err := m.remove(ctx, s, broken, verdicts); err != nil {
			return nil, err
		}
	}
	for _, x := range pick(members, is(kept)) {
		tflog.Warn(ctx, "node NotReady", map[string]any{"node": x.Name, "state": verdicts[x.Name].state, "action": verdicts[x.Name].action})
	}
	if members, err = m.observe(ctx, s); err != nil {
		return nil, err
	}
	// Members that appeared since the assessment have no verdict: they are joining.
	if pending := names(members, func(x member) bool { return x.Running && !x.ready() && verdicts[x.Name].verdict == joining }); len(pending) > 0 {
		tflog.Info(ctx, "waiting for machines an earlier apply created", map[string]any{"machines": pending})
		if err := m.waitReady(ctx, s, pending); err != nil {
			return nil, err
		}
	}
	if members, err = m.observe(ctx, s); err != nil {
		return nil, err
	}
	// Nodes NotReady within the timeout serve, as far as the count goes; one whose Node is gone
	// counts as the current generation.
	serving := func(x member) bool { return x.ready() || x.machine && x.Running && verdicts[x.Name].verdict == kept }
	oldGen := func(x member) bool { return x.Node != nil && x.Node.Labels[GenerationLabel] != gen }
	current := pick(members, func(x member) bool { return serving(x) && !oldGen(x) })
	// Unhealthy nodes are replaced first, then those of an earlier generation.
	old := pick(members, func(x member) bool { return is(replaced)(x) && !x.ready() })
	old = append(old, pick(members, func(x member) bool { return serving(x) && oldGen(x) })...)
	existing := names(members, all)

	// The token is deleted once every machine created with it is Ready. Machines that may still
	// be joining with it (the apply was interrupted, or it failed while they joined) keep it
	// until it expires, so that the next apply finds them joined rather than failed.
	var token string
	unconfirmed := false
	defer func() {
		switch {
		case token == "":
		case unconfirmed:
			tflog.Warn(ctx, "keeping the pool's bootstrap token for machines that may still be joining with it; it expires by itself",
				map[string]any{"token_ttl": s.TokenTTL.String()})
		default:
			if err := bootstraptoken.Delete(context.WithoutCancel(ctx), m.Client, token); err != nil {
				tflog.Warn(ctx, "cannot delete the pool's bootstrap token; it expires by itself", map[string]any{"error": err.Error()})
			}
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
		added, err := m.add(ctx, s, gen, token, existing, n)
		unconfirmed = unconfirmed || err != nil && len(added) > 0
		existing = append(existing, added...)
		for _, name := range added {
			current = append(current, member{Name: name, machine: true, Running: true, Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}})
		}
		return err
	}
	// NotReady nodes, or the image or the settings changed: new nodes first, then old ones go,
	// max_surge at a time, so that the pool never has fewer Ready nodes than it should.
	surge := max(s.MaxSurge, 1)
	for len(old) > 0 {
		batch := min(surge, len(old))
		if err := grow(min(batch, s.Count-len(current))); err != nil {
			return nil, err
		}
		tflog.Info(ctx, "replacing nodes", map[string]any{"nodes": names(old[:batch], all), "generation": gen})
		if err := m.remove(ctx, s, old[:batch], verdicts); err != nil {
			return nil, err
		}
		old = old[batch:]
	}
	if err := grow(s.Count - len(current)); err != nil {
		return nil, err
	}
	// Scale in: the newest nodes go first.
	if extra := len(current) - s.Count; extra > 0 {
		slices.SortFunc(current, func(a, b member) int { return strings.Compare(a.Name, b.Name) })
		gone := current[len(current)-extra:]
		tflog.Info(ctx, "scaling in", map[string]any{"nodes": names(gone, all)})
		if err := m.remove(ctx, s, gone, verdicts); err != nil {
			return nil, err
		}
		current = current[:len(current)-extra]
	}
	if err := nodeaccess.Prepare(ctx, m.Client, s.Pool, names(current, all)); err != nil {
		return nil, err
	}
	if !s.HyperV {
		if err := holdRuntimeClass(ctx, m.Client, s.Pool, false); err != nil {
			return nil, err
		}
	}
	if members, err = m.observe(ctx, s); err != nil {
		return nil, err
	}
	if err := syncRoutes(ctx, s, members); err != nil {
		return nil, err
	}
	return nodesOf(members), nil
}

// add creates n machines and waits until their nodes are Ready. A machine whose join fails
// with a machine-level code is replaced, up to s.Health.JoinRetries machines in all, while the
// others go on joining; any other failure ends the wait at once.
func (m *Manager) add(ctx context.Context, s Spec, gen, token string, existing []string, n int) ([]string, error) {
	data, err := s.customData(gen, token)
	if err != nil {
		return nil, err
	}
	tflog.Info(ctx, "adding machines", map[string]any{"count": n, "generation": gen})
	added, err := m.create(ctx, s, existing, n, data)
	if err != nil {
		return added, err
	}
	waiting := slices.Clone(added)
	for retries := s.Health.JoinRetries; ; retries-- {
		err := m.waitReady(ctx, s, waiting)
		var failed *JoinError
		if err == nil || !errors.As(err, &failed) || !nodestatus.MachineLevel(failed.Report.Code) || retries == 0 {
			if err == nil {
				tflog.Info(ctx, "nodes Ready", map[string]any{"nodes": added})
			}
			if failed != nil && failed.Diagnosis == nil {
				failed.Diagnosis = m.diagnose(ctx, failed.Report.Node)
			}
			return added, err
		}
		name := failed.Report.Node
		tflog.Warn(ctx, "replacing a machine whose join failed", map[string]any{"machine": name, "code": string(failed.Report.Code),
			"message": failed.Report.Message, "retries_left": retries - 1})
		x := member{Name: name, machine: true}
		if node, err := m.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err == nil {
			x.Node = node // it registered: its pods are evicted before it goes
		} else if !apierrors.IsNotFound(err) {
			return added, fmt.Errorf("%w; replacing its machine: %w", failed, err)
		}
		if err := m.remove(ctx, s, []member{x}, map[string]finding{name: {unreachable: true}}); err != nil {
			return added, fmt.Errorf("%w; replacing its machine: %w", failed, err)
		}
		isFailed := func(x string) bool { return x == name }
		added, waiting = slices.DeleteFunc(added, isFailed), slices.DeleteFunc(waiting, isFailed)
		more, err := m.create(ctx, s, append(slices.Clone(existing), added...), 1, data)
		added, waiting = append(added, more...), append(waiting, more...)
		if err != nil {
			return added, err
		}
	}
}

// create adds n machines booting with data, and prepares their report objects and the pool's
// access as soon as their names are known: before the machines boot where the backend names them
// first, else once it has created them (a join that is over by then writes its report when the
// object appears).
func (m *Manager) create(ctx context.Context, s Spec, existing []string, n int, data []byte) ([]string, error) {
	prepare := func(names []string) error {
		return nodeaccess.Prepare(ctx, m.Client, s.Pool, append(slices.Clone(existing), names...))
	}
	var prepared []string
	added, err := m.Compute.Add(ctx, n, data, func(names []string) error {
		prepared = names
		return prepare(names)
	})
	if err != nil {
		if prepared != nil && !slices.Equal(prepared, added) {
			err = errors.Join(err, prepare(added)) // the objects of machines that were not created go
		}
		return added, fmt.Errorf("add %d machines to pool %s: %w", n, s.Pool, err)
	}
	tflog.Info(ctx, "machines created; waiting for their nodes", map[string]any{"machines": added})
	if slices.Equal(prepared, added) {
		return added, nil
	}
	return added, prepare(added)
}

// remove drains the members, deletes their machines in one batch, then their Node objects and,
// when the pool keeps routes, their routes. A member whose kubelet is gone (by its verdict) is
// drained without waiting for its pods to terminate. A node whose drain fails keeps its machine
// and its route; the others go.
func (m *Manager) remove(ctx context.Context, s Spec, members []member, verdicts map[string]finding) error {
	gone, errs := m.drain(ctx, s, members, verdicts)
	var machines []string
	for _, x := range members {
		if x.machine && slices.Contains(gone, x.Name) {
			machines = append(machines, x.Name)
		}
	}
	if len(machines) > 0 {
		tflog.Info(ctx, "deleting machines", map[string]any{"machines": machines})
		if err := m.Compute.Delete(ctx, machines); err != nil {
			return errors.Join(append(errs, fmt.Errorf("delete machines %v: %w", machines, err))...)
		}
	}
	var deleted []string
	for _, name := range gone {
		if err := m.deleteNode(ctx, name); err != nil {
			errs = append(errs, err)
			continue
		}
		deleted = append(deleted, name)
	}
	if err := removeRoutes(ctx, s, deleted); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// drainParallel bounds how many nodes drain at once.
const drainParallel = 8

// drain cordons and drains the members' nodes in parallel (through the Eviction API) and
// returns those drained. A member without a Node has nothing to drain.
func (m *Manager) drain(ctx context.Context, s Spec, members []member, verdicts map[string]finding) (drained []string, errs []error) {
	type result struct {
		node string
		err  error
	}
	results := make(chan result, len(members))
	sem := make(chan struct{}, drainParallel)
	for _, x := range members {
		go func() {
			if x.Node == nil {
				results <- result{x.Name, nil}
				return
			}
			sem <- struct{}{}
			defer func() { <-sem }()
			o := s.Drain
			o.Unreachable = verdicts[x.Name].unreachable
			tflog.Info(ctx, "draining node", map[string]any{"node": x.Name, "unreachable": o.Unreachable})
			results <- result{x.Name, drain.Node(ctx, m.Client, x.Name, o)}
		}()
	}
	for range members {
		r := <-results
		if r.err != nil {
			errs = append(errs, r.err)
			continue
		}
		tflog.Info(ctx, "node drained", map[string]any{"node": r.node})
		drained = append(drained, r.node)
	}
	slices.Sort(drained)
	return drained, errs
}

func (m *Manager) deleteNode(ctx context.Context, name string) error {
	if err := m.Client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Node %s: %w", name, err)
	}
	return nil
}

// Nodes returns the pool's machines with their Node's state.
func (m *Manager) Nodes(ctx context.Context, s Spec) ([]Node, error) {
	members, err := m.observe(ctx, s)
	if err != nil {
		return nil, err
	}
	return nodesOf(members), nil
}

// nodesOf is the members that are machines, with their Node's state.
func nodesOf(members []member) []Node {
	var out []Node
	for _, x := range members {
		if !x.machine {
			continue
		}
		n := Node{Name: x.Name, Ready: x.Running && x.ready()}
		if x.Node != nil {
			n.PodCIDR = x.Node.Spec.PodCIDR
			for _, a := range x.Node.Status.Addresses {
				if a.Type == corev1.NodeInternalIP {
					n.IP = a.Address
				}
			}
		}
		out = append(out, n)
	}
	return out
}

// Destroy drains and removes every node, the pool at the backend, then the pool's tokens and
// access.
func (m *Manager) Destroy(ctx context.Context, s Spec) error {
	ctx = tflog.SetField(ctx, "pool", s.Pool)
	members, err := m.observe(ctx, s)
	if err != nil {
		return err
	}
	// Every node is drained; those whose kubelet is gone without waiting for their pods.
	verdicts := map[string]finding{}
	for _, x := range members {
		verdicts[x.Name] = finding{unreachable: !x.machine || !x.Running || unreachable(x.Node)}
	}
	if err := m.remove(ctx, s, members, verdicts); err != nil {
		return err
	}
	tflog.Info(ctx, "removing the pool")
	if err := m.Compute.Destroy(ctx); err != nil {
		return fmt.Errorf("remove pool %s: %w", s.Pool, err)
	}
	if err := syncRoutes(ctx, s, nil); err != nil { // routes of nodes gone before this apply
		return err
	}
	return errors.Join(bootstraptoken.DeletePool(ctx, m.Client, s.Pool), nodeaccess.Cleanup(ctx, m.Client, s.Pool),
		holdRuntimeClass(ctx, m.Client, s.Pool, false))
}
