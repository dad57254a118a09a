package nodecmd

import (
	"fmt"
	"maps"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
	proxyv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	kubeletapis "k8s.io/kubelet/pkg/apis"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/kubeversion"
)

// Input is what the node's components are rendered from. Config must be defaulted and valid.
type Input struct {
	Config   *v1alpha1.NodeConfig
	Manifest *v1alpha1.ImageManifest
	// NodeName is the Node object's name (node.name, or the computer name).
	NodeName string
	// NodeIP is the node's address, found at boot when node.ip is empty.
	NodeIP netip.Addr
	// SourceVIP is kube-proxy's overlay source VIP, reserved at boot when kubeProxy.sourceVIP is empty.
	SourceVIP netip.Addr
	// Memory is the machine's physical memory in bytes, which the kubelet's memory
	// reservations are sized from; zero when no machine is known (a check at plan time).
	Memory uint64
	Paths  Paths
}

// Component is a rendered program: its command line and the files it reads.
type Component struct {
	// Args follow the executable on the command line.
	Args []string
	// Files maps a path on the node to its content.
	Files map[string][]byte
}

// minor returns the image's Kubernetes minor, checked against the supported range.
func (in Input) minor() (int, error) {
	v, err := kubeversion.Parse(in.Manifest.KubernetesVersion)
	if err != nil {
		return 0, err
	}
	if err := kubeversion.CheckSupported(v); err != nil {
		return 0, err
	}
	return int(v.Minor()), nil
}

func (in Input) check() error {
	if in.Config == nil || in.Manifest == nil {
		return fmt.Errorf("nodecmd: a NodeConfig and an ImageManifest are required")
	}
	if in.NodeName == "" {
		return fmt.Errorf("nodecmd: node name is not set")
	}
	if !in.NodeIP.IsValid() {
		return fmt.Errorf("nodecmd: node IP is not set")
	}
	if in.Config.Runtime.Name != in.Manifest.Runtime.Name {
		return fmt.Errorf("runtime.name is %q but the image has %q: set runtime.name to %q or use an image baked with %q",
			in.Config.Runtime.Name, in.Manifest.Runtime.Name, in.Manifest.Runtime.Name, in.Config.Runtime.Name)
	}
	return nil
}

