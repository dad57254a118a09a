package join

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/nodeboot/internal/platform"
)

// DefaultCheckInterval is how often `nodeboot run` checks the node for drift. HNS has no change
// notification nodeboot can subscribe to (hcsshim's hcn package, the HNS v2 API, has calls and
// no events), so nodeboot polls, cheaply: a check is an HNS query by name for each network
// and the l2bridge host endpoint, the host's interface list and IPv4 forwarding table (the
// routes to the metadata endpoints), an SCM query per node service, one DNS query, and on
// host-gateway one Get-NetRoute for the peers' routes (PowerShell: it tells the stores apart).
// Windows could notify route changes through NotifyRouteChange2, but one poll for everything
// keeps one path, the same on the simulated machine. 30 s bounds
// how long a network lost to an HNS restart stays broken, at a third of the rate of the
// kubelet's own node status loop (nodeStatusUpdateFrequency, 10 s).
const DefaultCheckInterval = 30 * time.Second

// Repair retries: a failed repair is tried again after 1 s, 2 s, 4 s, ... up to the check
// interval, at most maxFastRetries times in a row; then at the check interval only.
const (
	repairRetryBase = time.Second
	maxFastRetries  = 5
)

// Repair kinds, as counted in the health file and named in the log.
const (
	RepairNetwork   = "network"
	RepairHost      = "host"
	RepairRoutes    = "routes"
	RepairPeers     = "overlay-peers"
	repairServicePf = "service/"
)

// keeper keeps a running node as it should be: the network as the boot made it, the node
// services running, the way to the peers in step with the Nodes, and the node's conditions
// published.
type keeper struct {
	n *Node
	// spec is the node's HNS network; hasNetwork is false when the CNI owns the network.
	spec       platform.NetworkSpec
	hasNetwork bool
	vtepMAC    string
	// nodes is the Nodes informer's store, in the modes that route to peers.
	nodes cache.Store

	conds     conditions
	health    Health
	failures  int
	published time.Time
	// peersFailed says the last programming of the peers failed.
	peersFailed bool
}

// keep runs until ctx ends: a check at once, then on every check interval and after a failed
// repair with back-off; on every change of a peer Node, an update of the peers.
func (n *Node) keep(ctx context.Context, vtepMAC string) error {
	k := &keeper{n: n, vtepMAC: vtepMAC, health: Health{Repairs: map[string]int{}}}
	var err error
	if k.spec, k.hasNetwork, err = platform.NetworkSpecFor(n.Config, n.state.Data.PodCIDR); err != nil {
		return err
	}
	var nodesChanged <-chan struct{}
	switch n.Config.Network.Mode {
	case v1alpha1.NetworkModeHostGateway, v1alpha1.NetworkModeOverlay:
		if k.nodes, nodesChanged, err = n.watchNodes(ctx); err != nil {
			return err
		}
	}
	k.conds.seed(ctx, n)
	interval := n.checkInterval()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	peersDue, full := true, true
	for {
		var retry <-chan time.Time
		if k.passOf(ctx, full, peersDue) {
			k.failures = 0
		} else if ctx.Err() == nil {
			k.failures++
			if k.failures <= maxFastRetries {
				d := min(repairRetryBase<<(k.failures-1), interval)
				_, _ = fmt.Fprintf(n.Out, "[drift] retrying in %s (%d of %d)\n", d, k.failures, maxFastRetries)
				retry = time.After(d)
			}
		}
		// An update of the peers that failed (publishing the VTEP, programming) is due again.
		peersDue, full = k.peersFailed, true
		select {
		case <-ctx.Done():
			return nil
		case <-nodesChanged:
			// A peer changed: the peers are updated, and the rest waits for the next check,
			// unless a repair is waiting for its retry. A pool's joins change every Node several
			// times, and on Windows a whole check is a run of HNS, SCM and PowerShell calls on
			// every node for each change.
			peersDue, full = true, k.failures > 0
		case <-retry:
		case <-tick.C:
		}
	}
}

