package join

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kubewin/kubewin/internal/api"
	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/bootstraptoken"
	"github.com/kubewin/kubewin/internal/capin"
	"github.com/kubewin/kubewin/internal/controlplane"
	"github.com/kubewin/kubewin/internal/nodeaccess"
	"github.com/kubewin/kubewin/internal/nodecmd"
	"github.com/kubewin/kubewin/internal/nodestatus"
	"github.com/kubewin/kubewin/internal/sim/simmachine"
	"github.com/kubewin/kubewin/internal/testkit/testenv"
	"github.com/kubewin/kubewin/nodeboot/internal/platform/sim"
	"github.com/kubewin/kubewin/nodeboot/internal/platform/windows"
	"github.com/kubewin/kubewin/nodeboot/internal/platform/windows/winfake"
	"github.com/kubewin/kubewin/nodeboot/internal/workflow"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &cp)) }

func admin(t testing.TB) kubernetes.Interface {
	t.Helper()
	cfg, err := cp.AdminRESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	return kubernetes.NewForConfigOrDie(cfg)
}

type nodeOpts struct {
	// name is the node's name; default: a fresh one.
	name     string
	pool     string
	token    string // default: a fresh pool token
	pins     []string
	endpoint string
	mode     v1alpha1.NetworkMode
	// runtime is the image's runtime; default: containerd.
	runtime v1alpha1.RuntimeName
	// clockSkew sets the machine's clock off by this much.
	clockSkew time.Duration
	// kubeletArgs are the NodeConfig's kubelet.extraArgs.
	kubeletArgs map[string]string
	// network is the URL of the machine's network (simmachine.Machine.Network); default: none.
	network string
}

var nodeSeq struct {
	sync.Mutex
	n int
}

