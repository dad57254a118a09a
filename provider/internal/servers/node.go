package servers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/hashicorp/terraform-plugin-log/tflog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubewin/kubewin/internal/api"
	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/bootstraptoken"
	"github.com/kubewin/kubewin/internal/drain"
	"github.com/kubewin/kubewin/internal/guest"
	"github.com/kubewin/kubewin/internal/nodeaccess"
	"github.com/kubewin/kubewin/internal/nodecmd"
	"github.com/kubewin/kubewin/internal/nodestatus"
	"github.com/kubewin/kubewin/provider/internal/pool"
)

// SnapshotList is where a server keeps the list of what it held under kubewin's directories
// before the join.
const SnapshotList = `C:\ProgramData\kubewin\pre-join.txt`

// HostLabel marks a node joined from an existing server (its value is the node's name).
const HostLabel = "kubewin.io/host"

// Group is the access group of a node's bootstrap tokens and report: a pool of its own, whose
// name starts with a digit so that it is no pool's (pool names start with a letter) and holds
// only what label values and token groups both allow.
func Group(node string) string { return "0-" + node }

// Node is an existing server's node.
type Node struct {
	Server guest.Shell
	Client kubernetes.Interface
	// Name is the node's name.
	Name string
	// Install installs the payload; nil when the server was baked from a kubewin image.
	Install *guest.Install
	// Config is the node's NodeConfig, without its name and token, which Join sets.
	Config   v1alpha1.NodeConfig
	TokenTTL time.Duration
	Drain    drain.Options
	// Poll is how often the wait for Ready looks at the node. Default 500ms.
	Poll time.Duration
}

// run runs a command on the server, its output logged line by line.
func (n *Node) run(ctx context.Context, what, line string) error {
	if line == "" {
		return nil
	}
	out := guest.LineWriter(func(l string) { tflog.Debug(ctx, l, map[string]any{"node": n.Name, "command": what}) })
	defer func() { _ = out.Close() }()
	_, err := guest.Run(ctx, n.Server, guest.Command{What: what, Line: line, Elevated: true}, out)
	return err
}

// Snapshot records what the server holds under kubewin's directories: the state Remove
// returns it to. It is the first change Join makes, and Join's caller saves the node's state
// once it is done.
func (n *Node) Snapshot(ctx context.Context) error {
	tflog.Info(ctx, "recording the server's state before the join", map[string]any{"node": n.Name})
	return n.run(ctx, "record the server's state", n.Server.Lang.Snapshot(SnapshotList))
}

