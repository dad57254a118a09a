package cmd

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubewin/kubewin/internal/nodestatus"
	"github.com/kubewin/kubewin/nodeboot/internal/join"
	"github.com/kubewin/kubewin/nodeboot/internal/platform"
)

func newJoin(f *machineFlags) *cobra.Command {
	c := &cobra.Command{
		Use:   "join",
		Short: "Join this machine to the cluster its NodeConfig names",
		Long: `Join this machine to a Kubernetes cluster, in phases: ` + strings.Join(join.PhaseNames(), ", ") + `.
Each phase's outcome is recorded, so an interrupted join resumes where it stopped. Failures
name the phase and an error code (see docs/nodeboot-errors.md); once the cluster is trusted
they are also reported to it. When the join is done the bootstrap token is removed from the
NodeConfig on disk.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return f.runJoin(c, func(ctx context.Context, n *join.Node) error { return n.Join(ctx) })
		},
	}
	phase := &cobra.Command{Use: "phase", Short: "Run one phase of the join (and the earlier ones not done yet)"}
	for _, p := range join.PhaseNames() {
		phase.AddCommand(&cobra.Command{
			Use:   p,
			Short: "Run the " + p + " phase",
			Args:  cobra.NoArgs,
			RunE: func(c *cobra.Command, _ []string) error {
				return f.runJoin(c, func(ctx context.Context, n *join.Node) error { return n.RunPhase(ctx, p) })
			},
		})
	}
	c.AddCommand(phase)
	return c
}

func newRun(f *machineFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "run",
		Short: "Run the node: finish the join, re-create the network, supervise the services, repair drift",
		Long: `Run is the nodeboot service, which the service manager starts at boot. On every boot it
finishes the join if needed, makes the HNS network exist (HNS networks and endpoints do not
reliably survive a reboot), and only then starts the kubelet and kube-proxy services, which the
service manager never starts on its own. It then keeps host-gateway routes or overlay peers in
step with the cluster's Nodes, and every 30 seconds checks the node for drift: an HNS network, the
host endpoint, a route or an overlay peer lost (a reboot, an HNS restart or a Windows update
loses them) is restored with the boot's own steps, kube-proxy restarted when its network was made
again, a stopped node service started; every repair is logged and counted (nodeboot status). It
publishes the node's conditions KubewinNetworkReady, KubewinDNSReady (the cluster DNS service
resolves kubernetes.default.svc.<cluster domain>) and KubewinRuntimeReady on its Node. On a
simulated machine it also runs the simulated kubelet. It stops on SIGINT/SIGTERM (or a service
stop on Windows).`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			// A long-running, mostly idle agent: collect garbage sooner and stay small.
			if os.Getenv("GOGC") == "" {
				debug.SetGCPercent(50)
			}
			var n *join.Node
			defer func() {
				if n != nil {
					shutdown(n.Platform)
				}
			}()
			// The first-boot wait runs in the service, which has reported itself running: a service
			// process must connect to the Service Control Manager within 30 seconds of its start
			// (https://learn.microsoft.com/en-us/windows/win32/api/winsvc/nf-winsvc-startservicectrldispatcherw).
			return serve(func(ctx context.Context) error {
				var err error
				if n, err = f.node(ctx, c.OutOrStdout(), true); err != nil {
					return err
				}
				if !n.Joined() {
					if err := n.Join(ctx); err != nil {
						return err
					}
					if err := f.scrubToken(n); err != nil {
						return err
					}
				}
				return n.Serve(ctx)
			})
		},
	}
}

// runJoin runs (part of) the join until interrupted, then removes the token once it is done.
func (f *machineFlags) runJoin(c *cobra.Command, run func(context.Context, *join.Node) error) error {
	ctx, stop := signalContext()
	defer stop()
	n, err := f.node(ctx, c.OutOrStdout(), true)
	if err != nil {
		return err
	}
	defer shutdown(n.Platform)
	if err := run(ctx, n); err != nil {
		return err
	}
	if n.Joined() {
		return f.scrubToken(n)
	}
	return nil
}

// shutdown stops the service programs that run in nodeboot's own process, which only a
// simulated machine has: there, stopping nodeboot is shutting the machine down. On Windows the
// services are the Service Control Manager's and outlive nodeboot.
func shutdown(p platform.Platform) {
	if m, ok := p.(interface{ Shutdown() }); ok {
		m.Shutdown()
	}
}

func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

func newStatus(f *machineFlags) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "status",
		Short: "Show each join phase, its duration, the last error with its code, and the node's health",
		Long: `Status shows each join phase, its duration and the last error with its code, then what
` + "`nodeboot run`" + ` last found of the node: its conditions (published on the Node as KubewinNetworkReady,
KubewinDNSReady and KubewinRuntimeReady) and the repairs it made since it started, by kind.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			n, err := f.node(c.Context(), c.ErrOrStderr(), false)
			if err != nil {
				return err
			}
			r := n.Report()
			health, ran, err := n.Health()
			if err != nil {
				return err
			}
			if asJSON {
				if !ran {
					return writeJSON(c.OutOrStdout(), r)
				}
				return writeJSON(c.OutOrStdout(), struct {
					*nodestatus.Report
					Health join.Health `json:"health"`
				}{r, health})
			}
			out := c.OutOrStdout()
			_, _ = fmt.Fprintf(out, "node %s: %s\n", r.Node, r.State)
			for _, name := range join.PhaseNames() {
				rec := n.State().Phase(name)
				if rec == nil {
					_, _ = fmt.Fprintf(out, "  %-15s not run\n", name)
					continue
				}
				line := fmt.Sprintf("  %-15s %-8s %s", name, rec.State, rec.Duration.Round(1e6))
				if rec.Code != "" {
					line += fmt.Sprintf("  %s: %s", rec.Code, rec.Message)
				}
				_, _ = fmt.Fprintln(out, line)
			}
			if ran {
				printHealth(out, health)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON (with the health `nodeboot run` last found)")
	return c
}

// printHealth prints the conditions and repairs `nodeboot run` last recorded.
func printHealth(out io.Writer, h join.Health) {
	_, _ = fmt.Fprintf(out, "health at %s:\n", h.Updated.Format(time.RFC3339))
	for _, cond := range h.Conditions {
		_, _ = fmt.Fprintf(out, "  %-21s %-7s %s: %s\n", cond.Type, cond.Status, cond.Reason, cond.Message)
	}
	kinds := slices.Sorted(maps.Keys(h.Repairs))
	if len(kinds) == 0 {
		_, _ = fmt.Fprintln(out, "  repairs: none since nodeboot run started")
		return
	}
	var counts []string
	for _, k := range kinds {
		counts = append(counts, fmt.Sprintf("%s %d", k, h.Repairs[k]))
	}
	_, _ = fmt.Fprintf(out, "  repairs: %s; last %s at %s\n", strings.Join(counts, ", "), h.LastRepair, h.LastRepairTime.Format(time.RFC3339))
}

func newReset(f *machineFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "reset",
		Short: "Undo the join on this machine: services, pods, routes, networks, credentials and state",
		Long: `Reset returns the machine to the state its image left it in: it stops nodeboot's own service
(which stays registered, to join again at the next boot), stops and removes the node services and
the pods' containers, removes kube-proxy's HNS load balancers, the kubewin routes, the HNS pod
network with its endpoints and the External bootstrap network, the files the join wrote
(component and CNI configuration, the kubelet credential and certificates, kubeconfig, cluster CA
and join state), the kubelet's directory (C:\var\lib\kubelet: pod directories) and CNI's state
(C:\var\lib\cni: address leases, result cache). What the bake installed stays. It does not
touch the cluster: drain and delete the Node object there (the provider does this when it scales
a pool in).`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ctx, stop := signalContext()
			defer stop()
			n, err := f.node(ctx, c.OutOrStdout(), false)
			if err != nil {
				return err
			}
			return n.Reset(ctx)
		},
	}
}