// newNode prepares a simulated machine with a payload, a pool token and report object, and
// returns a Node for it.
func newNode(t testing.TB, o nodeOpts) *Node {
	t.Helper()
	ctx := context.Background()
	nodeSeq.Lock()
	nodeSeq.n++
	seq := nodeSeq.n
	nodeSeq.Unlock()
	if o.pool == "" {
		o.pool = fmt.Sprintf("pool%d", seq)
	}
	name := "win" + strings.ToLower(hex.EncodeToString([]byte{byte(seq >> 8), byte(seq)})) + "x"
	if o.name != "" {
		name = o.name
	}
	if o.token == "" {
		tok, err := bootstraptoken.Create(ctx, admin(t), o.pool, 10*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		o.token = tok
	}
	if err := nodeaccess.Prepare(ctx, admin(t), o.pool, []string{name}); err != nil {
		t.Fatal(err)
	}
	if o.pins == nil {
		ca, _ := cp.CACert()
		pin, err := capin.HashPEM(ca)
		if err != nil {
			t.Fatal(err)
		}
		o.pins = []string{pin}
	}
	if o.endpoint == "" {
		o.endpoint = cp.HostPort()
	}
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "C", "k"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The programs the node's services run: the kubelet under kube-log-runner, and nodeboot,
	// which hosts cri-dockerd.
	var files []v1alpha1.File
	for _, exe := range []string{"kubelet.exe", "kube-log-runner.exe", "nodeboot.exe"} {
		payload := []byte("simulated " + exe + " for " + name)
		if err := os.WriteFile(filepath.Join(root, "C", "k", exe), payload, 0o755); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(payload)
		files = append(files, v1alpha1.File{Path: "k/" + exe, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(payload))})
	}
	m := &v1alpha1.ImageManifest{
		APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindImageManifest,
		WindowsBuild: v1alpha1.WindowsServer2022, KubernetesVersion: cp.Version,
		Runtime:         v1alpha1.RuntimeInfo{Name: v1alpha1.RuntimeContainerd, Version: "2.1.4"},
		PauseImage:      v1alpha1.PauseImage{Reference: "registry.k8s.io/pause:3.10", Digest: "sha256:" + strings.Repeat("0", 64)},
		NodebootVersion: "test",
		Files:           files,
	}
	if o.runtime == v1alpha1.RuntimeDocker {
		m.Runtime = v1alpha1.RuntimeInfo{Name: v1alpha1.RuntimeDocker, Version: "28.3.3", CRIDockerdVersion: "0.3.18"}
	} else {
		o.runtime = v1alpha1.RuntimeContainerd
	}
	// The image's manifest is on the machine, as an image bakes it.
	raw, err := api.EncodeJSON(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(simmachine.Path(root, nodecmd.DefaultPaths().ImageManifest)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(simmachine.Path(root, nodecmd.DefaultPaths().ImageManifest), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	c := &v1alpha1.NodeConfig{
		APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindNodeConfig,
		Cluster: v1alpha1.Cluster{
			APIServerEndpoint: o.endpoint, CACertHashes: o.pins, BootstrapToken: o.token,
			KubernetesVersion: cp.Version, ClusterCIDR: "10.244.0.0/16", ServiceCIDR: "10.96.0.0/12",
		},
		Node: v1alpha1.Node{
			Name:   name,
			Labels: map[string]string{nodeaccess.PoolLabel: o.pool},
			Taints: []v1alpha1.Taint{{Key: "os", Value: "windows", Effect: "NoSchedule"}},
		},
		Network: v1alpha1.Network{Mode: o.mode},
		Runtime: v1alpha1.Runtime{Name: o.runtime},
		Kubelet: v1alpha1.Kubelet{ExtraArgs: o.kubeletArgs},
	}
	c.Default()
	if errs := c.Validate(); len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	ip := netip.AddrFrom4([4]byte{127, 1, byte(seq >> 8), byte(seq)})
	out := &syncBuffer{}
	p, err := sim.New(sim.Machine{Root: root, ComputerName: name, Build: 20348, Adapter: "Ethernet", Address: ip,
		Subnet: netip.MustParsePrefix("127.1.0.0/16"), Runtime: o.runtime, Network: o.network})
	if err != nil {
		t.Fatal(err)
	}
	p.Out = out
	if p.Dial == nil {
		// The machine dials its own connections, as a machine of its own does. client-go gives
		// clients of one process with equal configurations one transport, and with it one HTTP/2
		// connection, unless they dial for themselves (k8s.io/client-go/transport/cache.go); the
		// API server closes an unauthenticated client's HTTP/2 connection after each request
		// (feature UnauthenticatedHTTP2DOSMitigation), so nodes of one test process sharing it
		// have their concurrent discovery reads refused, retried 1, 2 and 4 s later.
		var d net.Dialer
		p.Dial = d.DialContext
	}
	t.Cleanup(p.Shutdown) // the machine's kubelet stops with the test
	n := &Node{
		Config: c, Manifest: m, Name: name, Paths: nodecmd.DefaultPaths(), Platform: p,
		Timeouts: Timeouts{Discovery: 5 * time.Second, CSR: 30 * time.Second, PodCIDR: 30 * time.Second},
		Out:      out,
	}
	if o.clockSkew != 0 {
		n.Clock = func() time.Time { return time.Now().Add(o.clockSkew) }
	}
	if err := n.Open(); err != nil {
		t.Fatal(err)
	}
	return n
}

// reopen is the same machine after nodeboot restarts: only what is on disk survives.
func reopen(t testing.TB, n *Node) *Node {
	t.Helper()
	m := &Node{Config: n.Config, Manifest: n.Manifest, Name: n.Name, Paths: n.Paths, Platform: n.Platform, Timeouts: n.Timeouts, Clock: n.Clock,
		Out: n.Out}
	if err := m.Open(); err != nil {
		t.Fatal(err)
	}
	return m
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestJoinGoesReady(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := newNode(t, nodeOpts{})
	if err := n.Join(ctx); err != nil {
		t.Fatalf("join: %v\n%s", err, n.Out)
	}

	// The provisioner reads the report before the node is Ready.
	r, err := nodestatus.Read(ctx, admin(t), n.Name)
	if err != nil || r == nil {
		t.Fatalf("report: %v %v", r, err)
	}
	if r.State != nodestatus.StateDone || len(r.Phases) != len(PhaseNames()) {
		t.Errorf("report = %+v", r)
	}

	// The services phase started the kubelet service: on this machine, the simulated kubelet,
	// which runs from the command line and files written for kubelet.exe.
	node := waitReady(t, n.Name)
	for k, v := range map[string]string{"kubernetes.io/os": "windows", "node.kubernetes.io/windows-build": "10.0.20348",
		nodeaccess.PoolLabel: n.Config.Node.Labels[nodeaccess.PoolLabel], "kubewin.io/simulated": "true"} {
		if node.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, node.Labels[k], v)
		}
	}
	if !strings.Contains(node.Annotations["kubewin.io/simulated"], "simulated Windows machine") || !strings.HasSuffix(node.Status.NodeInfo.OSImage,
		"(simulated)") {
		t.Errorf("the node does not say it is simulated: annotations %v, OS image %q", node.Annotations, node.Status.NodeInfo.OSImage)
	}
	if len(node.Spec.Taints) != 1 || node.Spec.Taints[0].Key != "os" || node.Spec.Taints[0].Effect != corev1.TaintEffectNoSchedule {
		t.Errorf("taints = %+v", node.Spec.Taints)
	}
	if node.Spec.PodCIDR == "" || node.Status.NodeInfo.KubeletVersion != cp.Version {
		t.Errorf("pod CIDR %q, kubelet version %q", node.Spec.PodCIDR, node.Status.NodeInfo.KubeletVersion)
	}
	st := windowsState(t, n)
	if hns := st.Network("cbr0"); hns == nil || hns.Ipams[0].Subnets[0].IpAddressPrefix != node.Spec.PodCIDR {
		t.Errorf("HNS network %+v, pod CIDR %s", hns, node.Spec.PodCIDR)
	}
	if svc := st.Service("kube-proxy"); svc == nil || svc.State != windows.Running {
		t.Errorf("kube-proxy service: %+v", svc)
	}
	// The node subnet, found on the adapter (the NodeConfig names none), is excluded from
	// outbound NAT, with the service and cluster CIDRs.
	if conf, err := os.ReadFile(n.Platform.Path(`C:\etc\cni\net.d\10-kubewin.conf`)); err != nil || !strings.Contains(string(conf), `"127.1.0.0/16"`) {
		t.Errorf("CNI config does not except the node subnet 127.1.0.0/16 from outbound NAT: %v\n%s", err, conf)
	}
	// The kubelet's memory reservations are sized from the machine's memory (the simulated
	// machine has 8 GiB): AKS's kube-reserved rate, 2Gi for Windows, eviction under 750Mi.
	if conf, err := os.ReadFile(n.Platform.Path(n.Paths.KubeletConfig)); err != nil || !strings.Contains(string(conf),
		"kubeReserved:\n  memory: 1843Mi") ||
		!strings.Contains(string(conf), "systemReserved:\n  memory: 2Gi") || !strings.Contains(string(conf), "memory.available: 750Mi") {
		t.Errorf("kubelet config lacks the memory reservations of an 8 GiB machine: %v\n%s", err, conf)
	}
	// The simulated kubelet says it is Ready once its first status and lease are written.
	ready := "[simulated-kubelet] node " + n.Name + " registered and Ready"
	_ = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return strings.Contains(output(t, n), ready), nil
	})
	out := output(t, n)
	if strings.Contains(out, n.Config.Cluster.BootstrapToken) || strings.Contains(out, strings.SplitN(n.Config.Cluster.BootstrapToken, ".", 2)[1]) {
		t.Error("the bootstrap token was printed")
	}
	for _, want := range []string{"[preflight]", "[discovery] done in", "[tls-bootstrap] done in", ready} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestPodsRunAndDrain(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := newNode(t, nodeOpts{})
	go func() { _ = n.Serve(ctx) }()
	waitReady(t, n.Name)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "iis-" + n.Name, Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: n.Name, Containers: []corev1.Container{{Name: "iis", Image: "mcr.microsoft.com/windows/servercore/iis"}},
			Tolerations: []corev1.Toleration{{Key: "os", Operator: corev1.TolerationOpEqual, Value: "windows", Effect: corev1.TaintEffectNoSchedule}}},
	}
	c := admin(t)
	if _, err := c.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := c.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "", nil
	}); err != nil {
		t.Fatalf("pod did not run: %v", err)
	}
	// A graceful delete (as an eviction does) completes because the node confirms it.
	if err := c.CoreV1().Pods("default").Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := c.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Fatalf("pod deletion was not confirmed: %v", err)
	}
}

