package windows_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/testkit/golden"
	"github.com/kubewin/kubewin/nodeboot/internal/platform"
	"github.com/kubewin/kubewin/nodeboot/internal/platform/windows"
	"github.com/kubewin/kubewin/nodeboot/internal/platform/windows/hcnjson"
	"github.com/kubewin/kubewin/nodeboot/internal/platform/windows/winfake"
)

var podCIDR = netip.MustParsePrefix("10.244.3.0/24")

// machine is a fresh simulated machine (Windows Server 2022, containerd) and the platform on it.
func machine(t *testing.T) (*windows.Platform, *winfake.Machine) {
	t.Helper()
	m, err := winfake.New(winfake.Config{
		Root: t.TempDir(), ComputerName: "win-a", Build: 20348, Adapter: "Ethernet",
		Address: netip.MustParseAddr("10.240.0.4"), Subnet: netip.MustParsePrefix("10.240.0.0/16"), Runtime: v1alpha1.RuntimeContainerd,
	})
	if err != nil {
		t.Fatal(err)
	}
	shipPayload(t, m)
	p := windows.New(m.Backends())
	p.Poll, p.MetadataRecheck = time.Millisecond, 0
	return p, m
}

// payloadPrograms are the programs of a kubewin image the node services run.
var payloadPrograms = []string{`C:\k\kubelet.exe`, `C:\k\kube-proxy.exe`, `C:\k\kube-log-runner.exe`, `C:\k\nodeboot.exe`}

