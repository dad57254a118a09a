package nodecmd

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/kubeversion"
	"github.com/kubewin/kubewin/internal/testkit/golden"
)

func testInput(t *testing.T, minor int, runtime v1alpha1.RuntimeName) Input {
	t.Helper()
	c := &v1alpha1.NodeConfig{
		APIVersion: v1alpha1.GroupVersion,
		Kind:       v1alpha1.KindNodeConfig,
		Cluster: v1alpha1.Cluster{
			APIServerEndpoint: "10.0.0.4:6443",
			CACertHashes:      []string{"sha256:" + strings.Repeat("ab", 32)},
			BootstrapToken:    "abcdef.0123456789abcdef",
			ClusterCIDR:       "10.244.0.0/16",
			ServiceCIDR:       "10.96.0.0/12",
		},
		Node: v1alpha1.Node{
			Labels: map[string]string{"kubewin.io/pool": "win", "node.kubernetes.io/windows-pool": "win"},
			Taints: []v1alpha1.Taint{{Key: "os", Value: "windows", Effect: "NoSchedule"}},
		},
		Runtime: v1alpha1.Runtime{Name: runtime},
	}
	c.Default()
	if errs := c.Validate(); len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	m := &v1alpha1.ImageManifest{
		KubernetesVersion: fmt.Sprintf("v1.%d.2", minor),
		Runtime:           v1alpha1.RuntimeInfo{Name: runtime, Version: "2.1.4"},
		PauseImage:        v1alpha1.PauseImage{Reference: "registry.k8s.io/pause:3.10"},
	}
	if runtime == v1alpha1.RuntimeDocker {
		m.Runtime.Version, m.Runtime.CRIDockerdVersion = "27.5.1", "0.3.16"
	}
	return Input{Config: c, Manifest: m, NodeName: "win000001", NodeIP: netip.MustParseAddr("10.240.0.5"), Memory: 8 << 30,
		Paths: DefaultPaths()}
}

func TestKubeletGolden(t *testing.T) {
	for _, runtime := range v1alpha1.RuntimeNames {
		for minor := kubeversion.OldestMinor; minor <= kubeversion.NewestMinor; minor++ {
			name := fmt.Sprintf("kubelet-1.%d-%s.txt", minor, runtime)
			t.Run(name, func(t *testing.T) {
				in := testInput(t, minor, runtime)
				k, err := Kubelet(in)
				if err != nil {
					t.Fatal(err)
				}
				var out strings.Builder
				fmt.Fprintf(&out, "# args\n%s\n# %s\n%s", strings.Join(k.Args, "\n"), in.Paths.KubeletConfig, k.Files[in.Paths.KubeletConfig])
				if d, err := CRIDockerd(in); err != nil {
					t.Fatal(err)
				} else if d != nil {
					fmt.Fprintf(&out, "# cri-dockerd args\n%s\n", strings.Join(d.Args, "\n"))
				}
				golden.Assert(t, name, []byte(out.String()))
			})
		}
	}
}

func TestKubeletWindowsInvariants(t *testing.T) {
	for minor := kubeversion.OldestMinor; minor <= kubeversion.NewestMinor; minor++ {
		in := testInput(t, minor, v1alpha1.RuntimeContainerd)
		k, err := Kubelet(in)
		if err != nil {
			t.Fatal(err)
		}
		conf := string(k.Files[in.Paths.KubeletConfig])
		for _, want := range []string{"cgroupsPerQOS: false", "enforceNodeAllocatable:\n- none", `resolvConf: ""`,
			"containerRuntimeEndpoint: npipe:////./pipe/containerd-containerd", "key: os"} {
			if !strings.Contains(conf, want) {
				t.Errorf("1.%d: config lacks %q:\n%s", minor, want, conf)
			}
		}
		for _, a := range k.Args {
			for _, f := range removedKubeletFlags {
				if strings.HasPrefix(a, "--"+f.name+"=") && minor >= f.removedIn {
					t.Errorf("1.%d: rendered removed flag %s", minor, a)
				}
			}
		}
		if !strings.Contains(strings.Join(k.Args, " "), "--windows-service") {
			t.Errorf("1.%d: no --windows-service", minor)
		}
	}
}