// A kubelet run with --cloud-provider=external registers its Node with the uninitialized taint,
// which a cloud-controller-manager looks for; the register phase creates the Node before the
// kubelet runs, and the kubelet does not taint a Node that exists, so the phase adds it.
func TestJoinExternalCloudProviderTaint(t *testing.T) {
	ctx := context.Background()
	n := newNode(t, nodeOpts{kubeletArgs: map[string]string{"cloud-provider": "external"}})
	if err := n.Join(ctx); err != nil {
		t.Fatalf("join: %v\n%s", err, n.Out)
	}
	node := waitReady(t, n.Name)
	want := corev1.Taint{Key: nodecmd.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule}
	if !slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&want) && t.Value == want.Value }) ||
		!hasTaint(node, "os") {
		t.Errorf("taints = %+v, want the NodeConfig's and %v", node.Spec.Taints, want)
	}
	// Without it, no such taint.
	plain := newNode(t, nodeOpts{})
	if err := plain.Join(ctx); err != nil {
		t.Fatalf("join: %v\n%s", err, plain.Out)
	}
	if node := waitReady(t, plain.Name); hasTaint(node, nodecmd.TaintExternalCloudProvider) {
		t.Errorf("a node without an external cloud provider has taints %+v", node.Spec.Taints)
	}
}

