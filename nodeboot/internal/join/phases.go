package join

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/filesum"
	"github.com/kubewin/kubewin/internal/ipam"
	"github.com/kubewin/kubewin/internal/nodestatus"
	"github.com/kubewin/kubewin/internal/tlsbootstrap"
	"github.com/kubewin/kubewin/nodeboot/internal/discovery"
	"github.com/kubewin/kubewin/nodeboot/internal/nodefiles"
	"github.com/kubewin/kubewin/nodeboot/internal/platform"
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

// phase is one step of the join, run over the joining Node.
type phase struct {
	name, short string
	run         func(*Node, context.Context) error
}

// joinPhases is the join, in order: the one list that `nodeboot join`, its `phase` commands,
// `nodeboot status` and the reports are made from.
var joinPhases = []phase{
	{PhasePreflight, "checking the machine against the image and the NodeConfig", (*Node).preflight},
	{PhaseDiscovery, "finding the cluster and pinning its CA", (*Node).discovery},
	{PhaseTLSBootstrap, "requesting the kubelet client certificate", (*Node).tlsBootstrap},
	{PhaseRegister, "creating the Node object with its labels and taints", (*Node).register},
	{PhaseNetwork, "preparing the pod network (pod CIDR, HNS network, CNI config)", (*Node).network},
	{PhaseKubeletConfig, "writing the kubelet, kube-proxy and runtime configuration", (*Node).kubeletConfig},
	{PhaseServices, "installing and starting the node services", (*Node).services},
	{PhaseRoutes, "programming routes to the other nodes' pod CIDRs", (*Node).routes},
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
		out[i] = workflow.Phase{Name: p.name, Short: p.short, Run: func(ctx context.Context) error { return p.run(n, ctx) }}
	}
	return out
}

func (n *Node) preflight(ctx context.Context) error {
	if errs := v1alpha1.CheckCompatible(n.Config, n.Manifest); len(errs) > 0 {
		return nodestatus.Errorf(nodestatus.CodeManifestInvalid, "%v", errs.ToAggregate())
	}
	build, err := n.Platform.OSBuild()
	if err != nil {
		return nodestatus.Errorf(nodestatus.CodeInternal, "read the OS build: %w", err)
	}
	if v1alpha1.WindowsBuild(build) != n.Manifest.WindowsBuild {
		return nodestatus.Errorf(nodestatus.CodeOSBuildMismatch, "the machine runs Windows build %d but the image was baked for %d (Windows Server %s)",
			build, n.Manifest.WindowsBuild, n.Manifest.WindowsBuild.Release())
	}
	if err := n.verifyPayload(); err != nil {
		return err
	}
	if err := n.Platform.CheckRuntime(ctx, n.Config.Runtime.Name, n.Config.Runtime.Endpoint); err != nil {
		return nodestatus.Errorf(nodestatus.CodeRuntimeMissing, "container runtime %s: %w", n.Config.Runtime.Name, err)
	}
	if err := n.Platform.CheckPorts(); err != nil {
		return nodestatus.Errorf(nodestatus.CodePortInUse, "%w", err)
	}
	return nil
}

// verifyPayload checks every file of the image against its sha256: first boot downloads
// nothing and trusts nothing it did not bake.
func (n *Node) verifyPayload() error {
	for _, f := range n.Manifest.Files {
		win := n.Paths.Payload(f.Path)
		got, size, err := filesum.File(n.Platform.Path(win))
		if err != nil {
			return nodestatus.Errorf(nodestatus.CodePayloadCorrupt, "payload file %s: %w", win, err)
		}
		if got != f.SHA256 || size != f.Size {
			return nodestatus.Errorf(nodestatus.CodePayloadCorrupt, "payload file %s has sha256 %s and %d bytes, the image manifest says %s and %d bytes", win, got, size, f.SHA256, f.Size)
		}
	}
	return nil
}