// A node of an image baked with Hyper-V isolation labels itself so, next to the NodeConfig's
// labels (which are not changed); other nodes do not.
func TestKubeletHyperVLabel(t *testing.T) {
	in := testInput(t, 36, v1alpha1.RuntimeContainerd)
	want := "--node-labels=kubewin.io/pool=win,node.kubernetes.io/windows-pool=win"
	k, err := Kubelet(in)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(k.Args, want) {
		t.Errorf("process-only node: %v", k.Args)
	}
	in.Manifest.Isolation = []v1alpha1.Isolation{v1alpha1.IsolationProcess, v1alpha1.IsolationHyperV}
	if k, err = Kubelet(in); err != nil {
		t.Fatal(err)
	}
	if want := "--node-labels=kubewin.io/hyperv-isolation=true,kubewin.io/pool=win,node.kubernetes.io/windows-pool=win"; !slices.Contains(k.Args, want) {
		t.Errorf("Hyper-V node: %v, want %s", k.Args, want)
	}
	if _, ok := in.Config.Node.Labels[v1alpha1.LabelHyperVIsolation]; ok {
		t.Error("the NodeConfig's labels were changed")
	}
}

func TestKubeletExtraArgs(t *testing.T) {
	in := testInput(t, 36, v1alpha1.RuntimeContainerd)
	in.Config.Kubelet.ExtraArgs = map[string]string{"v": "2", "image-gc-high-threshold": "80"}
	k, err := Kubelet(in)
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Join(k.Args, " ")
	if !strings.HasSuffix(args, "--image-gc-high-threshold=80 --v=2") {
		t.Errorf("extra args not appended in order: %s", args)
	}

	in.Config.Kubelet.ExtraArgs = map[string]string{"pod-infra-container-image": "mcr.microsoft.com/oss/kubernetes/pause:3.6", "node-labels": "a=b",
		"network-plugin": "cni"}
	_, err = Kubelet(in)
	for _, want := range []string{
		"kubelet.extraArgs[pod-infra-container-image]: --pod-infra-container-image was removed in Kubernetes 1.34 and the kubelet 1.36 would not start",
		"kubelet.extraArgs[node-labels]: kubewin sets --node-labels itself: set node.labels instead",
		"kubelet.extraArgs[network-plugin]: --network-plugin was removed in Kubernetes 1.24",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error = %v, want it to contain %q", err, want)
		}
	}
	if err := checkNotRemoved(34, []string{"--pod-infra-container-image=x"}); err == nil {
		t.Error("the renderer guard let a removed flag through")
	}
}

func TestKubeletUnsupported(t *testing.T) {
	in := testInput(t, 36, v1alpha1.RuntimeContainerd)
	in.Manifest.KubernetesVersion = "v1.30.1"
	if _, err := Kubelet(in); err == nil || !strings.Contains(err.Error(), "Kubernetes 1.30.1 is not supported on kubewin nodes: use 1.34 to 1.37") {
		t.Errorf("error = %v", err)
	}
	in = testInput(t, 36, v1alpha1.RuntimeContainerd)
	in.Manifest.Runtime.Name = v1alpha1.RuntimeDocker
	if _, err := Kubelet(in); err == nil || !strings.Contains(err.Error(), `runtime.name is "containerd" but the image has "docker"`) {
		t.Errorf("error = %v", err)
	}
}

func TestKubeProxy(t *testing.T) {
	in := testInput(t, 37, v1alpha1.RuntimeContainerd)
	in.Config.KubeProxy.EnableDSR = true
	p, err := KubeProxy(in)
	if err != nil {
		t.Fatal(err)
	}
	golden.Assert(t, "kube-proxy-l2bridge.yaml", p.Files[in.Paths.KubeProxyConfig])

	in.Config.Network = v1alpha1.Network{Mode: v1alpha1.NetworkModeOverlay}
	in.Config.Default()
	if _, err := KubeProxy(in); err == nil || !strings.Contains(err.Error(), "needs a source VIP") {
		t.Errorf("overlay without source VIP: %v", err)
	}
	in.SourceVIP = netip.MustParseAddr("10.244.3.2")
	p, err = KubeProxy(in)
	if err != nil {
		t.Fatal(err)
	}
	golden.Assert(t, "kube-proxy-overlay.yaml", p.Files[in.Paths.KubeProxyConfig])

	in.Config.KubeProxy.Mode = v1alpha1.ProxyModeNone
	if p, err := KubeProxy(in); p != nil || err != nil {
		t.Errorf("mode none rendered %v, %v", p, err)
	}
}

