package azure

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubewin/kubewin/internal/capin"
	"github.com/kubewin/kubewin/internal/controlplane"
	"github.com/kubewin/kubewin/internal/testkit/armtest"
	"github.com/kubewin/kubewin/internal/testkit/testenv"
)

func testClusterSpec(t *testing.T, group, name string) ClusterSpec {
	t.Helper()
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	version, err := controlplane.BinaryVersion(bin)
	if err != nil {
		t.Fatal(err)
	}
	return ClusterSpec{
		Name: name, ResourceGroup: group, Location: server.Location(), KubernetesVersion: version,
		PodCIDR: "10.244.0.0/16", ServiceCIDR: "10.96.0.0/12", NodeCIDRMaskSize: 24,
		Network: ClusterNetwork{
			VNetCIDR: "10.240.0.0/16", ControlPlaneSubnetCIDR: "10.240.255.0/24", AgentSubnetCIDR: "10.240.0.0/20",
			PublicAPIServer: true, DNSPrefix: name + "-" + strings.ToLower(group),
		},
		ControlPlanes: MachineSpec{Count: 1, VMSize: "Standard_D2s_v3", Image: UbuntuLTS, Zones: []string{"1", "2", "3"}},
		Agents:        MachineSpec{Count: 1, VMSize: "Standard_D2s_v3", Image: UbuntuLTS},
		AdminUsername: "azureuser",
	}
}

// A cluster through the ARM test server: the control plane its first master's cloud-init makes,
// a Linux agent that joins it and goes Ready, an admin credential from a run command; the agents
// scale in place, control planes are added in place, and delete removes exactly what it made.
func TestAzureClusterLifecycle(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	group := "cluster-lifecycle"
	server.AddResourceGroup(group)
	before := server.ResourceIDs(group)
	cfg := base()
	cfg.ClientID, cfg.ClientSecret = server.Credentials().ClientID, server.Credentials().ClientSecret
	client, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Client: client, Spec: testClusterSpec(t, group, "acs")}
	// Authorized ranges that hold none of the cluster's addresses: its machines still reach the
	// public frontend, from the NAT gateway's address.
	c.Spec.APIServerSourcePrefixes = []string{"203.0.113.0/24"}
	t.Cleanup(func() { _ = c.Delete(context.Background()) })
	state, err := c.Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if pin, _ := capin.HashPEM(state.CACert); pin != state.CAHash || !strings.HasPrefix(state.Endpoint, "127.") || !strings.HasSuffix(state.FQDN,
		".cloudapp.azure.com") {
		t.Fatalf("state = %+v", state)
	}
	access, err := c.Access(ctx, state.Endpoint, 1)
	if err != nil {
		t.Fatal(err)
	}
	if string(access.CACert) != string(state.CACert) {
		t.Error("the run command's CA differs from the serial console's")
	}
	runOnceAnswerLost(ctx, t, c)
	kc, err := kubernetes.NewForConfig(access.REST())
	if err != nil {
		t.Fatal(err)
	}
	readyNodes := func(want int) {
		t.Helper()
		nodes, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var ready []string
		for _, n := range nodes.Items {
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue && n.Labels[corev1.LabelOSStable] == "linux" {
					ready = append(ready, n.Name)
				}
			}
		}
		if len(ready) != want {
			t.Fatalf("%d Ready Linux nodes (%v), want %d", len(ready), ready, want)
		}
	}
	readyNodes(1)
	if _, err := kc.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{}); err != nil {
		t.Errorf("kubeadm's CoreDNS addon: %v", err)
	}
	table, _ := client.OpenRouteTable(c.RouteTableID())
	routes := func(want int) {
		t.Helper()
		rt, subnets, err := table.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(rt.Routes) != want || len(subnets) != 2 || !strings.HasSuffix(subnets[0], "/subnets/agents") || !strings.HasSuffix(subnets[1],
			"/subnets/masters") {
			t.Fatalf("route table: %d routes %v on %v, want %d on the agents' and the masters' subnets", len(rt.Routes), rt.Routes, subnets, want)
		}
	}
	routes(1)
	reachFromCluster(t, c, table)

	if err := c.ScaleAgents(ctx, access, state, 2); err != nil {
		t.Fatal(err)
	}
	readyNodes(2)
	routes(2)
	if err := c.ScaleAgents(ctx, access, state, 1); err != nil {
		t.Fatal(err)
	}
	readyNodes(1)
	routes(1)

	if err := c.AddControlPlanes(ctx, access, state, []int{1, 2}); err != nil {
		t.Fatal(err)
	}
	o, err := c.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if o != (Observed{Exists: true, ControlPlanes: 3, Agents: 1}) {
		t.Errorf("observed %+v", o)
	}
	// The new control planes have the certificates and a kubeconfig: they sign admin
	// certificates too, so losing the first does not lock the cluster out.
	if _, err := c.RunScript(ctx, 2, "test -s /etc/kubernetes/pki/ca.key && test -s /etc/kubernetes/pki/sa.key && echo shared"); err != nil {
		t.Errorf("control plane 2 lacks the shared keys: %v", err)
	}
	if err := c.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if after := server.ResourceIDs(group); !slices.Equal(after, before) {
		t.Errorf("after delete the group holds %v, before %v", after, before)
	}
	if o, err := c.Observe(ctx); err != nil || o.Exists {
		t.Errorf("observed after delete: %+v, %v", o, err)
	}
}