func (n *Node) discovery(ctx context.Context) error {
	c := n.Config.Cluster
	res, err := discovery.Discover(ctx, discovery.Options{
		Endpoint: c.APIServerEndpoint, Token: c.BootstrapToken,
		CACertHashes: c.CACertHashes, UnsafeSkipCAVerification: c.UnsafeSkipCAVerification,
		Timeout: n.Timeouts.Discovery, Now: n.Clock,
	})
	if err != nil {
		return err
	}
	if err := n.Platform.WriteFile(n.Paths.ClusterCA, res.CACert); err != nil {
		return nodestatus.Errorf(nodestatus.CodeInternal, "write the cluster CA: %w", err)
	}
	n.state.Data.Server = res.Server
	return n.setBootstrapClient(res.Server, res.CACert)
}

// trusted returns the discovered server and CA, re-reading them after a restart.
func (n *Node) trusted() (string, []byte, error) {
	ca, err := os.ReadFile(n.Platform.Path(n.Paths.ClusterCA))
	server := n.state.Data.Server
	if err != nil || server == "" {
		return "", nil, nodestatus.Errorf(nodestatus.CodeInternal, "the cluster is not discovered yet: run the discovery phase")
	}
	n.mu.Lock()
	missing := n.bootstrapClient == nil
	n.mu.Unlock()
	if missing && n.Config.Cluster.BootstrapToken != "" {
		if err := n.setBootstrapClient(server, ca); err != nil {
			return "", nil, err
		}
	}
	return server, ca, nil
}

func (n *Node) tlsBootstrap(ctx context.Context) error {
	server, ca, err := n.trusted()
	if err != nil {
		return err
	}
	res, err := tlsbootstrap.Run(ctx, tlsbootstrap.Options{
		Server: server, CACert: ca, Token: n.Config.Cluster.BootstrapToken, NodeName: n.Name,
		KeyFile: n.bootstrapKeyFile(), CertFile: n.bootstrapCertFile(), Timeout: n.Timeouts.CSR,
		ReadFile:  func(win string) ([]byte, error) { return os.ReadFile(n.Platform.Path(win)) },
		WriteFile: n.Platform.WriteSecret,
	})
	if err != nil {
		return err
	}
	if res.CSRName != "" {
		n.state.Data.CSR = res.CSRName
	}
	if err := n.writeKubeletKubeconfig(server, ca, res.CertPEM, res.KeyPEM); err != nil {
		return nodestatus.Errorf(nodestatus.CodeInternal, "write the kubelet kubeconfig: %w", err)
	}
	_, err = n.NodeClient()
	return err
}

// NodeObject is the Node a kubewin node registers: the NodeConfig's labels and taints, and the
// labels a Windows kubelet sets on itself.
func NodeObject(c *v1alpha1.NodeConfig, m *v1alpha1.ImageManifest, name string) *corev1.Node {
	labels := map[string]string{
		corev1.LabelOSStable:         "windows",
		corev1.LabelArchStable:       "amd64",
		corev1.LabelHostname:         name,
		corev1.LabelWindowsBuild:     m.WindowsBuild.OSVersion(),
		"node.kubernetes.io/kubewin": "true",
	}
	for k, v := range c.Node.Labels {
		labels[k] = v
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	for _, t := range c.Node.Taints {
		node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
	}
	if c.Node.PodCIDR != "" {
		node.Spec.PodCIDR, node.Spec.PodCIDRs = c.Node.PodCIDR, []string{c.Node.PodCIDR}
	}
	return node
}

func (n *Node) register(ctx context.Context) error {
	c, err := n.NodeClient()
	if err != nil {
		return nodestatus.Errorf(nodestatus.CodeRegisterFailed, "%w", err)
	}
	_, err = c.CoreV1().Nodes().Create(ctx, NodeObject(n.Config, n.Manifest, n.Name), metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return nodestatus.Errorf(nodestatus.CodeRegisterFailed, "create Node %s: %w", n.Name, err)
		}
		return nil
	}
	// A Node of this name exists. One that is not Ready is this machine's own, registered before
	// a restart, or a dead machine's whose name this one inherits: it is adopted. A Ready one is
	// another live machine's: joining would take its name over, so the join stops, as kubeadm's
	// does.
	existing, err := c.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	if err != nil {
		return nodestatus.Errorf(nodestatus.CodeRegisterFailed, "read the existing Node %s: %w", n.Name, err)
	}
	if nodeReady(existing) {
		return nodestatus.Errorf(nodestatus.CodeNodeNameTaken, "a Ready Node named %s already exists in the cluster: delete it (kubectl delete node %s) or give this machine another computer name", n.Name, n.Name)
	}
	return nil
}