func TestContainerdConfig(t *testing.T) {
	for _, minor := range containerdMinors {
		v := minor.version
		in := testInput(t, 36, v1alpha1.RuntimeContainerd)
		in.Manifest.Runtime.Version = v
		c, err := ContainerdConfig(in.Manifest, in.Paths)
		if err != nil {
			t.Fatal(err)
		}
		golden.Assert(t, "containerd-"+v+".toml", c.Files[in.Paths.ContainerdConfigFile])
		in.Manifest.Isolation = []v1alpha1.Isolation{v1alpha1.IsolationProcess, v1alpha1.IsolationHyperV}
		if c, err = ContainerdConfig(in.Manifest, in.Paths); err != nil {
			t.Fatal(err)
		}
		golden.Assert(t, "containerd-"+v+"-hyperv.toml", c.Files[in.Paths.ContainerdConfigFile])
	}
	in := testInput(t, 36, v1alpha1.RuntimeContainerd)
	in.Manifest.Runtime.Version = "3.0.0"
	if _, err := ContainerdConfig(in.Manifest, in.Paths); err == nil {
		t.Error("containerd 3 accepted")
	}
}

// The kubelet's memory reservations follow AKS's: kube-reserved at its regressive rate, 2Gi
// for Windows, eviction under 750Mi (MicrosoftDocs/azure-aks-docs
// articles/aks/node-resource-reservations.md), each overridable.
func TestKubeletMemoryReservations(t *testing.T) {
	const gib = 1 << 30
	for total, want := range map[uint64]string{
		4 * gib:   "1Gi",    // 25% of 4
		7 * gib:   "1638Mi", // 1 + 20% of 3: the docs' 7 GB example (0.25*4 + 0.20*3 = 1.6 GB)
		8 * gib:   "1843Mi", // 1 + 0.8
		16 * gib:  "2662Mi", // 1 + 0.8 + 0.8
		128 * gib: "9543Mi", // 2.6 + 6.72
		256 * gib: "12165Mi",
	} {
		if got := KubeReservedMemory(total); got.String() != want {
			t.Errorf("kube-reserved of %d GiB = %s, want %s", total/gib, got.String(), want)
		}
	}

	in := testInput(t, 36, v1alpha1.RuntimeContainerd)
	in.Memory = 16 * gib
	k, err := Kubelet(in)
	if err != nil {
		t.Fatal(err)
	}
	conf := string(k.Files[in.Paths.KubeletConfig])
	for _, want := range []string{"systemReserved:\n  memory: 2Gi", "kubeReserved:\n  memory: 2662Mi",
		"evictionHard:\n  imagefs.available: 15%\n  memory.available: 750Mi\n  nodefs.available: 10%"} {
		if !strings.Contains(conf, want) {
			t.Errorf("config lacks %q:\n%s", want, conf)
		}
	}

	in.Config.Kubelet.SystemReservedMemory, in.Config.Kubelet.KubeReservedMemory, in.Config.Kubelet.EvictionHardMemory = "1Gi", "512Mi", "300Mi"
	k, err = Kubelet(in)
	if err != nil {
		t.Fatal(err)
	}
	conf = string(k.Files[in.Paths.KubeletConfig])
	for _, want := range []string{"systemReserved:\n  memory: 1Gi", "kubeReserved:\n  memory: 512Mi", "memory.available: 300Mi"} {
		if !strings.Contains(conf, want) {
			t.Errorf("overridden config lacks %q:\n%s", want, conf)
		}
	}

	in.Config.Kubelet = v1alpha1.Kubelet{}
	in.Memory = 2 * gib
	if _, err := Kubelet(in); err == nil || !strings.Contains(err.Error(), "leave no memory for pods on this machine, which has 2Gi: lower them") {
		t.Errorf("2 GiB machine: %v", err)
	}

	// At plan time no machine is known: no kube-reserved is sized, and nothing is checked.
	in.Memory = 0
	k, err = Kubelet(in)
	if err != nil {
		t.Fatal(err)
	}
	if conf := string(k.Files[in.Paths.KubeletConfig]); strings.Contains(conf, "kubeReserved") || !strings.Contains(conf, "systemReserved") {
		t.Errorf("config without a machine:\n%s", conf)
	}
}