// A machine whose name a Ready node already has does not take it over, as kubeadm refuses to.
func TestJoinRefusesTakenName(t *testing.T) {
	ctx := context.Background()
	first := newNode(t, nodeOpts{})
	if err := first.Join(ctx); err != nil {
		t.Fatalf("join: %v\n%s", err, first.Out)
	}
	waitReady(t, first.Name)
	second := newNode(t, nodeOpts{name: first.Name, pool: first.Config.Node.Labels[nodeaccess.PoolLabel]})
	err := second.Join(ctx)
	var pe *workflow.PhaseError
	if !errors.As(err, &pe) || pe.Phase != PhaseRegister || nodestatus.CodeOf(err) != nodestatus.CodeNodeNameTaken {
		t.Fatalf("error = %v, want phase %s code %s", err, PhaseRegister, nodestatus.CodeNodeNameTaken)
	}
	if !strings.Contains(err.Error(), "kubectl delete node "+first.Name) {
		t.Errorf("the error does not say how to fix it: %v", err)
	}
	if windowsState(t, second).Service("kubelet") != nil {
		t.Error("the second machine installed a kubelet service")
	}
}

func TestJoinFailures(t *testing.T) {
	ca, _ := cp.CACert()
	pin, _ := capin.HashPEM(ca)
	wrongPin := "sha256:" + strings.Repeat("ab", 32)
	closed := closedPort(t)
	tests := []struct {
		name  string
		opts  func(t *testing.T) nodeOpts
		phase string
		code  nodestatus.Code
	}{
		{"wrong CA pin", func(*testing.T) nodeOpts { return nodeOpts{pins: []string{wrongPin}} }, PhaseDiscovery, nodestatus.CodeCAPinMismatch},
		{"expired token", func(t *testing.T) nodeOpts { return nodeOpts{token: expiredToken(t)} }, PhaseDiscovery, nodestatus.CodeTokenNotFound},
		{"token of another cluster", func(*testing.T) nodeOpts { return nodeOpts{token: "zzzzzz.0123456789abcdef", pins: []string{pin}} },
			PhaseDiscovery, nodestatus.CodeTokenNotFound},
		{"unreachable endpoint", func(*testing.T) nodeOpts { return nodeOpts{endpoint: closed} }, PhaseDiscovery, nodestatus.CodeAPIServerUnreachable},
		{"clock skew", func(*testing.T) nodeOpts { return nodeOpts{clockSkew: 10 * time.Minute} }, PhaseDiscovery, nodestatus.CodeClockSkew},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newNode(t, tt.opts(t))
			n.Timeouts.Discovery = 2 * time.Second
			err := n.Join(context.Background())
			var pe *workflow.PhaseError
			if !errors.As(err, &pe) || pe.Phase != tt.phase || nodestatus.CodeOf(err) != tt.code {
				t.Fatalf("error = %v, want phase %s code %s", err, tt.phase, tt.code)
			}
			if rec := n.State().Phase(tt.phase); rec == nil || rec.State != nodestatus.StateFailed || rec.Code != tt.code {
				t.Errorf("state of %s = %+v", tt.phase, rec)
			}
			if _, ok := nodestatus.Lookup(tt.code); !ok {
				t.Errorf("code %s is not in the catalogue", tt.code)
			}
			// Nothing half-done: no Node, no CSR, no kubelet credential, no service.
			if _, err := admin(t).CoreV1().Nodes().Get(context.Background(), n.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("a Node exists after the failed join: %v", err)
			}
			if got := csrsFor(t, n.Name); len(got) != 0 {
				t.Errorf("CSRs exist after the failed join: %v", got)
			}
			for _, f := range []string{n.Paths.KubeletKubeconfig, n.Paths.ClusterCA} {
				if _, err := os.Stat(n.Platform.Path(f)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s exists after the failed join", f)
				}
			}
			if windowsState(t, n).Service("kubelet") != nil {
				t.Error("the kubelet service was installed")
			}
		})
	}
}