func (n *Node) checkInterval() time.Duration {
	if n.CheckInterval > 0 {
		return n.CheckInterval
	}
	return DefaultCheckInterval
}

// pass checks and repairs, in the boot's order (the network, the services, the peers), probes
// the runtime and DNS, and publishes the conditions. It reports whether everything is as it
// should be or was repaired.
func (k *keeper) pass(ctx context.Context, peersDue bool) bool {
	ok := true
	repairedNetwork := false
	if k.hasNetwork {
		var good bool
		good, repairedNetwork = k.keepNetwork(ctx)
		ok = ok && good
	}
	ok = k.keepServices(ctx) && ok
	if k.nodes != nil {
		k.peersFailed = !k.keepPeers(ctx, peersDue || repairedNetwork, repairedNetwork)
		ok = ok && !k.peersFailed
	}
	k.probeDNS(ctx)
	return k.publishLogged(ctx) && ok
}

// passOf runs a whole check (full), or updates the peers and publishes the conditions only.
func (k *keeper) passOf(ctx context.Context, full, peersDue bool) bool {
	if full {
		return k.pass(ctx, peersDue)
	}
	k.peersFailed = !k.keepPeers(ctx, peersDue, false)
	return k.publishLogged(ctx) && !k.peersFailed
}

// publishLogged publishes the conditions, logging a failure unless ctx ended; it reports
// whether they were published.
func (k *keeper) publishLogged(ctx context.Context) bool {
	err := k.publish(ctx)
	if err != nil && ctx.Err() == nil {
		_, _ = fmt.Fprintf(k.n.Out, "[conditions] %v\n", err)
	}
	return err == nil
}

// repaired counts a repair of kind and logs it.
func (k *keeper) repaired(kind, what string) {
	k.health.Repairs[kind]++
	k.health.LastRepair, k.health.LastRepairTime = kind+": "+what, time.Now().UTC()
	_, _ = fmt.Fprintf(k.n.Out, "[drift] repaired %s: %s (%d repairs since start)\n", kind, what, k.health.total())
}

// keepNetwork checks the network and, when it drifted, repairs it with the boot's own steps:
// kube-proxy is stopped while the pod network is made again (its load balancers are on the
// old one; it programs them again when it starts: kubernetes
// pkg/proxy/winkernel/proxier.go syncProxyRules), ensureNetwork makes everything of the
// network that is missing, in the boot's order, and kube-proxy starts again with the other
// node services (runServices). It reports whether the network is good, and whether the pod
// network was made again.
func (k *keeper) keepNetwork(ctx context.Context) (good, remade bool) {
	d, err := k.n.Platform.Network().Check(ctx, k.spec)
	if err != nil {
		k.conds.set(ConditionNetworkReady, corev1.ConditionUnknown, "CheckFailed", "cannot check the HNS network: "+err.Error())
		return false, false
	}
	if d.None() {
		// A failure to program the peers is keepPeers' to clear.
		if c := k.conds.get(ConditionNetworkReady); c == nil || (c.Status != corev1.ConditionTrue && c.Reason != reasonRoutesFailed) {
			k.conds.set(ConditionNetworkReady, corev1.ConditionTrue, "NetworkReady", "HNS network "+k.spec.Name+" is as the boot made it")
		}
		return true, false
	}
	_, _ = fmt.Fprintf(k.n.Out, "[drift] %s\n", d)
	k.conds.set(ConditionNetworkReady, corev1.ConditionFalse, "NetworkDrift", d.String()+": repairing")
	k.publishLogged(ctx)
	err = k.repairNetwork(ctx, d)
	if err == nil {
		err = k.checkRepaired(ctx)
	}
	if err != nil {
		k.conds.set(ConditionNetworkReady, corev1.ConditionFalse, "RepairFailed", d.String()+": "+err.Error())
		_, _ = fmt.Fprintf(k.n.Out, "[drift] repair failed: %v\n", err)
		return false, d.Network != ""
	}
	kind := RepairHost
	if d.Network != "" {
		kind = RepairNetwork
	}
	k.repaired(kind, d.String())
	k.conds.set(ConditionNetworkReady, corev1.ConditionTrue, "NetworkRepaired",
		fmt.Sprintf("repaired %s (%d repairs since nodeboot started)", d, k.health.total()))
	return true, d.Network != ""
}