// shipPayload puts the payload's programs on the machine, as an image holds them.
func shipPayload(t *testing.T, m *winfake.Machine) {
	t.Helper()
	for _, win := range payloadPrograms {
		path := m.Backends().Files.Path(win)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("simulated "+win), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func spec(t *testing.T, mode v1alpha1.NetworkMode) platform.NetworkSpec {
	t.Helper()
	c := &v1alpha1.NodeConfig{Network: v1alpha1.Network{Mode: mode}}
	c.Default()
	s, ok, err := platform.NetworkSpecFor(c, podCIDR)
	if err != nil || !ok {
		t.Fatalf("network spec for %s: %v %v", mode, ok, err)
	}
	return s
}

func state(t *testing.T, m *winfake.Machine) winfake.State {
	t.Helper()
	st, err := m.State()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// changes are the calls of ops that changed the machine.
func changes(ops []winfake.Op) []string {
	var out []string
	for _, o := range ops {
		if o.Changed {
			out = append(out, o.Backend+" "+o.Call+" "+o.Target)
		}
	}
	return out
}

// bodies are the request bodies of the recorded calls of one kind, in order.
func bodies(ops []winfake.Op, backend, call string) []string {
	var out []string
	for _, o := range ops {
		if o.Backend == backend && o.Call == call {
			out = append(out, o.Body)
		}
	}
	return out
}

// goldenHNS compares a recorded HNS request with testdata/hns/<name>, which names the upstream
// code the request follows.
func goldenHNS(t *testing.T, name string, sources []string, body string) {
	t.Helper()
	doc := struct {
		Source  []string        `json:"source"`
		Request json.RawMessage `json:"request"`
	}{sources, json.RawMessage(body)}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		t.Fatalf("%s: %v in %s", name, err, body)
	}
	golden.Assert(t, "hns/"+name, b.Bytes())
}

// The HNS requests of each mode, as hcn marshals them, against golden files that cite the
// upstream code each follows.
func TestHNSRequestsGolden(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		mode    v1alpha1.NetworkMode
		network string
		sources []string
	}{
		{v1alpha1.NetworkModeL2Bridge, "l2bridge-network.json", []string{
			"flannel-io/flannel pkg/backend/hostgw/hostgw_windows.go: L2Bridge, subnet = the node's pod CIDR, gateway = its first address",
			"kubernetes/kubernetes cluster/gce/windows/k8s-node-setup.psm1 Configure-HostNetworkingService: New-HNSNetwork -Type L2Bridge " +
				"-AddressPrefix $POD_CIDR -Gateway (Get_Gateway_From_CIDR)",
			"flannel-io/flannel pkg/backend/vxlan/device_windows.go: hcn schema 2.0, Static IPAM, default route through the gateway, NetAdapterName policy",
		}},
		{v1alpha1.NetworkModeOverlay, "overlay-network.json", []string{
			"flannel-io/flannel pkg/backend/vxlan/device_windows.go newVXLANDevice: Overlay, Static IPAM, route 0.0.0.0/0 via subnet+1, VSID subnet " +
				"policy = VNI, Flags EnableNonPersistent, SchemaVersion 2.0, NetAdapterName policy",
		}},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			p, m := machine(t)
			if _, err := p.Network().Ensure(ctx, spec(t, tc.mode)); err != nil {
				t.Fatal(err)
			}
			creates := bodies(m.Log(), "hns", "CreateNetwork")
			if len(creates) != 2 {
				t.Fatalf("%d networks created, want the bootstrap network and the pod network", len(creates))
			}
			ext := "external-" + string(tc.mode) + ".json"
			goldenHNS(t, ext, []string{
				"microsoft/SDN Kubernetes/windows/helper.psm1 CreateExternalNetwork: an \"External\" network of the pod network's type on 192.168.255.0/30 " +
					"with gateway .1 (overlay: VSID 9999), on the adapter",
				"kubernetes/kubernetes cluster/gce/windows/k8s-node-setup.psm1 Add_InitialHnsNetwork: the placeholder network that brings up the vSwitch once",
			}, creates[0])
			goldenHNS(t, tc.network, tc.sources, creates[1])
		})
	}
	t.Run("host endpoint", func(t *testing.T) {
		p, m := machine(t)
		if _, err := p.Network().Ensure(ctx, spec(t, v1alpha1.NetworkModeL2Bridge)); err != nil {
			t.Fatal(err)
		}
		eps := bodies(m.Log(), "hns", "CreateEndpoint")
		if len(eps) != 1 {
			t.Fatalf("%d endpoints created", len(eps))
		}
		// The network ID is HNS's: keep the golden file stable.
		goldenHNS(t, "host-endpoint.json", []string{
			"kubernetes/kubernetes cluster/gce/windows/k8s-node-setup.psm1 Configure-HostNetworkingService: New-HnsEndpoint -IPAddress " +
				"(Get_Endpoint_Gateway_From_CIDR: the pod CIDR's second address) -Gateway \"0.0.0.0\", then Attach-HnsHostEndpoint -CompartmentID 1",
			"microsoft/windows-container-networking test/utilities CreateGatewayEp: hcn.HostComputeEndpoint with IpConfigurations (no prefix length) " +
				"and route 0.0.0.0/0 via 0.0.0.0, then hcsshim HostAttach(1)",
			"flannel-io/flannel pkg/backend/hostgw/hostgw_windows.go: the bridge endpoint is named <network>_ep",
		}, strings.Replace(eps[0], state(t, m).Network("cbr0").Id, "<network ID>", 1))
	})
	t.Run("overlay policies", func(t *testing.T) {
		p, m := machine(t)
		s := spec(t, v1alpha1.NetworkModeOverlay)
		if _, err := p.Network().Ensure(ctx, s); err != nil {
			t.Fatal(err)
		}
		peer := platform.RemoteSubnet{Destination: netip.MustParsePrefix("10.244.7.0/24"), ProviderAddress: netip.MustParseAddr("10.240.0.9"),
			VTEPMAC: "0e:2a:0a:f4:07:00", VNI: 4096}
		if _, err := p.Network().ReplaceRemoteSubnets(ctx, s.Name, []platform.RemoteSubnet{peer}); err != nil {
			t.Fatal(err)
		}
		adds := bodies(m.Log(), "hns", "AddNetworkPolicy")
		if len(adds) != 2 {
			t.Fatalf("policies added: %q", adds)
		}
		goldenHNS(t, "host-route.json", []string{
			"flannel-io/flannel pkg/backend/vxlan/device_windows.go ensureNetwork: PolicyNetworkRequest with a HostRoute network policy, settings {} " +
				"(host to local pod traffic; Windows build 18321 or newer)",
		}, adds[0])
		goldenHNS(t, "remote-subnet-route.json", []string{
			"flannel-io/flannel pkg/backend/vxlan/vxlan_network_windows.go handleSubnetEvents: PolicyNetworkRequest with a RemoteSubnetRoute network " +
				"policy: DestinationPrefix = the peer's pod CIDR, IsolationId = its VNI, ProviderAddress = its public IP, DistributedRouterMacAddress = " +
				"its VtepMAC as net.HardwareAddr prints it",
		}, adds[1])
	})
}

// A second Ensure on a machine where everything is in place changes nothing, in every mode.
func TestEnsureIsIdempotent(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []v1alpha1.NetworkMode{v1alpha1.NetworkModeL2Bridge, v1alpha1.NetworkModeHostGateway, v1alpha1.NetworkModeOverlay} {
		t.Run(string(mode), func(t *testing.T) {
			p, m := machine(t)
			first, err := p.Network().Ensure(ctx, spec(t, mode))
			if err != nil {
				t.Fatal(err)
			}
			mark := m.Mark()
			second, err := p.Network().Ensure(ctx, spec(t, mode))
			if err != nil {
				t.Fatal(err)
			}
			if c := changes(m.Log()[mark:]); len(c) > 0 {
				t.Errorf("the second Ensure changed the machine: %v", c)
			}
			if first != second {
				t.Errorf("network info %+v, then %+v", first, second)
			}
		})
	}
}