// A nodeboot stopped at any phase boundary and started again finishes with one CSR.
func TestResumeAtEveryBoundary(t *testing.T) {
	names := PhaseNames()
	for i := range names {
		t.Run("after "+names[i], func(t *testing.T) {
			n := newNode(t, nodeOpts{})
			for _, p := range names[:i+1] {
				n = reopen(t, n) // a fresh process for every phase
				if err := n.RunPhase(context.Background(), p); err != nil {
					t.Fatalf("phase %s: %v", p, err)
				}
			}
			n = reopen(t, n)
			if err := n.Join(context.Background()); err != nil {
				t.Fatalf("resumed join: %v", err)
			}
			if !n.Joined() {
				t.Fatal("not joined")
			}
			csrs := csrsFor(t, n.Name)
			if len(csrs) != 1 {
				t.Fatalf("%d CSRs for node %s, want exactly 1: %v", len(csrs), n.Name, csrs)
			}
		})
	}
	// A restart in the middle of the TLS bootstrap (key written, request submitted, nothing
	// recorded) reuses the same request.
	t.Run("during tls-bootstrap", func(t *testing.T) {
		n := newNode(t, nodeOpts{})
		if err := n.RunPhase(context.Background(), PhaseDiscovery); err != nil {
			t.Fatal(err)
		}
		if err := n.RunPhase(context.Background(), PhaseTLSBootstrap); err != nil {
			t.Fatal(err)
		}
		// Forget that the phase finished and that the certificate was written.
		n.State().Phase(PhaseTLSBootstrap).State = nodestatus.StateRunning
		_ = os.Remove(n.Platform.Path(n.currentPEM()))
		if err := n.store.Save(n.State()); err != nil {
			t.Fatal(err)
		}
		n = reopen(t, n)
		if err := n.Join(context.Background()); err != nil {
			t.Fatal(err)
		}
		if csrs := csrsFor(t, n.Name); len(csrs) != 1 {
			t.Fatalf("%d CSRs, want 1: %v", len(csrs), csrs)
		}
	})
}

func csrsFor(t testing.TB, node string) []string {
	t.Helper()
	list, err := admin(t).CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range list.Items {
		if c.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName {
			continue
		}
		if csrCN(t, c.Spec.Request) == "system:node:"+node {
			out = append(out, c.Name)
		}
	}
	return out
}

func isReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

func waitReady(t testing.TB, name string) *corev1.Node {
	t.Helper()
	var node *corev1.Node
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		node, err = admin(t).CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		return err == nil && isReady(node) && !hasTaint(node, corev1.TaintNodeNotReady), nil
	})
	if err != nil {
		t.Fatalf("node %s did not become Ready: %v", name, err)
	}
	return node
}

// expiredToken is a token of this cluster whose expiration has passed.
func expiredToken(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	tok, err := bootstraptoken.Create(ctx, admin(t), "expired", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// The bootstrap signer drops signatures of expired tokens and the token cleaner deletes them.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, false, func(ctx context.Context) (bool, error) {
		_, err := admin(t).CoreV1().Secrets(metav1.NamespaceSystem).Get(ctx, "bootstrap-token-"+bootstraptoken.ID(tok), metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Fatalf("token did not expire: %v", err)
	}
	return tok
}

// windowsState is the node's simulated Windows machine's state.
func windowsState(t testing.TB, n *Node) winfake.State {
	t.Helper()
	st, err := simWindows(t, n).State()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// simWindows is the node's simulated Windows machine: newNode's nodes run on the sim platform.
func simWindows(t testing.TB, n *Node) *winfake.Machine {
	t.Helper()
	p, ok := n.Platform.(*sim.Platform)
	if !ok {
		t.Fatalf("node %s runs on a %T, not the sim platform", n.Name, n.Platform)
	}
	return p.Windows()
}

// output is what the node wrote: newNode's nodes write to a *syncBuffer.
func output(t testing.TB, n *Node) string {
	t.Helper()
	b, ok := n.Out.(*syncBuffer)
	if !ok {
		t.Fatalf("node %s writes to a %T, not the test's buffer", n.Name, n.Out)
	}
	return b.String()
}