func (k *keeper) repairNetwork(ctx context.Context, d platform.Drift) error {
	services := k.n.Platform.Services()
	proxy := d.Network != "" && k.hasKubeProxy()
	if proxy {
		if err := services.Stop(ctx, kubeProxyService); err != nil {
			return fmt.Errorf("stop kube-proxy before its network is made again: %w", err)
		}
	}
	mac, err := ensureNetwork(ctx, k.n)
	if err != nil {
		return err
	}
	k.vtepMAC = mac
	if proxy {
		if err := runServices(ctx, k.n); err != nil {
			return err
		}
		_, _ = fmt.Fprintf(k.n.Out, "[drift] kube-proxy restarted: its load balancers were on the old network\n")
	}
	return nil
}

// checkRepaired checks the network again after a repair whose steps all went through: one that
// left it drifted (a route the system did not take, which the restore script ignores) failed,
// and is retried with back-off rather than counted as a repair at every check.
func (k *keeper) checkRepaired(ctx context.Context) error {
	d, err := k.n.Platform.Network().Check(ctx, k.spec)
	switch {
	case err != nil:
		return fmt.Errorf("check after the repair: %w", err)
	case !d.None():
		return fmt.Errorf("still drifted after the repair: %s", d)
	}
	return nil
}

const kubeProxyService = "kube-proxy"

// reasonRoutesFailed is the network condition's reason when the peers could not be programmed.
const reasonRoutesFailed = "RoutesFailed"

func (k *keeper) hasKubeProxy() bool {
	specs, err := serviceSpecs(k.n)
	return err == nil && slices.ContainsFunc(specs, func(s platform.ServiceSpec) bool { return s.Name == kubeProxyService })
}

// keepServices starts the node services that stopped (a crash the service manager has not
// restarted yet, a stop by hand), with the boot's step, and sets the runtime condition.
func (k *keeper) keepServices(ctx context.Context) bool {
	runtime := k.n.Config.Runtime
	if err := k.n.Platform.CheckRuntime(ctx, runtime.Name, runtime.Endpoint); err != nil {
		k.conds.set(ConditionRuntimeReady, corev1.ConditionFalse, "RuntimeNotAnswering", err.Error())
		return false
	}
	specs, err := serviceSpecs(k.n)
	if err != nil {
		k.conds.set(ConditionRuntimeReady, corev1.ConditionUnknown, "CheckFailed", err.Error())
		return false
	}
	var stopped []string
	for _, s := range specs {
		running, err := k.n.Platform.Services().Running(ctx, s.Name)
		if err != nil {
			k.conds.set(ConditionRuntimeReady, corev1.ConditionUnknown, "CheckFailed", fmt.Sprintf("service %s: %v", s.Name, err))
			return false
		}
		if !running {
			stopped = append(stopped, s.Name)
		}
	}
	if len(stopped) == 0 {
		if c := k.conds.get(ConditionRuntimeReady); c == nil || c.Status != corev1.ConditionTrue {
			k.conds.set(ConditionRuntimeReady, corev1.ConditionTrue, "ServicesRunning", fmt.Sprintf("%s answers; the node services run", runtime.Name))
		}
		return true
	}
	what := "service " + strings.Join(stopped, ", ") + " stopped"
	_, _ = fmt.Fprintf(k.n.Out, "[drift] %s\n", what)
	if err := runServices(ctx, k.n); err != nil {
		k.conds.set(ConditionRuntimeReady, corev1.ConditionFalse, "ServiceRestartFailed", what+": "+err.Error())
		_, _ = fmt.Fprintf(k.n.Out, "[drift] repair failed: %v\n", err)
		return false
	}
	for _, name := range stopped {
		k.repaired(repairServicePf+name, "started again")
	}
	k.conds.set(ConditionRuntimeReady, corev1.ConditionTrue, "ServicesRestarted",
		fmt.Sprintf("%s: started again (%d repairs since nodeboot started)", what, k.health.total()))
	return true
}