// Kubelet renders the kubelet: a KubeletConfiguration file and the flags that have no field there.
func Kubelet(in Input) (*Component, error) {
	if err := in.check(); err != nil {
		return nil, err
	}
	minor, err := in.minor()
	if err != nil {
		return nil, err
	}
	c := in.Config
	if err := checkExtraArgs(minor, c.Kubelet.ExtraArgs); err != nil {
		return nil, err
	}

	mem, err := memoryAccountingOf(c.Kubelet, in.Memory)
	if err != nil {
		return nil, err
	}

	kc := kubeletv1beta1.KubeletConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: kubeletv1beta1.SchemeGroupVersion.String(), Kind: "KubeletConfiguration"},
		Authentication: kubeletv1beta1.KubeletAuthentication{
			Anonymous: kubeletv1beta1.KubeletAnonymousAuthentication{Enabled: ptr.To(false)},
			Webhook:   kubeletv1beta1.KubeletWebhookAuthentication{Enabled: ptr.To(true)},
			X509:      kubeletv1beta1.KubeletX509Authentication{ClientCAFile: in.Paths.ClusterCA},
		},
		Authorization:      kubeletv1beta1.KubeletAuthorization{Mode: kubeletv1beta1.KubeletAuthorizationModeWebhook},
		ClusterDomain:      c.Cluster.ClusterDomain,
		ClusterDNS:         c.Cluster.ClusterDNS,
		MaxPods:            c.Node.MaxPods,
		RotateCertificates: true,
		// Windows has no cgroups: QoS cgroups and node-allocatable enforcement must be off, and
		// DNS comes from the CNI config, not a resolv.conf.
		CgroupsPerQOS:            ptr.To(false),
		EnforceNodeAllocatable:   []string{"none"},
		ResolverConfig:           ptr.To(""),
		ContainerRuntimeEndpoint: c.Runtime.Endpoint,
		ImageServiceEndpoint:     c.Runtime.Endpoint,
		RegisterWithTaints:       taints(c.Node.Taints),
		SystemReserved:           reserved(mem.system),
		KubeReserved:             reserved(mem.kube),
		EvictionHard:             evictionHard(mem.eviction),
	}
	if c.Node.PodCIDR != "" {
		kc.PodCIDR = c.Node.PodCIDR
	}
	conf, err := yaml.Marshal(kc)
	if err != nil {
		return nil, fmt.Errorf("encode kubelet configuration: %w", err)
	}

	args := []string{
		"--windows-service",
		"--config=" + in.Paths.KubeletConfig,
		"--kubeconfig=" + in.Paths.KubeletKubeconfig,
		"--cert-dir=" + in.Paths.KubeletCertDir,
		"--hostname-override=" + in.NodeName,
		"--node-ip=" + in.NodeIP.String(),
		"--windows-priorityclass=ABOVE_NORMAL_PRIORITY_CLASS",
	}
	if labels := labelList(NodeLabels(c, in.Manifest)); labels != "" {
		args = append(args, "--node-labels="+labels)
	}
	files := map[string][]byte{in.Paths.KubeletConfig: conf}
	if a := c.Kubelet.AzureContainerRegistry; a != nil {
		cp, cpArgs, err := credentialProvider(a, in.Manifest, in.Paths)
		if err != nil {
			return nil, err
		}
		maps.Copy(files, cp)
		args = append(args, cpArgs...)
	}
	for _, k := range sortedKeys(c.Kubelet.ExtraArgs) {
		args = append(args, fmt.Sprintf("--%s=%s", k, c.Kubelet.ExtraArgs[k]))
	}
	if err := checkNotRemoved(minor, args); err != nil {
		return nil, err
	}
	return &Component{Args: args, Files: files}, nil
}

// KubeProxy renders kube-proxy's winkernel proxier as a Windows service, or returns nil when
// kubeProxy.mode is none.
func KubeProxy(in Input) (*Component, error) {
	if err := in.check(); err != nil {
		return nil, err
	}
	if _, err := in.minor(); err != nil {
		return nil, err
	}
	c := in.Config
	if c.KubeProxy.Mode == v1alpha1.ProxyModeNone {
		return nil, nil
	}
	win := proxyv1alpha1.KubeProxyWinkernelConfiguration{
		NetworkName: c.Network.Name,
		EnableDSR:   c.KubeProxy.EnableDSR,
	}
	if c.Network.Mode == v1alpha1.NetworkModeOverlay {
		if !in.SourceVIP.IsValid() {
			return nil, fmt.Errorf("kube-proxy on an overlay network needs a source VIP: set kubeProxy.sourceVIP or let nodeboot reserve one from " +
				"the pod CIDR")
		}
		win.SourceVip = in.SourceVIP.String()
	}
	pc := proxyv1alpha1.KubeProxyConfiguration{
		TypeMeta:         metav1.TypeMeta{APIVersion: proxyv1alpha1.SchemeGroupVersion.String(), Kind: "KubeProxyConfiguration"},
		Mode:             proxyv1alpha1.ProxyMode(c.KubeProxy.Mode),
		HostnameOverride: in.NodeName,
		ClusterCIDR:      c.Cluster.ClusterCIDR,
		Winkernel:        win,
	}
	pc.ClientConnection.Kubeconfig = in.Paths.KubeProxyKubeconfig
	conf, err := yaml.Marshal(pc)
	if err != nil {
		return nil, fmt.Errorf("encode kube-proxy configuration: %w", err)
	}
	return &Component{
		Args:  []string{"--windows-service", "--config=" + in.Paths.KubeProxyConfig},
		Files: map[string][]byte{in.Paths.KubeProxyConfig: conf},
	}, nil
}