// nodeReady reports whether a Node's Ready condition is True.
func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (n *Node) network(ctx context.Context) error {
	ip, subnet, err := n.nodeAddress()
	if err != nil {
		return nodestatus.Errorf(nodestatus.CodeNetworkFailed, "%w", err)
	}
	n.state.Data.NodeIP, n.state.Data.Subnet = ip, subnet
	pod, err := n.waitPodCIDR(ctx)
	if err != nil {
		return err
	}
	n.state.Data.PodCIDR = pod
	if err := n.EnsureNetwork(ctx); err != nil {
		return err
	}
	if err := n.publishVTEP(ctx); err != nil {
		return nodestatus.Errorf(nodestatus.CodeNetworkFailed, "%w", err)
	}
	plan, err := n.plan()
	if err != nil {
		return nodestatus.Errorf(nodestatus.CodeNetworkFailed, "%w", err)
	}
	return n.writeFiles(plan, true, nodestatus.CodeNetworkFailed)
}

// EnsureNetwork (re)creates the node's HNS network; `nodeboot run` calls it on every boot
// before it starts the kubelet, because HNS networks do not reliably survive a reboot.
func (n *Node) EnsureNetwork(ctx context.Context) error {
	pod := n.state.Data.PodCIDR
	if !pod.IsValid() {
		return nodestatus.Errorf(nodestatus.CodeNetworkFailed, "the node has no pod CIDR yet: run the network phase")
	}
	spec, ok, err := platform.NetworkSpecFor(n.Config, pod)
	if err != nil {
		return nodestatus.Errorf(nodestatus.CodeNetworkFailed, "%w", err)
	}
	if !ok {
		return nil
	}
	info, err := n.Platform.Network().Ensure(ctx, spec)
	if err != nil {
		return nodestatus.Errorf(nodestatus.CodeNetworkFailed, "HNS network %s: %w", spec.Name, err)
	}
	n.mu.Lock()
	n.vtepMAC = info.VTEPMAC
	n.mu.Unlock()
	return nil
}

func (n *Node) nodeAddress() (netip.Addr, netip.Prefix, error) {
	var subnet netip.Prefix
	if n.Config.Node.Subnet != "" {
		subnet, _ = ipam.ParsePrefix(n.Config.Node.Subnet)
	}
	if n.Config.Node.IP != "" {
		ip, err := ipam.ParseAddr(n.Config.Node.IP)
		return ip, subnet, err
	}
	ip, found, err := n.Platform.Address(n.Config.Network.InterfaceName)
	if err != nil {
		return netip.Addr{}, netip.Prefix{}, fmt.Errorf("address of adapter %q (network.interfaceName): %w", n.Config.Network.InterfaceName, err)
	}
	if !subnet.IsValid() {
		subnet = found
	}
	return ip, subnet, nil
}