func TestEnsureL2Bridge(t *testing.T) {
	ctx := context.Background()
	p, m := machine(t)
	s := spec(t, v1alpha1.NetworkModeL2Bridge)
	if _, err := p.Network().Ensure(ctx, s); err != nil {
		t.Fatal(err)
	}
	st := state(t, m)
	// The host endpoint is the pods' gateway, attached to the host, forwarding; the node's
	// address moved to the management vNIC, which also forwards.
	ep := st.Endpoints[0]
	if !ep.Attached || ep.Name != "cbr0_ep" || ep.IpConfigurations[0].IpAddress != "10.244.3.2" || ep.HostComputeNetwork != st.Network("cbr0").Id {
		t.Errorf("host endpoint %+v", ep)
	}
	for _, name := range []string{"vEthernet (cbr0_ep)", "vEthernet (Ethernet)"} {
		if i := slices.IndexFunc(st.Adapters, func(a winfake.Adapter) bool { return a.Name == name }); i < 0 || !st.Adapters[i].Forwarding {
			t.Errorf("%s does not forward: %+v", name, st.Adapters)
		}
	}
	if addr, _, err := p.Address("Ethernet"); err != nil || addr.String() != "10.240.0.4" {
		t.Errorf("node address %v %v", addr, err)
	}
	// HNS dropped the routes to the metadata endpoints with the vSwitch; they are back, on the
	// management vNIC.
	mgmt := st.Adapters[slices.IndexFunc(st.Adapters, func(a winfake.Adapter) bool { return a.Name == "vEthernet (Ethernet)" })]
	for _, d := range []string{"169.254.169.254/32", "168.63.129.16/32"} {
		if !slices.ContainsFunc(st.Routes, func(r winfake.Route) bool { return r.Destination.String() == d && r.InterfaceIndex == mgmt.Index }) {
			t.Errorf("no route to %s on %s: %+v", d, mgmt.Name, st.Routes)
		}
	}
}

// A network or host endpoint left over that does not match is replaced: another subnet, another
// adapter, an endpoint on another network or with another address.
func TestEnsureReplacesStale(t *testing.T) {
	ctx := context.Background()
	s := spec(t, v1alpha1.NetworkModeL2Bridge)
	for name, edit := range map[string]func(*winfake.State){
		"subnet": func(st *winfake.State) { st.Network("cbr0").Ipams[0].Subnets[0].IpAddressPrefix = "10.244.9.0/24" },
		"adapter": func(st *winfake.State) {
			n := st.Network("cbr0")
			n.Policies[0].Settings = json.RawMessage(`{"NetworkAdapterName":"Ethernet 2"}`)
		},
		"endpoint address": func(st *winfake.State) { st.Endpoints[0].IpConfigurations[0].IpAddress = "10.244.3.9" },
		"endpoint network": func(st *winfake.State) { st.Endpoints[0].HostComputeNetwork = "another network" },
	} {
		t.Run(name, func(t *testing.T) {
			p, m := machine(t)
			if _, err := p.Network().Ensure(ctx, s); err != nil {
				t.Fatal(err)
			}
			if err := m.Edit(edit); err != nil {
				t.Fatal(err)
			}
			mark := m.Mark()
			if _, err := p.Network().Ensure(ctx, s); err != nil {
				t.Fatal(err)
			}
			if c := changes(m.Log()[mark:]); !slices.Contains(c, "hns CreateEndpoint cbr0_ep") {
				t.Errorf("the stale %s was kept: %v", name, c)
			}
			st := state(t, m)
			if len(st.Endpoints) != 1 || st.Endpoints[0].IpConfigurations[0].IpAddress != "10.244.3.2" ||
				st.Endpoints[0].HostComputeNetwork != st.Network("cbr0").Id || !st.Endpoints[0].Attached {
				t.Errorf("endpoints %+v", st.Endpoints)
			}
		})
	}
}