// CRIDockerd renders cri-dockerd, the CRI shim in front of Docker Engine, or returns nil for
// containerd. It owns the CNI and pause-image settings the kubelet lost with dockershim.
func CRIDockerd(in Input) (*Component, error) {
	if err := in.check(); err != nil {
		return nil, err
	}
	if in.Config.Runtime.Name != v1alpha1.RuntimeDocker {
		return nil, nil
	}
	args := []string{
		"--container-runtime-endpoint=" + in.Config.Runtime.Endpoint,
		"--pod-infra-container-image=" + in.Manifest.PauseImage.Reference,
		"--network-plugin=cni",
		"--cni-bin-dir=" + in.Paths.CNIBinDir,
		"--cni-conf-dir=" + in.Paths.CNIConfDir,
	}
	return &Component{Args: args}, nil
}

// ContainerdConfig renders containerd's config.toml: the sandbox (pause) image from the image
// manifest and the CNI directories, in the layout of the containerd major the image ships
// (config version 2 for containerd 1.x, version 3 for 2.x). An image with Hyper-V isolation
// gets both Windows runtime handlers (hyperVHandlers). It depends on the image only, so the
// image is baked with it. It returns nil for a docker image.
func ContainerdConfig(m *v1alpha1.ImageManifest, paths Paths) (*Component, error) {
	if m.Runtime.Name != v1alpha1.RuntimeContainerd {
		return nil, nil
	}
	v, err := version.ParseGeneric(m.Runtime.Version)
	if err != nil {
		return nil, fmt.Errorf("containerd version %q in the image manifest is not a version such as 2.1.4", m.Runtime.Version)
	}
	var b strings.Builder
	pause, bin, conf := tomlString(m.PauseImage.Reference), tomlString(paths.CNIBinDir), tomlString(paths.CNIConfDir)
	switch v.Major() {
	case 1:
		fmt.Fprintf(&b, "version = 2\n\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = %s\n\n", pause)
		fmt.Fprintf(&b, "[plugins.\"io.containerd.grpc.v1.cri\".cni]\n  bin_dir = %s\n  conf_dir = %s\n", bin, conf)
		if m.HyperV() {
			hyperVHandlers(&b, `"io.containerd.grpc.v1.cri"`)
		}
	case 2:
		fmt.Fprintf(&b, "version = 3\n\n[plugins.'io.containerd.cri.v1.images'.pinned_images]\n  sandbox = %s\n\n", pause)
		// containerd 2.0 reads the CNI binaries' directory from bin_dir only; 2.1 added bin_dirs
		// and deprecated bin_dir, refusing both at once; 2.4 reads bin_dirs only (CniConfig in
		// containerd's internal/cri/config/config.go at v2.0.14, v2.1.0 and v2.4.2). A key the
		// version does not read is ignored without a word, and the node gets no CNI plugins.
		if v.Minor() == 0 {
			fmt.Fprintf(&b, "[plugins.'io.containerd.cri.v1.runtime'.cni]\n  bin_dir = %s\n  conf_dir = %s\n", bin, conf)
		} else {
			fmt.Fprintf(&b, "[plugins.'io.containerd.cri.v1.runtime'.cni]\n  bin_dirs = [%s]\n  conf_dir = %s\n", bin, conf)
		}
		if m.HyperV() {
			hyperVHandlers(&b, "'io.containerd.cri.v1.runtime'")
		}
	default:
		return nil, fmt.Errorf("containerd %s is not supported: use containerd 1.7 or 2.x", m.Runtime.Version)
	}
	return &Component{Files: map[string][]byte{paths.ContainerdConfigFile: []byte(b.String())}}, nil
}

// The runtime handlers of a Windows containerd: a Kubernetes RuntimeClass selects one by name.
const (
	// ProcessHandler runs process-isolated containers, containerd's default on Windows.
	ProcessHandler = "runhcs-wcow-process"
	// HyperVHandler runs each pod in a Hyper-V utility VM.
	HyperVHandler = "runhcs-wcow-hypervisor"
)