func (n *Node) waitPodCIDR(ctx context.Context) (netip.Prefix, error) {
	if n.Config.Node.PodCIDR != "" {
		return ipam.ParsePrefix(n.Config.Node.PodCIDR)
	}
	c, err := n.NodeClient()
	if err != nil {
		return netip.Prefix{}, nodestatus.Errorf(nodestatus.CodeNetworkFailed, "%w", err)
	}
	var cidr string
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, n.Timeouts.PodCIDR, true, func(ctx context.Context) (bool, error) {
		node, err := c.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		cidr = node.Spec.PodCIDR
		return cidr != "", nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return netip.Prefix{}, ctx.Err()
		}
		return netip.Prefix{}, nodestatus.Errorf(nodestatus.CodePodCIDRTimeout, "node %s got no pod CIDR within %s", n.Name, n.Timeouts.PodCIDR)
	}
	p, err := ipam.ParsePrefix(cidr)
	if err != nil {
		return netip.Prefix{}, nodestatus.Errorf(nodestatus.CodeNetworkFailed, "pod CIDR %q assigned to the node: %w", cidr, err)
	}
	return p, nil
}

// facts are what the network phase learned about the node.
func (n *Node) facts() (nodefiles.Facts, error) {
	d := n.state.Data
	if !d.NodeIP.IsValid() || !d.PodCIDR.IsValid() {
		return nodefiles.Facts{}, fmt.Errorf("the node's address and pod CIDR are not known yet: run the network phase")
	}
	return nodefiles.Facts{NodeName: n.Name, NodeIP: d.NodeIP, PodCIDR: d.PodCIDR}, nil
}

// plan renders the node's files and service command lines.
func (n *Node) plan() (*nodefiles.Plan, error) {
	f, err := n.facts()
	if err != nil {
		return nil, err
	}
	return nodefiles.Render(n.Config, n.Manifest, f, n.Paths)
}