// An overlay network left with another VNI, or persistent (as an older nodeboot made it), is
// replaced.
func TestEnsureReplacesStaleOverlay(t *testing.T) {
	ctx := context.Background()
	s := spec(t, v1alpha1.NetworkModeOverlay)
	for name, edit := range map[string]func(*winfake.State){
		"vni": func(st *winfake.State) {
			st.Network(s.Name).Ipams[0].Subnets[0].Policies[0] = json.RawMessage(`{"Type":"VSID","Settings":{"IsolationId":5000}}`)
		},
		"persistent": func(st *winfake.State) { st.Network(s.Name).Flags = 0 },
	} {
		t.Run(name, func(t *testing.T) {
			p, m := machine(t)
			if _, err := p.Network().Ensure(ctx, s); err != nil {
				t.Fatal(err)
			}
			if err := m.Edit(edit); err != nil {
				t.Fatal(err)
			}
			mark := m.Mark()
			if _, err := p.Network().Ensure(ctx, s); err != nil {
				t.Fatal(err)
			}
			if c := changes(m.Log()[mark:]); !slices.Contains(c, "hns CreateNetwork "+s.Name) {
				t.Errorf("the stale network (%s) was kept: %v", name, c)
			}
		})
	}
}

func TestRemoteSubnets(t *testing.T) {
	ctx := context.Background()
	p, m := machine(t)
	s := spec(t, v1alpha1.NetworkModeOverlay)
	info, err := p.Network().Ensure(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if info.VTEPMAC == "" || strings.ToLower(info.VTEPMAC) != info.VTEPMAC || !strings.Contains(info.VTEPMAC, ":") {
		t.Errorf("VTEP MAC %q is not in net.HardwareAddr's form", info.VTEPMAC)
	}
	peer := func(i byte) platform.RemoteSubnet {
		return platform.RemoteSubnet{Destination: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, i, 0}), 24),
			ProviderAddress: netip.AddrFrom4([4]byte{10, 240, 0, i}), VTEPMAC: "00:15:5d:00:00:0" + string('0'+i), VNI: 4096}
	}
	routes := func() []string {
		var out []string
		for _, pol := range state(t, m).Network(s.Name).Policies {
			if pol.Type == hcnjson.RemoteSubnetRoute {
				var rs hcnjson.RemoteSubnetRoutePolicySetting
				_ = json.Unmarshal(pol.Settings, &rs)
				out = append(out, rs.DestinationPrefix+" via "+rs.ProviderAddress+" "+rs.DistributedRouterMacAddress)
			}
		}
		slices.Sort(out)
		return out
	}
	if _, err := p.Network().ReplaceRemoteSubnets(ctx, s.Name, []platform.RemoteSubnet{peer(5), peer(6)}); err != nil {
		t.Fatal(err)
	}
	want := []string{"10.244.5.0/24 via 10.240.0.5 00-15-5D-00-00-05", "10.244.6.0/24 via 10.240.0.6 00-15-5D-00-00-06"}
	if got := routes(); !slices.Equal(got, want) {
		t.Errorf("two peers: %v", got)
	}
	// Peer 5 leaves; peer 6 gets a new VTEP (its network was re-created).
	moved := peer(6)
	moved.VTEPMAC = "00:15:5d:00:00:99"
	if _, err := p.Network().ReplaceRemoteSubnets(ctx, s.Name, []platform.RemoteSubnet{moved}); err != nil {
		t.Fatal(err)
	}
	if got := routes(); !slices.Equal(got, []string{"10.244.6.0/24 via 10.240.0.6 00-15-5D-00-00-99"}) {
		t.Errorf("after peer 5 left and peer 6 moved: %v", got)
	}
	// HNS reports the MAC in its own form ("00-15-5D-00-00-99"): the same peers change nothing.
	mark := m.Mark()
	if _, err := p.Network().ReplaceRemoteSubnets(ctx, s.Name, []platform.RemoteSubnet{moved}); err != nil {
		t.Fatal(err)
	}
	if c := changes(m.Log()[mark:]); len(c) > 0 {
		t.Errorf("reprogramming the same peers changed %v", c)
	}
}