// hyperVHandlers writes the two Windows runtime handlers under the CRI plugin section that holds
// containerd.runtimes (plugin): runhcs-wcow-process as the default, and runhcs-wcow-hypervisor,
// the same shim (runtime_type io.containerd.runhcs.v1) with SandboxIsolation = 1 (HYPERVISOR)
// and the pod's CPU limits scaled to the utility VM. These are the handlers, annotations and
// options of containerd's own Windows defaults (DefaultRuntimeConfig in
// internal/cri/config/config_windows.go, v2.0 to v2.4; pkg/cri/config/config_windows.go in
// 1.7; the CRI support for it: containerd/containerd#6862). A RuntimeClass selects the handler
// by name, as Kubernetes' Windows e2e test for Hyper-V containers does
// (kubernetes/kubernetes test/e2e/windows/hyperv.go); the shim's options are hcsshim's
// (cmd/containerd-shim-runhcs-v1/options: SandboxIsolation PROCESS 0, HYPERVISOR 1). Written
// out, the image's configuration says what it runs rather than relying on each minor's defaults.
func hyperVHandlers(b *strings.Builder, plugin string) {
	runtimes := "[plugins." + plugin + ".containerd"
	fmt.Fprintf(b, "\n%s]\n  default_runtime_name = %s\n", runtimes, tomlString(ProcessHandler))
	fmt.Fprintf(b, "\n%s.runtimes.%s]\n  runtime_type = 'io.containerd.runhcs.v1'\n  container_annotations = ['io.microsoft.container.*']\n",
		runtimes, ProcessHandler)
	fmt.Fprintf(b, "\n%s.runtimes.%s]\n  runtime_type = 'io.containerd.runhcs.v1'\n  pod_annotations = ['io.microsoft.virtualmachine.*']\n"+
		"  container_annotations = ['io.microsoft.container.*']\n", runtimes, HyperVHandler)
	fmt.Fprintf(b, "\n%s.runtimes.%s.options]\n  SandboxIsolation = 1\n  ScaleCpuLimitsToSandbox = true\n", runtimes, HyperVHandler)
}

// tomlString quotes s as a TOML literal string when it can (Windows paths keep their
// backslashes), as a basic string otherwise.
func tomlString(s string) string {
	if !strings.ContainsAny(s, "'\n") {
		return "'" + s + "'"
	}
	return fmt.Sprintf("%q", s)
}

func taints(ts []v1alpha1.Taint) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range ts {
		out = append(out, corev1.Taint{Key: t.Key, Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
	}
	return out
}

// KubeletLabels are the labels a Windows kubelet registers its Node with on a machine of build
// (kubernetes pkg/kubelet/kubelet_node_status.go initialNode, the deprecated beta OS and
// architecture labels included, and getOSSpecificLabels' Windows build), hostname aside. On a
// Node it finds registered, the kubelet sets these to its own values (updateDefaultLabels).
func KubeletLabels(build v1alpha1.WindowsBuild) map[string]string {
	return map[string]string{
		corev1.LabelOSStable:     "windows",
		corev1.LabelArchStable:   "amd64",
		kubeletapis.LabelOS:      "windows",
		kubeletapis.LabelArch:    "amd64",
		corev1.LabelWindowsBuild: build.OSVersion(),
	}
}

// NodeLabels are the labels a node sets on its own Node beyond the kubelet's: the NodeConfig's,
// and v1alpha1.LabelHyperVIsolation when its image was baked with Hyper-V isolation.
func NodeLabels(c *v1alpha1.NodeConfig, m *v1alpha1.ImageManifest) map[string]string {
	if !m.HyperV() {
		return c.Node.Labels
	}
	labels := maps.Clone(c.Node.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[v1alpha1.LabelHyperVIsolation] = "true"
	return labels
}

func labelList(labels map[string]string) string {
	parts := make([]string, 0, len(labels))
	for _, k := range sortedKeys(labels) {
		parts = append(parts, k+"="+labels[k])
	}
	return strings.Join(parts, ",")
}