// reachFromCluster checks the paths of the cluster's network through the ARM test server's: a
// control plane reaches a pod on an agent (the API server's webhooks and aggregated APIs), and a
// machine in the agents' subnet outside every load balancer pool (a Windows pool's) reaches the
// Internet.
func reachFromCluster(t *testing.T, c *Cluster, table *RouteTable) {
	t.Helper()
	ctx := context.Background()
	rt, _, err := table.Read(ctx)
	if err != nil || len(rt.Routes) == 0 {
		t.Fatalf("routes %v, %v", rt.Routes, err)
	}
	pod := netip.AddrPortFrom(rt.Routes[0].Destination.Addr().Next(), 443)
	if err := server.Reach(c.id(typeVirtualMachine, c.masterName(0)).String(), pod); err != nil {
		t.Errorf("the control plane cannot reach pod %s: %v", pod, err)
	}
	nics := c.Client.network.NewInterfacesClient()
	p, err := nics.BeginCreateOrUpdate(ctx, c.Spec.ResourceGroup, "windows-like", armnetwork.Interface{
		Location: to.Ptr(c.Spec.Location),
		Properties: &armnetwork.InterfacePropertiesFormat{IPConfigurations: []*armnetwork.InterfaceIPConfiguration{{
			Name: to.Ptr("ipconfig"),
			Properties: &armnetwork.InterfaceIPConfigurationPropertiesFormat{
				Subnet: &armnetwork.Subnet{ID: to.Ptr(c.AgentSubnetID())},
			},
		}}},
	}, nil)
	nic, err := wait(ctx, c.Client, p, err)
	if err != nil {
		t.Fatal(err)
	}
	if err := server.Reach(*nic.ID, armtest.PackageMirror); err != nil {
		t.Errorf("a machine in the agents' subnet has no outbound path: %v", err)
	}
	d, err := nics.BeginDelete(ctx, c.Spec.ResourceGroup, "windows-like", nil)
	if _, err := wait(ctx, c.Client, d, err); err != nil {
		t.Fatal(err)
	}
}

// runOnceAnswerLost loses the answer to a run command: azcore sends the POST again, and the
// script, which counts its runs, runs once.
func runOnceAnswerLost(ctx context.Context, t *testing.T, c *Cluster) {
	t.Helper()
	run := armtest.InGroup(c.Spec.ResourceGroup, "/virtualMachines/"+c.masterName(0)+"/runCommand$")
	lost := server.LoseResponses(armtest.Match{Method: "POST", Path: run, Times: 1})
	defer lost.Remove()
	out, err := c.RunScript(ctx, 0, "set -eu\necho run >>/var/lib/kubewin-test-runs\nsleep 1\nwc -l </var/lib/kubewin-test-runs")
	if err != nil || lost.Hits() != 1 {
		t.Fatalf("run command with its answer lost (hit %d times): %v", lost.Hits(), err)
	}
	runs, err := c.RunScript(ctx, 0, "wc -l </var/lib/kubewin-test-runs")
	if err != nil || !strings.Contains(out, "[stdout]\n1\n") || !strings.Contains(runs, "[stdout]\n1\n") {
		t.Errorf("the script ran more than once: it answered %q, and the count is %q (%v)", out, runs, err)
	}
}

// A cluster with an internal API server through the ARM test server, which refuses a backend's
// connection to its own internal load balancer's frontend: the first control plane reaches its
// API server through the endpoint's name mapped to itself, a Linux agent through the frontend.
// The test reaches the frontend through the server's stand-in for it.
func TestAzureClusterInternal(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	group := "cluster-internal"
	server.AddResourceGroup(group)
	cfg := base()
	cfg.ClientID, cfg.ClientSecret = server.Credentials().ClientID, server.Credentials().ClientSecret
	client, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	client.dial = func(ctx context.Context, network, address string) (net.Conn, error) {
		to, err := netip.ParseAddrPort(address)
		if err != nil {
			return nil, err
		}
		return (&net.Dialer{}).DialContext(ctx, network, server.HostAddress(to).String())
	}
	c := &Cluster{Client: client, Spec: testClusterSpec(t, group, "ilb")}
	c.Spec.Network.PublicAPIServer, c.Spec.Network.DNSPrefix = false, ""
	t.Cleanup(func() { _ = c.Delete(context.Background()) })
	state, err := c.Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if state.Endpoint != "10.240.255.4:6443" || state.FQDN != "" {
		t.Errorf("state = %+v, want the frontend's address", state)
	}
	access, err := c.Access(ctx, state.Endpoint, 1)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := kubernetes.NewForConfig(access.REST())
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) != 1 {
		t.Fatalf("nodes %v, %v: want the agent", nodes, err)
	}
	if err := c.Delete(ctx); err != nil {
		t.Fatal(err)
	}
}