// keepPeers programs the way to the peers. With update (a Node changed, the network was made
// again) it also publishes the VTEP again; a change it makes without one is drift repaired.
func (k *keeper) keepPeers(ctx context.Context, update, remade bool) bool {
	nodes := storedNodes(k.nodes)
	var err error
	if update {
		err = publishVTEP(ctx, k.n, k.vtepMAC)
	}
	changed := false
	if err == nil {
		changed, err = programPeers(ctx, k.n, nodes)
	}
	if err != nil {
		if ctx.Err() == nil {
			_, _ = fmt.Fprintf(k.n.Out, "[routes] %v\n", err)
			k.conds.set(ConditionNetworkReady, corev1.ConditionFalse, reasonRoutesFailed, err.Error())
		}
		return false
	}
	kind := RepairRoutes
	if k.n.Config.Network.Mode == v1alpha1.NetworkModeOverlay {
		kind = RepairPeers
	}
	switch {
	case update && !remade:
		_, _ = fmt.Fprintf(k.n.Out, "[routes] in step with %d nodes\n", len(nodes))
	case changed:
		k.repaired(kind, fmt.Sprintf("programmed again for %d nodes", len(nodes)))
		if !remade {
			k.conds.set(ConditionNetworkReady, corev1.ConditionTrue, "NetworkRepaired",
				fmt.Sprintf("repaired %s (%d repairs since nodeboot started)", kind, k.health.total()))
		}
	}
	if c := k.conds.get(ConditionNetworkReady); c != nil && c.Reason == reasonRoutesFailed {
		k.conds.set(ConditionNetworkReady, corev1.ConditionTrue, "NetworkReady", "HNS network "+k.spec.Name+" and the routes to the peers are in place")
	}
	return true
}

// dnsProbeTimeout bounds the DNS probe: a resolver's own default is 5 s per try (resolv.conf
// timeout), which the probe does not exceed.
const dnsProbeTimeout = 5 * time.Second

// probeDNS asks the cluster DNS service for the API service's name, as a pod does (kubelet
// --cluster-dns and --cluster-domain: kubernetes.default.svc.<cluster domain>).
func (k *keeper) probeDNS(ctx context.Context) {
	c := k.n.Config.Cluster
	name := "kubernetes.default.svc." + c.ClusterDomain
	if len(c.ClusterDNS) == 0 {
		k.conds.set(ConditionDNSReady, corev1.ConditionUnknown, "NoClusterDNS", "the NodeConfig names no cluster DNS service (cluster.clusterDNS)")
		return
	}
	ip, err := netip.ParseAddr(c.ClusterDNS[0])
	if err != nil {
		k.conds.set(ConditionDNSReady, corev1.ConditionUnknown, "NoClusterDNS", fmt.Sprintf("cluster.clusterDNS %q: %v", c.ClusterDNS[0], err))
		return
	}
	server := netip.AddrPortFrom(ip, 53)
	pctx, cancel := context.WithTimeout(ctx, dnsProbeTimeout)
	defer cancel()
	addrs, err := k.n.Platform.LookupHost(pctx, server, name)
	switch {
	case ctx.Err() != nil:
	case errors.Is(err, platform.ErrPodNetworkSimulated):
		k.conds.set(ConditionDNSReady, corev1.ConditionUnknown, "PodNetworkSimulated",
			fmt.Sprintf("not probed: %v (a real node asks %s for %s)", platform.ErrPodNetworkSimulated, server, name))
	case err == nil && len(addrs) == 0:
		err = errors.New("no address")
		fallthrough
	case err != nil:
		k.conds.set(ConditionDNSReady, corev1.ConditionFalse, "ClusterDNSFailed", fmt.Sprintf("%s at %s: %v", name, server, err))
	default:
		k.conds.set(ConditionDNSReady, corev1.ConditionTrue, "ClusterDNSResolves", fmt.Sprintf("%s resolves to %s at %s", name, addrs[0], server))
	}
}