// Routes go to the active store only, through the default route's interface; kubewin routes in
// either store that are not wanted are removed, the persistent ones an older nodeboot wrote
// included; nothing changes when the table is right.
func TestRoutesReplace(t *testing.T) {
	ctx := context.Background()
	p, m := machine(t)
	r := func(dst, hop string) platform.Route {
		return platform.Route{Destination: netip.MustParsePrefix(dst), NextHop: netip.MustParseAddr(hop)}
	}
	// An older nodeboot left a persistent route to a peer that is still there, and one to a
	// peer that left.
	if err := m.Edit(func(st *winfake.State) {
		for _, old := range []platform.Route{r("10.244.1.0/24", "10.240.0.5"), r("10.244.2.0/24", "10.240.0.6")} {
			st.Routes = append(st.Routes, winfake.Route{Destination: old.Destination, NextHop: old.NextHop, InterfaceIndex: 4, Metric: windows.RouteMetric,
				Store: windows.PersistentStore})
		}
	}); err != nil {
		t.Fatal(err)
	}
	want := []platform.Route{r("10.244.1.0/24", "10.240.0.5"), r("10.244.7.0/24", "10.240.0.7")}
	if _, err := p.Routes().Replace(ctx, want); err != nil {
		t.Fatal(err)
	}
	got := state(t, m).KubewinRoutes()
	if len(got) != 2 {
		t.Fatalf("routes %+v", got)
	}
	for _, rt := range got {
		if rt.Store != windows.ActiveStore || rt.InterfaceIndex != 4 || !slices.Contains(want, platform.Route{Destination: rt.Destination,
			NextHop: rt.NextHop}) {
			t.Errorf("route %+v", rt)
		}
	}
	mark := m.Mark()
	if _, err := p.Routes().Replace(ctx, want); err != nil {
		t.Fatal(err)
	}
	if ops := m.Log()[mark:]; len(ops) != 1 || ops[0].Call != "routes.list" {
		t.Errorf("a table that is right took %v", ops)
	}
	if _, err := p.Routes().Replace(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if got := state(t, m).KubewinRoutes(); len(got) != 0 {
		t.Errorf("routes left: %+v", got)
	}
}

func TestServices(t *testing.T) {
	ctx := context.Background()
	p, m := machine(t)
	kubelet := platform.ServiceSpec{
		Name: "kubelet", DisplayName: "Kubernetes kubelet", Executable: `C:\k\kubelet.exe`, Args: []string{"--windows-service",
			`--config=C:\var\lib\kubelet\config.yaml`},
		Dependencies: []string{"containerd"}, Start: platform.StartByNodeboot, LogFile: `C:\var\log\kubernetes\kubelet.log`,
		LogRunner: `C:\k\kube-log-runner.exe`,
	}
	if err := p.Services().Ensure(ctx, kubelet); err != nil {
		t.Fatal(err)
	}
	svc := state(t, m).Service("kubelet")
	// kube-log-runner writes the kubelet's output to its log, rotating it; the kubelet talks to
	// the SCM itself (--windows-service); the SCM never starts it on its own; it restarts 10 s
	// after every failure.
	wantCmd := `C:\k\kube-log-runner.exe -log-file=C:\var\log\kubernetes\kubelet.log -log-file-size=100M -log-file-age=168h -flush-interval=5s ` +
		`C:\k\kubelet.exe --windows-service --config=C:\var\lib\kubelet\config.yaml`
	if svc.Config.BinaryPathName != wantCmd || svc.Config.StartType != windows.StartManual || svc.State != windows.Stopped ||
		len(svc.Recovery.Actions) != 1 || !svc.Recovery.Actions[0].Restart || svc.Recovery.Actions[0].Delay != 10*time.Second {
		t.Errorf("kubelet service %+v %+v\nwant %s", svc.Config, svc.Recovery, wantCmd)
	}
	mark := m.Mark()
	if err := p.Services().Ensure(ctx, kubelet); err != nil {
		t.Fatal(err)
	}
	if c := changes(m.Log()[mark:]); len(c) > 0 {
		t.Errorf("ensuring the same service changed %v", c)
	}
	kubelet.Args = append(kubelet.Args, "--v=4")
	if err := p.Services().Ensure(ctx, kubelet); err != nil {
		t.Fatal(err)
	}
	if got := state(t, m).Service("kubelet").Config.BinaryPathName; !strings.HasSuffix(got, " --v=4") {
		t.Errorf("updated command line %s", got)
	}
	for _, step := range []func() error{
		func() error { return p.Services().Start(ctx, "kubelet") },
		func() error { return p.Services().Start(ctx, "kubelet") },
		func() error { return p.Services().Stop(ctx, "kubelet") },
		func() error { return p.Services().Delete(ctx, "kubelet") },
		func() error { return p.Services().Delete(ctx, "kubelet") },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	if got := changes(m.Log()[mark:]); !slices.Equal(got[len(got)-3:], []string{"scm Start kubelet", "scm Stop kubelet", "scm Delete kubelet"}) {
		t.Errorf("start, start, stop, delete, delete changed %v", got)
	}
}

// A service whose configuration is already right but whose recovery is not — one an older
// nodeboot created without the failure actions flag, or one an administrator changed — gets
// its recovery back: without the flag an error stop is never restarted ([MS-SCMR] 2.2.41).
func TestServiceRecoveryRestored(t *testing.T) {
	ctx := context.Background()
	p, m := machine(t)
	kubelet := platform.ServiceSpec{Name: "kubelet", Executable: `C:\k\kubelet.exe`, Dependencies: []string{"containerd"},
		Start: platform.StartByNodeboot}
	if err := p.Services().Ensure(ctx, kubelet); err != nil {
		t.Fatal(err)
	}
	older := windows.Recovery{Actions: []windows.RecoveryAction{{Restart: true, Delay: 10 * time.Second}}}
	if err := m.Backends().SCM.SetRecovery("kubelet", older); err != nil {
		t.Fatal(err)
	}
	if err := p.Services().Ensure(ctx, kubelet); err != nil {
		t.Fatal(err)
	}
	if r := state(t, m).Service("kubelet").Recovery; r == nil || !r.OnNonCrashFailures {
		t.Errorf("recovery after ensuring the service again: %+v, want the non-crash failures flag set", r)
	}
}

// A service whose program is not on the machine is created (CreateService takes any command
// line) but does not start, as StartService fails with "The system cannot find the file
// specified": a kubelet run under a kube-log-runner.exe the image lacks never starts. Nothing
// that depends on the missing program runs.
func TestServiceProgramMissing(t *testing.T) {
	ctx := context.Background()
	p, m := machine(t)
	if err := os.Remove(m.Backends().Files.Path(`C:\k\kube-log-runner.exe`)); err != nil {
		t.Fatal(err)
	}
	kubelet := platform.ServiceSpec{Name: "kubelet", Executable: `C:\k\kubelet.exe`, Dependencies: []string{"containerd"},
		Start: platform.StartByNodeboot, LogFile: `C:\var\log\kubernetes\kubelet.log`, LogRunner: `C:\k\kube-log-runner.exe`}
	if err := p.Services().Ensure(ctx, kubelet); err != nil {
		t.Fatalf("creating the service: %v", err)
	}
	err := p.Services().Start(ctx, "kubelet")
	if err == nil || !strings.Contains(err.Error(), `The system cannot find the file specified: service kubelet runs "C:\k\kube-log-runner.exe"`) {
		t.Errorf("starting a service whose program is missing: %v", err)
	}
	if got := state(t, m).Service("kubelet").State; got != windows.Stopped {
		t.Errorf("the service is %s", got)
	}
	// With the program there, the same service starts.
	shipPayload(t, m)
	if err := p.Services().Start(ctx, "kubelet"); err != nil {
		t.Error(err)
	}
}

// A node service that crashes is restarted 10 s later. One whose program stops with an error
// is restarted only with the failure actions flag ([MS-SCMR] 2.2.41), and only once the system
// has started again after the flag was set (SERVICE_FAILURE_ACTIONS_FLAG, Remarks): a service
// nodeboot creates at first boot (cri-dockerd, or nodeboot itself on an existing server) is not,
// which is why nodeboot's service handler ends its process like a crash when it fails
// (cmd/serve_windows.go).
func TestServiceRestartsAfterErrorStop(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m, err := winfake.New(winfake.Config{
		Root: t.TempDir(), ComputerName: "win-a", Build: 20348, Adapter: "Ethernet", Runtime: v1alpha1.RuntimeContainerd,
		Address: netip.MustParseAddr("10.240.0.4"), Subnet: netip.MustParsePrefix("10.240.0.0/16"), Now: func() time.Time { return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	shipPayload(t, m)
	p := windows.New(m.Backends())
	p.Poll = time.Millisecond
	spec := platform.ServiceSpec{Name: "nodeboot", Executable: `C:\k\nodeboot.exe`, Args: []string{"run"}, Start: platform.StartAtBoot}
	if err := p.Services().Ensure(ctx, spec); err != nil {
		t.Fatal(err)
	}
	fail := func(how winfake.Failure, restarted bool) {
		t.Helper()
		if got := state(t, m).Service("nodeboot").State; got != windows.Running {
			if err := p.Services().Start(ctx, "nodeboot"); err != nil {
				t.Fatal(err)
			}
		}
		m.Failed("nodeboot", how)
		now = now.Add(9 * time.Second)
		if got := state(t, m).Service("nodeboot").State; got != windows.Stopped {
			t.Fatalf("%s: the service is %s before the restart delay has passed", how, got)
		}
		now = now.Add(time.Second)
		want := map[bool]windows.ServiceState{true: windows.Running, false: windows.Stopped}[restarted]
		if got := state(t, m).Service("nodeboot").State; got != want {
			t.Errorf("%s: the service is %s 10 s after it failed, want %s", how, got, want)
		}
	}
	// Before the system starts again, the flag set with the service is not in effect.
	fail(winfake.Crash, true)
	fail(winfake.ErrorStop, false)
	if err := m.Reboot(); err != nil {
		t.Fatal(err)
	}
	fail(winfake.ErrorStop, true)
	fail(winfake.Crash, true)
}

// containerd registers itself with its own --register-service (the service runs containerd
// itself), replacing a registration made with other arguments; a matching one is kept.
func TestSelfRegisteringRuntime(t *testing.T) {
	ctx := context.Background()
	p, m := machine(t)
	containerd := platform.ServiceSpec{
		Name: "containerd", SelfRegistering: true, Start: platform.StartAtBoot,
		Executable: `C:\Program Files\containerd\bin\containerd.exe`, Args: []string{"--config", `C:\Program Files\containerd\config.toml`,
			"--log-file", `C:\var\log\kubernetes\containerd.log`},
	}
	if err := p.Services().Ensure(ctx, containerd); err != nil {
		t.Fatal(err)
	}
	log := m.Log()
	if got := changes(log); !slices.Equal(got, []string{"scm Stop containerd", "scm Delete containerd", "shell program.run "}) {
		t.Errorf("registration changed %v", got)
	}
	script := bodies(log, "shell", "program.run")[0]
	wantRegister := `& 'C:\Program Files\containerd\bin\containerd.exe' '--register-service' ` +
		`'--config' 'C:\Program Files\containerd\config.toml' '--log-file' 'C:\var\log\kubernetes\containerd.log'`
	if !strings.HasPrefix(script, wantRegister) {
		t.Errorf("register script:\n%s", script)
	}
	svc := state(t, m).Service("containerd")
	wantCmd := `"C:\Program Files\containerd\bin\containerd.exe" --run-service ` +
		`--config "C:\Program Files\containerd\config.toml" --log-file C:\var\log\kubernetes\containerd.log`
	if svc.Config.BinaryPathName != wantCmd || svc.Config.StartType != windows.StartAutomatic {
		t.Errorf("containerd service %+v", svc.Config)
	}
	mark := m.Mark()
	if err := p.Services().Ensure(ctx, containerd); err != nil {
		t.Fatal(err)
	}
	if c := changes(m.Log()[mark:]); len(c) > 0 {
		t.Errorf("a matching registration was redone: %v", c)
	}
}

// Secrets are created with the owner-only security descriptor; other files with none.
func TestFilesSecurityDescriptor(t *testing.T) {
	p, m := machine(t)
	if err := p.WriteSecret(`C:\var\lib\kubelet\pki\kubelet-client-current.pem`, []byte("key")); err != nil {
		t.Fatal(err)
	}
	if err := p.WriteFile(`C:\etc\cni\net.d\10-kubewin.conf`, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	var writes []string
	for _, o := range m.Log() {
		if o.Backend == "files" {
			writes = append(writes, o.Target+" "+o.Body)
		}
	}
	want := []string{`C:\var\lib\kubelet\pki\kubelet-client-current.pem ` + windows.OwnerOnly, `C:\etc\cni\net.d\10-kubewin.conf `}
	if !slices.Equal(writes, want) {
		t.Errorf("writes %q, want %q", writes, want)
	}
	if windows.OwnerOnly != "D:P(A;;FA;;;SY)(A;;FA;;;BA)" {
		t.Errorf("owner-only descriptor %s", windows.OwnerOnly)
	}
	if b, err := os.ReadFile(p.Path(`C:\var\lib\kubelet\pki\kubelet-client-current.pem`)); err != nil || string(b) != "key" {
		t.Errorf("secret %q %v", b, err)
	}
}

func TestCommandLineRoundTrip(t *testing.T) {
	for _, args := range [][]string{
		{`C:\k\kubelet.exe`, "--windows-service"},
		{`C:\Program Files\containerd\bin\containerd.exe`, "--config", `C:\Program Files\containerd\config.toml`},
		{`C:\k\x.exe`, "", `a"b`, `trailing\`, `spaced trailing\`, `two\\"quotes`, "tab\there", `\\server\share\`},
	} {
		line := windows.CommandLine(args[0], args[1:])
		if got := windows.SplitCommandLine(line); !slices.Equal(got, args) {
			t.Errorf("%q → %s → %q", args, line, got)
		}
	}
	// mgr.CreateService's quoting: spaces quote the argument, nothing else does.
	if got := windows.CommandLine(`C:\Program Files\a.exe`, []string{"--x=1", "a b"}); got != `"C:\Program Files\a.exe" --x=1 "a b"` {
		t.Errorf("command line %s", got)
	}
}

// Check finds what a lost network, host endpoint or policy leaves to repair, with queries only,
// and after Ensure finds nothing.
func TestCheckFindsDrift(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		mode v1alpha1.NetworkMode
		lose func(m *winfake.Machine, s platform.NetworkSpec) error
		want platform.Drift
	}{
		{v1alpha1.NetworkModeL2Bridge, func(m *winfake.Machine, s platform.NetworkSpec) error { return m.LoseNetwork(s.Name) },
			platform.Drift{Network: "HNS network cbr0 is missing"}},
		{v1alpha1.NetworkModeL2Bridge, func(m *winfake.Machine, s platform.NetworkSpec) error { return m.LoseNetwork("External") },
			platform.Drift{Host: []string{"HNS network External is missing"}}},
		{v1alpha1.NetworkModeL2Bridge, func(m *winfake.Machine, s platform.NetworkSpec) error { return m.LoseEndpoint(s.Name + "_ep") },
			platform.Drift{Host: []string{"host endpoint cbr0_ep is missing"}}},
		{v1alpha1.NetworkModeOverlay, func(m *winfake.Machine, s platform.NetworkSpec) error { return m.LoseNetwork(s.Name) },
			platform.Drift{Network: "HNS network vxlan0 is missing"}},
		{v1alpha1.NetworkModeOverlay, func(m *winfake.Machine, s platform.NetworkSpec) error {
			return m.Edit(func(st *winfake.State) {
				for i := range st.Networks {
					st.Networks[i].Policies = slices.DeleteFunc(st.Networks[i].Policies, func(p hcnjson.NetworkPolicy) bool { return p.Type == hcnjson.HostRoute })
				}
			})
		}, platform.Drift{Host: []string{"HNS network vxlan0 has no HostRoute policy"}}},
		// Another program's network (Docker's nat, another CNI) removes the metadata routes and
		// leaves this node's networks as they were (hcsshim issue 299).
		{v1alpha1.NetworkModeL2Bridge, func(m *winfake.Machine, s platform.NetworkSpec) error {
			return m.LoseRoute(netip.MustParsePrefix("169.254.169.254/32"))
		}, platform.Drift{Host: []string{"no route to 169.254.169.254/32 on vEthernet (Ethernet) (a metadata endpoint)"}}},
		{v1alpha1.NetworkModeOverlay, func(m *winfake.Machine, s platform.NetworkSpec) error {
			return m.LoseRoute(netip.MustParsePrefix("168.63.129.16/32"))
		}, platform.Drift{Host: []string{"no route to 168.63.129.16/32 on vEthernet (Ethernet) (a metadata endpoint)"}}},
		// A copy of the route in the persistent store alone (New-NetRoute writes both stores by
		// default) is not in effect until a restart: the repair adds the active one beside it.
		{v1alpha1.NetworkModeL2Bridge, func(m *winfake.Machine, s platform.NetworkSpec) error {
			imds := netip.MustParsePrefix("169.254.169.254/32")
			if err := m.Edit(func(st *winfake.State) {
				i := slices.IndexFunc(st.Routes, func(r winfake.Route) bool { return r.Destination == imds })
				persistent := st.Routes[i]
				persistent.Store = windows.PersistentStore
				st.Routes = append(st.Routes, persistent)
			}); err != nil {
				return err
			}
			return m.LoseRoute(imds)
		}, platform.Drift{Host: []string{"no route to 169.254.169.254/32 on vEthernet (Ethernet) (a metadata endpoint)"}}},
	} {
		p, m := machine(t)
		s := spec(t, tc.mode)
		if _, err := p.Network().Ensure(ctx, s); err != nil {
			t.Fatal(err)
		}
		if d, err := p.Network().Check(ctx, s); err != nil || !d.None() {
			t.Fatalf("%s: Check after Ensure: %+v %v", tc.mode, d, err)
		}
		if err := tc.lose(m, s); err != nil {
			t.Fatal(err)
		}
		mark := m.Mark()
		d, err := p.Network().Check(ctx, s)
		if err != nil || d.String() != tc.want.String() || (d.Network == "") != (tc.want.Network == "") {
			t.Errorf("%s: Check = %+v, %v; want %+v", tc.mode, d, err, tc.want)
		}
		if c := changes(m.Log()[mark:]); len(c) > 0 {
			t.Errorf("Check changed the machine: %v", c)
		}
		if _, err := p.Network().Ensure(ctx, s); err != nil {
			t.Fatal(err)
		}
		if d, err := p.Network().Check(ctx, s); err != nil || !d.None() {
			t.Errorf("%s: Check after the repair: %+v %v", tc.mode, d, err)
		}
	}
}
