package join

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/nodeboot/internal/platform/windows"
	"github.com/kubewin/kubewin/nodeboot/internal/platform/windows/hcnjson"
	"github.com/kubewin/kubewin/nodeboot/internal/platform/windows/winfake"
)

// kubeletWatch records the simulated machine's state at the moment its kubelet service starts.
type kubeletWatch struct {
	mu     sync.Mutex
	starts []winfake.State
}

func watchKubelet(t *testing.T, n *Node) *kubeletWatch {
	t.Helper()
	fake := simWindows(t, n)
	w := &kubeletWatch{}
	run := fake.OnStart
	fake.OnStart = func(name string, argv []string) error {
		if name == "kubelet" {
			st, err := fake.State()
			if err != nil {
				t.Error(err)
			}
			w.mu.Lock()
			w.starts = append(w.starts, st)
			w.mu.Unlock()
		}
		return run(name, argv)
	}
	return w
}

func (w *kubeletWatch) last(t *testing.T) winfake.State {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.starts) == 0 {
		t.Fatal("the kubelet service never started")
	}
	return w.starts[len(w.starts)-1]
}

func (w *kubeletWatch) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.starts)
}

// assertNetworkReady checks the state the kubelet started in: the pod network as specified,
// and on l2bridge the host endpoint attached with forwarding on; the routes to the metadata
// endpoints are there.
func assertNetworkReady(t *testing.T, n *Node, st winfake.State) {
	t.Helper()
	name := n.Config.Network.Name
	net := st.Network(name)
	if net == nil || net.Ipams[0].Subnets[0].IpAddressPrefix != n.state.Data.PodCIDR.String() {
		t.Fatalf("the kubelet started without HNS network %s on %s: %+v", name, n.state.Data.PodCIDR, st.Networks)
	}
	if n.Config.Network.Mode != v1alpha1.NetworkModeOverlay {
		i := slices.IndexFunc(st.Endpoints, func(ep winfake.Endpoint) bool { return ep.Name == name+"_ep" })
		if i < 0 || !st.Endpoints[i].Attached || st.Endpoints[i].HostComputeNetwork != net.Id {
			t.Errorf("the kubelet started without the host endpoint attached to %s: %+v", name, st.Endpoints)
		}
		a := slices.IndexFunc(st.Adapters, func(a winfake.Adapter) bool { return a.Name == "vEthernet ("+name+"_ep)" })
		if a < 0 || !st.Adapters[a].Forwarding {
			t.Errorf("the kubelet started before forwarding was on for the host endpoint: %+v", st.Adapters)
		}
	}
	mgmt := slices.IndexFunc(st.Adapters, func(a winfake.Adapter) bool { return a.Name == "vEthernet (Ethernet)" })
	for _, d := range []string{"169.254.169.254/32", "168.63.129.16/32"} {
		if mgmt < 0 || !slices.ContainsFunc(st.Routes, func(r winfake.Route) bool {
			return r.Destination.String() == d && r.InterfaceIndex == st.Adapters[mgmt].Index
		}) {
			t.Errorf("the kubelet started without the route to %s on the management vNIC", d)
		}
	}
}

// before reports whether the first op matching a comes before the first matching b.
func before(ops []winfake.Op, a, b func(winfake.Op) bool) bool {
	i, j := slices.IndexFunc(ops, a), slices.IndexFunc(ops, b)
	return i >= 0 && j >= 0 && i < j
}

func call(backend, name, target string) func(winfake.Op) bool {
	return func(o winfake.Op) bool {
		return o.Backend == backend && o.Call == name && (target == "" || o.Target == target) && o.Err == ""
	}
}

// changed are the ops that changed the machine, as "backend call target".
func changed(ops []winfake.Op) []string {
	var out []string
	for _, o := range ops {
		if o.Changed {
			out = append(out, o.String())
		}
	}
	return out
}