// Join installs the payload when asked, joins the node and waits until it is Ready. A join that
// fails is a *pool.JoinError naming the phase and the code.
func (n *Node) Join(ctx context.Context) error {
	ctx = tflog.SetField(ctx, "node", n.Name)
	if n.Install != nil {
		tflog.Info(ctx, "installing the payload", map[string]any{"transfer": n.Install.Transfer, "files": len(n.Install.Plan.Files)})
		in := *n.Install
		out := guest.LineWriter(func(l string) { tflog.Info(ctx, l) })
		defer func() { _ = out.Close() }()
		in.Say, in.Out = func(s string) { tflog.Info(ctx, s) }, out
		if _, err := in.Run(ctx, n.Server, n.Server.Lang); err != nil {
			return fmt.Errorf("install the payload: %w", err)
		}
	}
	group := Group(n.Name)
	if err := nodeaccess.Prepare(ctx, n.Client, group, []string{n.Name}); err != nil {
		return err
	}
	token, err := bootstraptoken.Create(ctx, n.Client, group, n.TokenTTL)
	if err != nil {
		return err
	}
	defer func() {
		if err := bootstraptoken.Delete(context.WithoutCancel(ctx), n.Client, token); err != nil {
			tflog.Warn(ctx, "cannot delete the node's bootstrap token; it expires by itself", map[string]any{"error": err.Error()})
		}
	}()
	cfg := n.Config
	cfg.Node.Name = n.Name
	cfg.Node.Labels = maps.Clone(cfg.Node.Labels)
	if cfg.Node.Labels == nil {
		cfg.Node.Labels = map[string]string{}
	}
	cfg.Node.Labels[HostLabel] = n.Name
	cfg.Cluster.BootstrapToken = token
	doc, err := api.EncodeJSON(cfg)
	if err != nil {
		return err
	}
	tflog.Info(ctx, "writing the NodeConfig", map[string]any{"path": nodecmd.DefaultPaths().CustomData})
	if err := n.Server.Write(ctx, nodecmd.DefaultPaths().CustomData, bytes.NewReader(doc), true); err != nil {
		return fmt.Errorf("write the NodeConfig: %w", err)
	}
	// An image's nodeboot service may be trying to join on its own; the join runs here.
	if err := n.run(ctx, "stop the nodeboot service", n.Server.Lang.StopNode()); err != nil {
		return err
	}
	tflog.Info(ctx, "running nodeboot join")
	phases := guest.LineWriter(func(l string) { tflog.Info(ctx, l) })
	_, err = guest.Run(ctx, n.Server, guest.Command{What: "nodeboot join", Line: n.Server.Lang.Nodeboot("join"), Elevated: true}, phases)
	_ = phases.Close()
	if err != nil {
		var exit *guest.ExitError
		if errors.As(err, &exit) {
			if r := n.report(ctx); r != nil && r.State == nodestatus.StateFailed {
				return &pool.JoinError{Report: *r, Log: exit.Output, Diagnosis: n.diagnose(ctx)}
			}
		}
		return err
	}
	if err := n.run(ctx, "start the nodeboot service", n.Server.Lang.StartNode()); err != nil {
		return err
	}
	return n.waitReady(ctx)
}

// report reads the join report the server keeps itself, which holds failures from before
// the node trusted the cluster (which never reach it).
func (n *Node) report(ctx context.Context) *nodestatus.Report {
	out, err := guest.Output(ctx, n.Server, guest.Command{What: "nodeboot status", Line: n.Server.Lang.Nodeboot("status", "--json")})
	if err != nil {
		tflog.Warn(ctx, "cannot read the join report on the server", map[string]any{"error": err.Error()})
		return nil
	}
	var r nodestatus.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		tflog.Warn(ctx, "the server's join report is not JSON", map[string]any{"error": err.Error()})
		return nil
	}
	return &r
}

// diagnose runs nodeboot diagnose on the server and downloads the bundle over the same
// connection, then saves it (pool.Diagnosis.SaveBundle). It returns nil when the server has
// no bundle to give.
func (n *Node) diagnose(ctx context.Context) *pool.Diagnosis {
	ctx = context.WithoutCancel(ctx)
	out, err := guest.Output(ctx, n.Server, guest.Command{What: "nodeboot diagnose", Line: n.Server.Lang.Nodeboot("diagnose"), Elevated: true})
	if err != nil {
		tflog.Warn(ctx, "cannot gather the server's diagnostics bundle", map[string]any{"error": err.Error()})
		return nil
	}
	d := &pool.Diagnosis{}
	d.Summary, d.Report, d.OnNode = nodestatus.ParseDiagnosis(out)
	if d.OnNode == "" {
		return d
	}
	var bundle bytes.Buffer
	if err := n.Server.Download(ctx, d.OnNode, &bundle); err != nil {
		tflog.Warn(ctx, "cannot download the server's diagnostics bundle", map[string]any{"path": d.OnNode, "error": err.Error()})
		return d
	}
	d.Bundle = bundle.Bytes()
	if err := d.SaveBundle(n.Name); err != nil {
		tflog.Warn(ctx, "cannot save the server's diagnostics bundle", map[string]any{"error": err.Error()})
	}
	return d
}

