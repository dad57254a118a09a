package join

import (
	"context"

	"github.com/kubewin/kubewin/nodeboot/internal/workflow"
)

// Phase names.
const (
	PhasePreflight     = "preflight"
	PhaseDiscovery     = "discovery"
	PhaseTLSBootstrap  = "tls-bootstrap"
	PhaseRegister      = "register"
	PhaseNetwork       = "network"
	PhaseKubeletConfig = "kubelet-config"
	PhaseServices      = "services"
	PhaseRoutes        = "routes"
)

// phase is one step of the join. Each phase runs over an interface of what it uses
// (preflightData, discoveryData, ...), which the joining Node implements.
type phase struct {
	name, short string
	run         func(context.Context, *Node) error
}

// joinPhases is the join, in order: the one list that `nodeboot join`, its `phase` commands,
// `nodeboot status` and the reports are made from.
var joinPhases = []phase{
	{PhasePreflight, "checking the machine against the image and the NodeConfig",
		func(ctx context.Context, n *Node) error { return runPreflight(ctx, n) }},
	{PhaseDiscovery, "finding the cluster and pinning its CA",
		func(ctx context.Context, n *Node) error { return runDiscovery(ctx, n) }},
	{PhaseTLSBootstrap, "requesting the kubelet client certificate",
		func(ctx context.Context, n *Node) error { return runTLSBootstrap(ctx, n) }},
	{PhaseRegister, "creating the Node object with its labels and taints",
		func(ctx context.Context, n *Node) error { return runRegister(ctx, n) }},
	{PhaseNetwork, "preparing the pod network (pod CIDR, HNS network, CNI config)",
		func(ctx context.Context, n *Node) error { return runNetwork(ctx, n) }},
	{PhaseKubeletConfig, "writing the kubelet, kube-proxy and runtime configuration",
		func(ctx context.Context, n *Node) error { return runKubeletConfig(ctx, n) }},
	{PhaseServices, "installing and starting the node services",
		func(ctx context.Context, n *Node) error { return runServices(ctx, n) }},
	{PhaseRoutes, "programming routes to the other nodes' pod CIDRs",
		func(ctx context.Context, n *Node) error { return runRoutes(ctx, n) }},
}

// PhaseNames lists the join phases in order.
func PhaseNames() []string {
	names := make([]string, len(joinPhases))
	for i, p := range joinPhases {
		names[i] = p.name
	}
	return names
}

// phasesOf binds the join phases to n.
func phasesOf(n *Node) []workflow.Phase {
	out := make([]workflow.Phase, len(joinPhases))
	for i, p := range joinPhases {
		out[i] = workflow.Phase{Name: p.name, Short: p.short, Run: func(ctx context.Context) error { return p.run(ctx, n) }}
	}
	return out
}