// serve runs `nodeboot run` on the machine as a fresh process until the node is up and, in
// the modes that route to peers, has programmed them; it returns what stops it.
func serve(t *testing.T, n *Node) (stop func()) {
	t.Helper()
	up := "[run] node " + n.Name + " is up"
	if n.Config.Network.Mode == v1alpha1.NetworkModeHostGateway || n.Config.Network.Mode == v1alpha1.NetworkModeOverlay {
		up = "[routes] in step with"
	}
	seen := strings.Count(output(t, n), up)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Serve(ctx) }()
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		select {
		case err := <-done:
			return false, err
		default:
		}
		return strings.Count(output(t, n), up) > seen, nil
	})
	if err != nil {
		cancel()
		t.Fatalf("nodeboot run: %v\n%s", err, n.Out)
	}
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("nodeboot run: %v", err)
		}
	}
}

// machineFiles lists the machine's files (its simulated Windows state excluded).
func machineFiles(t *testing.T, n *Node) []string {
	t.Helper()
	root := n.Platform.Path(`C:\`)
	var out []string
	err := filepath.WalkDir(filepath.Dir(root), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && !strings.Contains(path, string(filepath.Separator)+"sim"+string(filepath.Separator)) {
			out = append(out, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// comparableState is the state with the HNS object counter left out.
func comparableState(t *testing.T, st winfake.State) string {
	t.Helper()
	st.NextID = 0
	st.Events = nil // history, which a reset does not undo
	b, err := json.MarshalIndent(st, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// podsRun leaves on the machine what the kubelet, the CNI plugin and kube-proxy leave while pods
// run: a pod's container in the runtime, its HNS endpoint on the pod network, kube-proxy's load
// balancer, host-local's address lease and libcni's cache under C:\var\lib\cni, and the pod's
// directory under the kubelet's root. It returns the endpoint's name.
func podsRun(t *testing.T, n *Node, pod string) string {
	t.Helper()
	fake := simWindows(t, n)
	st := windowsState(t, n)
	nw := st.Network(n.Config.Network.Name)
	if nw == nil {
		t.Fatalf("no network %s", n.Config.Network.Name)
	}
	ip := n.state.Data.PodCIDR.Addr().Next().Next().Next().Next().Next()
	sum := sha256.Sum256([]byte(pod))
	id := hex.EncodeToString(sum[:])
	ep := id[:12] + "_" + n.Config.Network.Name
	if err := fake.Edit(func(st *winfake.State) {
		st.NextID++
		epID := fmt.Sprintf("1000%04d-0000-4000-8000-000000000000", st.NextID)
		st.Endpoints = append(st.Endpoints, winfake.Endpoint{HostComputeEndpoint: hcnjson.HostComputeEndpoint{Id: epID, Name: ep,
			HostComputeNetwork: nw.Id, IpConfigurations: []hcnjson.IpConfig{{IpAddress: ip.String(), PrefixLength: 24}}}})
		st.LoadBalancers = append(st.LoadBalancers, hcnjson.HostComputeLoadBalancer{Id: fmt.Sprintf("2000%04d-0000-4000-8000-000000000000", st.NextID),
			HostComputeEndpoints: []string{epID}, FrontendVIPs: []string{"10.96.0.10"}})
		st.Containers = append(st.Containers, id)
	}); err != nil {
		t.Fatal(err)
	}
	for f, data := range map[string]string{
		`C:\var\lib\cni\networks\` + n.Config.Network.Name + `\` + ip.String():     id,
		`C:\var\lib\cni\networks\` + n.Config.Network.Name + `\last_reserved_ip.0`: ip.String(),
		`C:\var\lib\cni\results\` + n.Config.Network.Name + "-" + id + "-eth0":     "{}",
		`C:\var\lib\kubelet\pods\` + pod + `\etc-hosts`:                            "127.0.0.1 localhost\n",
	} {
		path := n.Platform.Path(f)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return ep
}

// The Windows requests of a whole node life, on l2bridge, host-gateway and overlay: the join,
// a reboot and `nodeboot run`, a second `run`, and a reset. On every boot the HNS network (and
// on l2bridge its host endpoint) exists before the kubelet starts, which only nodeboot starts;
// a second run changes nothing; a reset leaves the machine as its image did.
func TestWindowsRequestSequences(t *testing.T) {
	for _, mode := range []v1alpha1.NetworkMode{v1alpha1.NetworkModeL2Bridge, v1alpha1.NetworkModeHostGateway, v1alpha1.NetworkModeOverlay} {
		t.Run(string(mode), func(t *testing.T) {
			ctx := context.Background()
			n := newNode(t, nodeOpts{mode: mode})
			fake := simWindows(t, n)
			// The image has nodeboot (newNode's payload) and its service, registered by the bake,
			// stopped until the first boot.
			if err := fake.Edit(func(st *winfake.State) {
				st.Services[nodebootService] = &winfake.Service{State: windows.Stopped, Config: windows.ServiceConfig{
					BinaryPathName: `C:\k\nodeboot.exe run`, StartType: windows.StartAutomatic, Dependencies: []string{string(n.Config.Runtime.Name)}}}
			}); err != nil {
				t.Fatal(err)
			}
			baseState, baseFiles := comparableState(t, windowsState(t, n)), machineFiles(t, n)
			kubelet := watchKubelet(t, n)
			network := n.Config.Network.Name
			podNetwork := func(o winfake.Op) bool {
				return o.Backend == "hns" && o.Call == "CreateNetwork" && o.Target == network && o.Err == ""
			}

			// First boot: the join.
			if err := n.Join(ctx); err != nil {
				t.Fatalf("join: %v\n%s", err, n.Out)
			}
			ops := fake.Log()
			assertNetworkReady(t, n, kubelet.last(t))
			for _, order := range []struct {
				what string
				a, b func(winfake.Op) bool
			}{
				{"the External network before the pod network", call("hns", "CreateNetwork", "External"), podNetwork},
				{"the pod network before the kubelet service is created", podNetwork, call("scm", "Create", "kubelet")},
				{"the routes to the metadata endpoints before the kubelet starts", call("shell", "metadata-routes.ensure", ""), call("scm", "Start", "kubelet")},
				{"the kubelet before kube-proxy", call("scm", "Start", "kubelet"), call("scm", "Start", "kube-proxy")},
			} {
				if !before(ops, order.a, order.b) {
					t.Errorf("join: not %s:\n%s", order.what, strings.Join(changed(ops), "\n"))
				}
			}
			if mode != v1alpha1.NetworkModeOverlay && !before(ops, call("hns", "AttachHost", ""), call("scm", "Start", "kubelet")) {
				t.Errorf("join: the kubelet started before the host endpoint was attached")
			}
			st := windowsState(t, n)
			for _, svc := range []string{"kubelet", "kube-proxy"} {
				if s := st.Service(svc); s == nil || s.Config.StartType != windows.StartManual || s.State != windows.Running {
					t.Errorf("%s service: %+v (nodeboot starts it; the service manager never does)", svc, s)
				}
			}
			// Secrets are created with their owner-only security descriptor.
			// The kubelet's client credential is a link to the pair's file, as the kubelet's
			// certificate store keeps it.
			pair, err := os.Readlink(n.Platform.Path(n.currentPEM()))
			if err != nil {
				t.Errorf("%s: %v", n.currentPEM(), err)
			}
			for _, f := range []string{n.Paths.KubeletCertDir + `\` + pair, n.Paths.KubeletKubeconfig, n.statePath()} {
				if sddl, err := simWindows(t, n).ACL(f); sddl != windows.OwnerOnly {
					t.Errorf("%s was written with security descriptor %q (%v)", f, sddl, err)
				}
			}
			if mode == v1alpha1.NetworkModeOverlay {
				node, err := admin(t).CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
				if err != nil || node.Annotations[AnnotationBackendType] != "vxlan" || node.Annotations[AnnotationPublicIP] != n.state.Data.NodeIP.String() {
					t.Errorf("the node did not publish its VTEP: %v %v", node.Annotations, err)
				}
			}

			// Pods ran; then a reboot: the service manager starts only what starts at boot; the
			// kubelet waits for nodeboot, which makes the network exist first, without the
			// endpoints of the pods that are gone and kube-proxy's load balancers.
			stale := podsRun(t, n, "pod-before-reboot")
			if err := fake.Reboot(); err != nil {
				t.Fatal(err)
			}
			if s := windowsState(t, n).Service("kubelet"); s.State != windows.Stopped {
				t.Fatalf("the kubelet runs right after the reboot, before nodeboot prepared the network: %+v", s)
			}
			starts := kubelet.count()
			mark := fake.Mark()
			stop := serve(t, reopen(t, n))
			if kubelet.count() != starts+1 {
				t.Fatalf("nodeboot run started the kubelet %d times", kubelet.count()-starts)
			}
			assertNetworkReady(t, n, kubelet.last(t))
			st = kubelet.last(t)
			if slices.ContainsFunc(st.Endpoints, func(ep winfake.Endpoint) bool { return ep.Name == stale }) || len(st.LoadBalancers) > 0 {
				t.Errorf("reboot: the kubelet started with the last boot's pod endpoint %s or load balancers: %+v %+v", stale, st.Endpoints, st.LoadBalancers)
			}
			boot := fake.Log()[mark:]
			if mode == v1alpha1.NetworkModeOverlay {
				// A non-persistent network is gone after a reboot: it is made again first.
				if !before(boot, podNetwork, call("scm", "Start", "kubelet")) {
					t.Errorf("reboot: the kubelet started before the overlay network was made again:\n%s", strings.Join(changed(boot), "\n"))
				}
			} else if !before(boot, call("hns", "AttachHost", ""), call("scm", "Start", "kubelet")) {
				t.Errorf("reboot: the kubelet started before the host endpoint was made again:\n%s", strings.Join(changed(boot), "\n"))
			}
			stop()

			// nodeboot restarted without a reboot, beside the running pods: nothing to change.
			podsRun(t, n, "pod-after-reboot")
			mark = fake.Mark()
			stop = serve(t, reopen(t, n))
			stop()
			// health.json is the run's own report of what it found, written when it publishes the
			// node's conditions (a new run's first publication, if stop comes after it): it
			// configures nothing.
			report := func(op string) bool { return strings.HasSuffix(op, `\health.json (changed)`) }
			if c := slices.DeleteFunc(changed(fake.Log()[mark:]), report); len(c) > 0 {
				t.Errorf("a second run changed the machine:\n%s", strings.Join(c, "\n"))
			}

			// Reset, with the pods running and nodeboot's service up: back to the machine the image left.
			if err := reopen(t, n).Reset(ctx); err != nil {
				t.Fatalf("reset: %v", err)
			}
			if got := comparableState(t, windowsState(t, n)); got != baseState {
				t.Errorf("reset left the machine changed:\n%s\nwant\n%s", got, baseState)
			}
			if got := machineFiles(t, n); !slices.Equal(got, baseFiles) {
				t.Errorf("reset left files:\n%s\nthe image had\n%s", strings.Join(got, "\n"), strings.Join(baseFiles, "\n"))
			}
			mark = fake.Mark()
			if err := reopen(t, n).Reset(ctx); err != nil {
				t.Fatalf("second reset: %v", err)
			}
			if c := changed(fake.Log()[mark:]); len(c) > 0 {
				t.Errorf("a second reset changed %v", c)
			}
		})
	}
}

// On a Docker image, cri-dockerd (which has no Windows service mode) runs hosted by nodeboot's
// service-host, started by nodeboot before the kubelet that depends on it.
func TestDockerServices(t *testing.T) {
	n := newNode(t, nodeOpts{runtime: v1alpha1.RuntimeDocker})
	if err := n.Join(context.Background()); err != nil {
		t.Fatalf("join: %v\n%s", err, n.Out)
	}
	st := windowsState(t, n)
	cri := st.Service("cri-dockerd")
	if cri == nil || cri.State != windows.Running || cri.Config.StartType != windows.StartManual ||
		!strings.HasPrefix(cri.Config.BinaryPathName, `C:\k\nodeboot.exe service-host --log-file=C:\var\log\kubernetes\cri-dockerd.log -- `+
			`C:\k\cri-dockerd\cri-dockerd.exe --container-runtime-endpoint=npipe:////./pipe/cri-dockerd`) ||
		!slices.Equal(cri.Config.Dependencies, []string{"docker"}) {
		t.Errorf("cri-dockerd service: %+v", cri)
	}
	if k := st.Service("kubelet"); k == nil || !slices.Equal(k.Config.Dependencies, []string{"cri-dockerd"}) {
		t.Errorf("kubelet service: %+v", k)
	}
	if !before(simWindows(t, n).Log(), call("scm", "Start", "cri-dockerd"), call("scm", "Start", "kubelet")) {
		t.Error("the kubelet started before cri-dockerd")
	}
}