// waitReady waits until the Node is Ready, or fails with the failure its report names.
func (n *Node) waitReady(ctx context.Context) error {
	poll := n.Poll
	if poll == 0 {
		poll = 500 * time.Millisecond
	}
	tflog.Info(ctx, "waiting for the node to be Ready")
	for {
		node, err := n.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		switch {
		case err == nil && pool.NodeReady(node):
			tflog.Info(ctx, "node Ready")
			return nil
		case err != nil && !apierrors.IsNotFound(err):
			return fmt.Errorf("read Node %s: %w", n.Name, err)
		}
		if r, err := nodestatus.Read(ctx, n.Client, n.Name); err == nil && r != nil && r.State == nodestatus.StateFailed {
			return &pool.JoinError{Report: *r, Diagnosis: n.diagnose(ctx)}
		}
		select {
		case <-ctx.Done():
			phase := "no report"
			if r := n.report(context.WithoutCancel(ctx)); r != nil {
				phase = fmt.Sprintf("its join is %s, last phase %s", r.State, r.Phase)
			}
			err := fmt.Errorf("node %s was not Ready in time (%s): raise timeouts.create, or look at the server's nodeboot log", n.Name, phase)
			if d := n.diagnose(ctx).Detail(n.Name); d != "" {
				err = fmt.Errorf("%w\n\n%s", err, d)
			}
			return err
		case <-time.After(poll):
		}
	}
}

// Removal says what Remove undoes.
type Removal struct {
	// Installed is the runtime the resource's install put on the server, empty when the
	// server was baked: what the bake registered is then removed too.
	Installed v1alpha1.RuntimeName
}

// Remove cordons and drains the node, resets the server to what it held before the join
// (removing the payload the resource installed), then deletes the Node, the node's tokens and
// its access. A drain that fails stops it before the server is touched.
func (n *Node) Remove(ctx context.Context, r Removal) error {
	ctx = tflog.SetField(ctx, "node", n.Name)
	_, err := n.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	switch {
	case err == nil:
		tflog.Info(ctx, "draining the node")
		if err := drain.Node(ctx, n.Client, n.Name, n.Drain); err != nil {
			return err
		}
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("read Node %s: %w", n.Name, err)
	}
	if err := n.ResetServer(ctx, r); err != nil {
		return err
	}
	if err := n.Client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Node %s: %w", n.Name, err)
	}
	group := Group(n.Name)
	return errors.Join(bootstraptoken.DeletePool(ctx, n.Client, group), nodeaccess.Cleanup(ctx, n.Client, group))
}

// ResetServer stops the node's services, runs nodeboot reset when the join got that far,
// removes what the resource's bake registered, and removes every file that appeared since the
// snapshot.
func (n *Node) ResetServer(ctx context.Context, r Removal) error {
	f, err := Inspect(ctx, n.Server)
	if err != nil {
		return err
	}
	if err := n.run(ctx, "stop the nodeboot service", n.Server.Lang.StopNode()); err != nil {
		return err
	}
	for _, file := range f.Files {
		if file == nodecmd.DefaultPaths().CustomData || file == guest.JoinState {
			tflog.Info(ctx, "running nodeboot reset")
			if err := n.run(ctx, "nodeboot reset", n.Server.Lang.Nodeboot("reset")); err != nil {
				return err
			}
			break
		}
	}
	if r.Installed != "" {
		tflog.Info(ctx, "removing what the bake registered", map[string]any{"runtime": string(r.Installed)})
		if err := n.run(ctx, "remove the bake's services", n.Server.Lang.Unbake(r.Installed)); err != nil {
			return err
		}
	}
	tflog.Info(ctx, "removing what appeared on the server since the join began")
	return n.run(ctx, "restore the server's state", n.Server.Lang.Restore(SnapshotList))
}

// Observe returns whether the node's Node exists and is Ready.
func Observe(ctx context.Context, c kubernetes.Interface, name string) (exists, ready bool, err error) {
	node, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("read Node %s: %w", name, err)
	}
	return true, pool.NodeReady(node), nil
}