// writeFiles writes the plan's CNI files (cni=true) or the others.
func (n *Node) writeFiles(p *nodefiles.Plan, cni bool, code nodestatus.Code) error {
	paths := make([]string, 0, len(p.Files))
	for path := range p.Files {
		if strings.HasPrefix(path, n.Paths.CNIConfDir+`\`) == cni {
			paths = append(paths, path)
		}
	}
	slices.Sort(paths)
	for _, path := range paths {
		if err := n.Platform.WriteFile(path, p.Files[path]); err != nil {
			return nodestatus.Errorf(code, "write %s: %w", path, err)
		}
	}
	return nil
}

func (n *Node) kubeletConfig(context.Context) error {
	plan, err := n.plan()
	if err != nil {
		return nodestatus.Errorf(nodestatus.CodeKubeletConfigFailed, "%w", err)
	}
	return n.writeFiles(plan, false, nodestatus.CodeKubeletConfigFailed)
}

// ServiceSpecs are the node's services in start order. nodeboot starts them itself on every
// boot, after the network they need exists: the service manager never starts them on its own
// (as aks-engine registers the kubelet and kube-proxy services, SERVICE_DEMAND_START, and
// starts the kubelet from its boot script after re-creating the network:
// parts/k8s/windowskubeletfunc.ps1, staging/provisioning/windows/windowsnodereset.ps1).
func (n *Node) ServiceSpecs() ([]platform.ServiceSpec, error) {
	plan, err := n.plan()
	if err != nil {
		return nil, err
	}
	bin := n.Paths.BinDir
	logRunner := bin + `\kube-log-runner.exe`
	runtimeDep := string(n.Config.Runtime.Name)
	var specs []platform.ServiceSpec
	if args, ok := plan.Services["cri-dockerd"]; ok {
		// cri-dockerd has no Windows service mode (Mirantis/cri-dockerd has no service
		// handler), and kube-log-runner has none either: nodeboot hosts it.
		specs = append(specs, platform.ServiceSpec{Name: "cri-dockerd", DisplayName: "cri-dockerd", Description: "CRI for Docker Engine, hosted by nodeboot (kubewin)",
			Executable: bin + `\nodeboot.exe`, Args: append([]string{"service-host", "--log-file=" + n.Paths.LogDir + `\cri-dockerd.log`, "--", bin + `\cri-dockerd.exe`}, args...),
			Dependencies: []string{"docker"}, Start: platform.StartByNodeboot})
		runtimeDep = "cri-dockerd"
	}
	specs = append(specs, platform.ServiceSpec{Name: "kubelet", DisplayName: "Kubernetes kubelet", Description: "Kubernetes node agent (kubewin)",
		Executable: bin + `\kubelet.exe`, Args: plan.Services["kubelet"], Dependencies: []string{runtimeDep}, Start: platform.StartByNodeboot,
		LogFile: n.Paths.LogDir + `\kubelet.log`, LogRunner: logRunner})
	if args, ok := plan.Services["kube-proxy"]; ok {
		specs = append(specs, platform.ServiceSpec{Name: "kube-proxy", DisplayName: "Kubernetes kube-proxy", Description: "Kubernetes service proxy (kubewin)",
			Executable: bin + `\kube-proxy.exe`, Args: args, Dependencies: []string{"kubelet"}, Start: platform.StartByNodeboot,
			LogFile: n.Paths.LogDir + `\kube-proxy.log`, LogRunner: logRunner})
	}
	return specs, nil
}

func (n *Node) services(ctx context.Context) error {
	specs, err := n.ServiceSpecs()
	if err != nil {
		return nodestatus.Errorf(nodestatus.CodeServiceFailed, "%w", err)
	}
	for _, s := range specs {
		if err := n.Platform.Services().Ensure(ctx, s); err != nil {
			return nodestatus.Errorf(nodestatus.CodeServiceFailed, "install service %s: %w", s.Name, err)
		}
		if err := n.Platform.Services().Start(ctx, s.Name); err != nil {
			return nodestatus.Errorf(nodestatus.CodeServiceFailed, "start service %s: %w", s.Name, err)
		}
	}
	return nil
}

func (n *Node) routes(ctx context.Context) error {
	switch n.Config.Network.Mode {
	case v1alpha1.NetworkModeHostGateway, v1alpha1.NetworkModeOverlay:
	default:
		fmt.Fprintf(n.Out, "[%s] nothing to program in network mode %s\n", PhaseRoutes, n.Config.Network.Mode)
		return nil
	}
	c, err := n.NodeClient()
	if err != nil {
		return nodestatus.Errorf(nodestatus.CodeRoutesFailed, "%w", err)
	}
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nodestatus.Errorf(nodestatus.CodeRoutesFailed, "list nodes: %w", err)
	}
	return n.ReconcilePeers(ctx, nodes.Items)
}

// ReconcilePeers programs the way to every other node's pod CIDR: host-gateway routes through
// their addresses, or the overlay's remote subnets through their VTEPs.
func (n *Node) ReconcilePeers(ctx context.Context, nodes []corev1.Node) error {
	var err error
	switch n.Config.Network.Mode {
	case v1alpha1.NetworkModeHostGateway:
		err = n.Platform.Routes().Replace(ctx, PeerRoutes(n.Name, nodes))
	case v1alpha1.NetworkModeOverlay:
		err = n.Platform.Network().ReplaceRemoteSubnets(ctx, n.Config.Network.Name, PeerRemoteSubnets(n.Name, nodes))
	}
	if err != nil {
		return nodestatus.Errorf(nodestatus.CodeRoutesFailed, "%w", err)
	}
	return nil
}

// PeerRoutes are the host-gateway routes of node self: each other node's pod CIDR via its
// InternalIP, sorted by destination.
func PeerRoutes(self string, nodes []corev1.Node) []platform.Route {
	var out []platform.Route
	for _, node := range nodes {
		if node.Name == self || node.Spec.PodCIDR == "" {
			continue
		}
		dst, err := netip.ParsePrefix(node.Spec.PodCIDR)
		if err != nil {
			continue
		}
		for _, a := range node.Status.Addresses {
			if a.Type != corev1.NodeInternalIP {
				continue
			}
			if hop, err := netip.ParseAddr(a.Address); err == nil && hop.Is4() {
				out = append(out, platform.Route{Destination: dst, NextHop: hop})
				break
			}
		}
	}
	slices.SortFunc(out, func(a, b platform.Route) int { return strings.Compare(a.Destination.String(), b.Destination.String()) })
	return out
}
