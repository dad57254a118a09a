package v1alpha1

import (
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"

	"github.com/kubewin/kubewin/internal/ipam"
	"github.com/kubewin/kubewin/internal/kubeversion"
)

var (
	caHashRE      = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	digestRE      = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	sha256RE      = regexp.MustCompile(`^[0-9a-f]{64}$`)
	networkNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)
	flagNameRE    = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
	guidRE        = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	imageRefRE    = regexp.MustCompile(`^[a-z0-9]+([._-][a-z0-9]+)*(\.[a-z0-9-]+)*(:[0-9]+)?` +
		`(/[a-z0-9]+([._-][a-z0-9]+)*)+(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?$`)
)

// Validate returns every problem in c with its field path. Call Default first.
func (c *NodeConfig) Validate() field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateTypeMeta(c.APIVersion, c.Kind, KindNodeConfig)...)
	cluster, clusterErrs := c.Cluster.validate(field.NewPath("cluster"))
	errs = append(errs, clusterErrs...)
	errs = append(errs, c.Node.validate(field.NewPath("node"), cluster)...)
	errs = append(errs, c.Network.validate(field.NewPath("network"), c.Runtime.Name)...)
	errs = append(errs, c.Runtime.validate(field.NewPath("runtime"))...)
	errs = append(errs, c.KubeProxy.validate(field.NewPath("kubeProxy"), c.Network.Mode, c.Node.PodCIDR)...)
	errs = append(errs, c.Kubelet.validate(field.NewPath("kubelet"))...)
	return errs
}

func validateTypeMeta(apiVersion, kind, wantKind string) field.ErrorList {
	var errs field.ErrorList
	if apiVersion != GroupVersion {
		errs = append(errs, field.NotSupported(field.NewPath("apiVersion"), apiVersion, []string{GroupVersion}))
	}
	if kind != wantKind {
		errs = append(errs, field.NotSupported(field.NewPath("kind"), kind, []string{wantKind}))
	}
	return errs
}

// clusterNets are the parsed networks of a Cluster, for the checks that relate fields.
type clusterNets struct {
	cluster, service netip.Prefix
}

func (c *Cluster) validate(p *field.Path) (clusterNets, field.ErrorList) {
	var errs field.ErrorList
	var nets clusterNets

	if c.APIServerEndpoint == "" {
		errs = append(errs, field.Required(p.Child("apiServerEndpoint"), "the API server as host:port, e.g. 10.0.0.4:6443"))
	} else if err := validateHostPort(c.APIServerEndpoint); err != nil {
		errs = append(errs, field.Invalid(p.Child("apiServerEndpoint"), c.APIServerEndpoint, err.Error()))
	}

	switch {
	case len(c.CACertHashes) == 0 && !c.UnsafeSkipCAVerification:
		errs = append(errs, field.Required(p.Child("caCertHashes"),
			`pin the cluster CA with "sha256:<hex of its SubjectPublicKeyInfo>" (kubeadm token create --print-join-command prints it), `+
				`or set unsafeSkipCAVerification: true on a throw-away cluster`))
	case len(c.CACertHashes) > 0 && c.UnsafeSkipCAVerification:
		errs = append(errs, field.Forbidden(p.Child("unsafeSkipCAVerification"), "must not be set together with caCertHashes: remove one of them"))
	}
	for i, h := range c.CACertHashes {
		if !caHashRE.MatchString(h) {
			errs = append(errs, field.Invalid(p.Child("caCertHashes").Index(i), h, `must be "sha256:" followed by 64 lower-case hex digits`))
		}
	}

	switch {
	case c.BootstrapToken == "":
		errs = append(errs, field.Required(p.Child("bootstrapToken"), `a bootstrap token such as "abcdef.0123456789abcdef"`))
	case !bootstraputil.IsValidBootstrapToken(c.BootstrapToken):
		// Never echo the token.
		errs = append(errs, field.Invalid(p.Child("bootstrapToken"), Redaction, `must match [a-z0-9]{6}.[a-z0-9]{16}`))
	}

	if c.KubernetesVersion != "" {
		if _, err := kubeversion.Parse(c.KubernetesVersion); err != nil {
			errs = append(errs, field.Invalid(p.Child("kubernetesVersion"), c.KubernetesVersion, err.Error()))
		}
	}

	nets.cluster, errs = requiredPrefix(p.Child("clusterCIDR"), c.ClusterCIDR, errs)
	nets.service, errs = requiredPrefix(p.Child("serviceCIDR"), c.ServiceCIDR, errs)
	if nets.cluster.IsValid() && nets.service.IsValid() && nets.cluster.Overlaps(nets.service) {
		errs = append(errs, field.Invalid(p.Child("serviceCIDR"), c.ServiceCIDR, fmt.Sprintf("overlaps clusterCIDR %s: choose ranges that do not intersect",
			nets.cluster)))
	}
	for i, s := range c.ClusterDNS {
		a, err := ipam.ParseAddr(s)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(p.Child("clusterDNS").Index(i), s, err.Error()))
		case nets.service.IsValid() && !nets.service.Contains(a):
			errs = append(errs, field.Invalid(p.Child("clusterDNS").Index(i), s, fmt.Sprintf("must be inside serviceCIDR %s", nets.service)))
		}
	}
	for _, msg := range validation.IsDNS1123Subdomain(c.ClusterDomain) {
		errs = append(errs, field.Invalid(p.Child("clusterDomain"), c.ClusterDomain, msg))
	}
	return nets, errs
}

func (n *Node) validate(p *field.Path, c clusterNets) field.ErrorList {
	var errs field.ErrorList
	if n.Name != "" {
		for _, msg := range validation.IsDNS1123Subdomain(n.Name) {
			errs = append(errs, field.Invalid(p.Child("name"), n.Name, msg))
		}
	}
	var subnet, pod netip.Prefix
	if n.Subnet != "" {
		var err error
		if subnet, err = ipam.ParsePrefix(n.Subnet); err != nil {
			errs = append(errs, field.Invalid(p.Child("subnet"), n.Subnet, err.Error()))
		}
	}
	if n.IP != "" {
		a, err := ipam.ParseAddr(n.IP)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(p.Child("ip"), n.IP, err.Error()))
		case subnet.IsValid() && !subnet.Contains(a):
			errs = append(errs, field.Invalid(p.Child("ip"), n.IP, fmt.Sprintf("must be inside node.subnet %s", subnet)))
		}
	}
	if n.PodCIDR != "" {
		var err error
		pod, err = ipam.ParsePrefix(n.PodCIDR)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(p.Child("podCIDR"), n.PodCIDR, err.Error()))
		case c.cluster.IsValid() && (!c.cluster.Contains(pod.Addr()) || pod.Bits() < c.cluster.Bits()):
			errs = append(errs, field.Invalid(p.Child("podCIDR"), n.PodCIDR, fmt.Sprintf("must be inside cluster.clusterCIDR %s", c.cluster)))
		case pod.Bits() > ipam.MaxPodCIDRBits:
			errs = append(errs, field.Invalid(p.Child("podCIDR"), n.PodCIDR, fmt.Sprintf("leaves no room for pods: use /%d or shorter", ipam.MaxPodCIDRBits)))
		}
	}
	if subnet.IsValid() {
		for _, other := range []struct {
			name string
			p    netip.Prefix
		}{{"cluster.clusterCIDR", c.cluster}, {"cluster.serviceCIDR", c.service}} {
			if other.p.IsValid() && subnet.Overlaps(other.p) {
				errs = append(errs, field.Invalid(p.Child("subnet"), n.Subnet, fmt.Sprintf("overlaps %s %s: choose ranges that do not intersect", other.name,
					other.p)))
			}
		}
	}
	errs = append(errs, validateNodeLabels(p.Child("labels"), n.Labels)...)
	errs = append(errs, validateTaints(p.Child("taints"), n.Taints)...)
	switch {
	case n.MaxPods < 1:
		errs = append(errs, field.Invalid(p.Child("maxPods"), n.MaxPods, "must be at least 1"))
	case pod.IsValid() && pod.Bits() <= ipam.MaxPodCIDRBits:
		if room := int64(1)<<(32-pod.Bits()) - 4; int64(n.MaxPods) > room {
			errs = append(errs, field.Invalid(p.Child("maxPods"), n.MaxPods,
				fmt.Sprintf("pod CIDR %s holds only %d pod addresses: lower maxPods or use a larger pod CIDR", pod, room)))
		}
	}
	return errs
}

// kubeletLabelKeys are the labels in the kubernetes.io and k8s.io namespaces that a kubelet may
// set on its own Node; any other key there makes the kubelet refuse to start.
var (
	kubeletLabelKeys = []string{
		"kubernetes.io/hostname", "kubernetes.io/arch", "kubernetes.io/os",
		"beta.kubernetes.io/arch", "beta.kubernetes.io/os", "beta.kubernetes.io/instance-type",
		"node.kubernetes.io/instance-type", "topology.kubernetes.io/region", "topology.kubernetes.io/zone",
		"failure-domain.beta.kubernetes.io/region", "failure-domain.beta.kubernetes.io/zone",
	}
	kubeletLabelNamespaces = []string{"kubelet.kubernetes.io", "node.kubernetes.io"}
)

func validateNodeLabels(p *field.Path, labels map[string]string) field.ErrorList {
	var errs field.ErrorList
	for _, k := range sortedKeys(labels) {
		v := labels[k]
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(p.Key(k), k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			errs = append(errs, field.Invalid(p.Key(k), v, msg))
		}
		if k == LabelHyperVIsolation {
			errs = append(errs, field.Forbidden(p.Key(k), "kubewin sets this label on the nodes of images baked with Hyper-V isolation "+
				"(the kubewin-node provisioner's hyperv_isolation): remove it, and bake such an image to get it"))
			continue
		}
		if ns, _, ok := strings.Cut(k, "/"); ok && isKubernetesNamespace(ns) && !kubeletMaySet(k, ns) {
			errs = append(errs, field.Forbidden(p.Key(k), fmt.Sprintf(
				"a kubelet may not set labels in the %s namespace except %s and the %s namespaces: apply this label with kubectl or use your own prefix (e.g. "+
					"example.com/%s)",
				ns, strings.Join(kubeletLabelKeys, ", "), strings.Join(kubeletLabelNamespaces, ", "), k[len(ns)+1:])))
		}
	}
	return errs
}

func isKubernetesNamespace(ns string) bool {
	for _, d := range []string{"kubernetes.io", "k8s.io"} {
		if ns == d || strings.HasSuffix(ns, "."+d) {
			return true
		}
	}
	return false
}

func kubeletMaySet(key, ns string) bool {
	if slices.Contains(kubeletLabelKeys, key) {
		return true
	}
	for _, allowed := range kubeletLabelNamespaces {
		if ns == allowed || strings.HasSuffix(ns, "."+allowed) {
			return true
		}
	}
	return false
}

func validateTaints(p *field.Path, taints []Taint) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, t := range taints {
		ip := p.Index(i)
		for _, msg := range validation.IsQualifiedName(t.Key) {
			errs = append(errs, field.Invalid(ip.Child("key"), t.Key, msg))
		}
		for _, msg := range validation.IsValidLabelValue(t.Value) {
			errs = append(errs, field.Invalid(ip.Child("value"), t.Value, msg))
		}
		if !slices.Contains(TaintEffects, t.Effect) {
			errs = append(errs, field.NotSupported(ip.Child("effect"), t.Effect, TaintEffects))
		}
		if id := t.Key + ":" + t.Effect; seen[id] {
			errs = append(errs, field.Duplicate(ip, id))
		} else {
			seen[id] = true
		}
	}
	return errs
}

func (n *Network) validate(p *field.Path, runtime RuntimeName) field.ErrorList {
	var errs field.ErrorList
	if !slices.Contains(NetworkModes, n.Mode) {
		errs = append(errs, field.NotSupported(p.Child("mode"), n.Mode, NetworkModes))
	}
	if n.CNI == removedWinCNI {
		// wincni.exe was never released: it was a binary committed to github.com/Microsoft/SDN
		// (Kubernetes/windows/cni/wincni.exe), with no version or checksum to verify, and
		// acs-engine's Update-WinCNI (parts/k8s/windowscnifunc.ps1) replaced it with win-bridge.exe
		// from the same repository. No image holds it, so a node configured for it gets no pod network.
		errs = append(errs, field.Invalid(p.Child("cni"), n.CNI, "wincni.exe has no release and no kubewin image contains it: "+
			"remove network.cni or set it to win-bridge, which programs the same l2bridge network with the CNI plugins release's win-bridge.exe"))
	} else if !slices.Contains(CNIFlavours, n.CNI) {
		errs = append(errs, field.NotSupported(p.Child("cni"), n.CNI, CNIFlavours))
	} else if allowed := CNIFlavoursFor(n.Mode); len(allowed) > 0 && !slices.Contains(allowed, n.CNI) {
		errs = append(errs, field.NotSupported(p.Child("cni"), n.CNI, allowed))
	}
	if n.CNI == CNIWinOverlay && runtime != RuntimeContainerd {
		errs = append(errs, field.Invalid(p.Child("cni"), n.CNI, "win-overlay needs the containerd runtime: set runtime.name to containerd"))
	}
	if !networkNameRE.MatchString(n.Name) {
		errs = append(errs, field.Invalid(p.Child("name"), n.Name, "must be 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit"))
	}
	if strings.TrimSpace(n.InterfaceName) == "" {
		errs = append(errs, field.Required(p.Child("interfaceName"), "the host network adapter, e.g. Ethernet"))
	}
	if n.Mode == NetworkModeOverlay {
		// HNS takes the VNI of a peer's subnet in 16 bits (hcn RemoteSubnetRoutePolicySetting
		// IsolationId uint16), and flannel's Windows lease carries it so (vxlanLeaseAttrs VNI
		// uint16); below 4096 Windows refuses it (flannel pkg/backend/vxlan/vxlan_windows.go).
		if n.VNI < DefaultVNI || n.VNI > MaxWindowsVNI {
			errs = append(errs, field.Invalid(p.Child("vni"), n.VNI,
				fmt.Sprintf("Windows overlay networks need a VNI from %d to %d (flannel's vxlan backend must use the same)", DefaultVNI, MaxWindowsVNI)))
		}
		if n.VXLANPort != VXLANPort {
			errs = append(errs, field.Invalid(p.Child("vxlanPort"), n.VXLANPort, fmt.Sprintf("Windows supports only UDP port %d for VXLAN", VXLANPort)))
		}
	} else {
		if n.VNI != 0 {
			errs = append(errs, field.Forbidden(p.Child("vni"), "applies only to network mode overlay"))
		}
		if n.VXLANPort != 0 {
			errs = append(errs, field.Forbidden(p.Child("vxlanPort"), "applies only to network mode overlay"))
		}
	}
	return errs
}

// CNIFlavoursFor lists the CNI flavours a network mode accepts, default first.
func CNIFlavoursFor(mode NetworkMode) []CNIFlavour {
	switch mode {
	case NetworkModeL2Bridge, NetworkModeHostGateway:
		return []CNIFlavour{CNIWinBridge}
	case NetworkModeOverlay:
		return []CNIFlavour{CNIWinOverlay}
	case NetworkModeExternal:
		return []CNIFlavour{CNINone}
	}
	return nil
}

func (r *Runtime) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if !slices.Contains(RuntimeNames, r.Name) {
		errs = append(errs, field.NotSupported(p.Child("name"), r.Name, RuntimeNames))
	}
	if !strings.HasPrefix(r.Endpoint, "npipe://") {
		errs = append(errs, field.Invalid(p.Child("endpoint"), r.Endpoint, "must be a Windows named pipe such as "+ContainerdEndpoint))
	}
	return errs
}

func (k *KubeProxy) validate(p *field.Path, mode NetworkMode, podCIDR string) field.ErrorList {
	var errs field.ErrorList
	if !slices.Contains(ProxyModes, k.Mode) {
		errs = append(errs, field.NotSupported(p.Child("mode"), k.Mode, ProxyModes))
	}
	if k.SourceVIP == "" {
		return errs
	}
	a, err := ipam.ParseAddr(k.SourceVIP)
	switch {
	case mode != NetworkModeOverlay:
		errs = append(errs, field.Forbidden(p.Child("sourceVIP"), "applies only to network mode overlay"))
	case err != nil:
		errs = append(errs, field.Invalid(p.Child("sourceVIP"), k.SourceVIP, err.Error()))
	default:
		if pod, err := ipam.ParsePrefix(podCIDR); err == nil && !pod.Contains(a) {
			errs = append(errs, field.Invalid(p.Child("sourceVIP"), k.SourceVIP, fmt.Sprintf("must be inside node.podCIDR %s", pod)))
		}
	}
	return errs
}

func (k *Kubelet) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, name := range sortedKeys(k.ExtraArgs) {
		if !flagNameRE.MatchString(name) {
			errs = append(errs, field.Invalid(p.Child("extraArgs").Key(name), name,
				`must be a flag name without leading dashes, e.g. "v" or "image-gc-high-threshold"`))
		}
	}
	for _, q := range []struct{ name, value string }{
		{"systemReservedMemory", k.SystemReservedMemory}, {"kubeReservedMemory", k.KubeReservedMemory}, {"evictionHardMemory", k.EvictionHardMemory},
	} {
		if q.value == "" {
			continue
		}
		if v, err := resource.ParseQuantity(q.value); err != nil || v.Sign() < 0 {
			errs = append(errs, field.Invalid(p.Child(q.name), q.value, `must be a non-negative memory quantity such as "1536Mi" or "2Gi"`))
		}
	}
	if a := k.AzureContainerRegistry; a != nil {
		ap := p.Child("azureContainerRegistry")
		if a.Cloud == "" {
			errs = append(errs, field.Required(ap.Child("cloud"), "the Azure cloud, e.g. AzurePublicCloud"))
		}
		for _, id := range []struct{ name, value string }{{"tenantID", a.TenantID}, {"identityClientID", a.IdentityClientID}} {
			if !guidRE.MatchString(id.value) {
				errs = append(errs, field.Invalid(ap.Child(id.name), id.value, "must be a GUID such as 00000000-0000-0000-0000-000000000000"))
			}
		}
	}
	return errs
}

// Validate returns every problem in m with its field path.
func (m *ImageManifest) Validate() field.ErrorList {
	errs := validateTypeMeta(m.APIVersion, m.Kind, KindImageManifest)
	if !slices.Contains(WindowsBuilds, m.WindowsBuild) {
		allowed := make([]string, len(WindowsBuilds))
		for i, b := range WindowsBuilds {
			allowed[i] = strconv.FormatUint(uint64(b), 10)
		}
		errs = append(errs, field.NotSupported(field.NewPath("windowsBuild"), strconv.FormatUint(uint64(m.WindowsBuild), 10), allowed))
	}
	kp := field.NewPath("kubernetesVersion")
	if v, err := kubeversion.Parse(m.KubernetesVersion); err != nil {
		errs = append(errs, field.Invalid(kp, m.KubernetesVersion, err.Error()))
	} else if err := kubeversion.CheckSupported(v); err != nil {
		errs = append(errs, field.Invalid(kp, m.KubernetesVersion, err.Error()))
	}
	rp := field.NewPath("runtime")
	if !slices.Contains(RuntimeNames, m.Runtime.Name) {
		errs = append(errs, field.NotSupported(rp.Child("name"), m.Runtime.Name, RuntimeNames))
	}
	if m.Runtime.Version == "" {
		errs = append(errs, field.Required(rp.Child("version"), "the runtime version, e.g. 2.1.4"))
	}
	switch {
	case m.Runtime.Name == RuntimeDocker && m.Runtime.CRIDockerdVersion == "":
		errs = append(errs, field.Required(rp.Child("criDockerdVersion"),
			"Kubernetes 1.24 and later reach Docker only through cri-dockerd: bake cri-dockerd into the image"))
	case m.Runtime.Name != RuntimeDocker && m.Runtime.CRIDockerdVersion != "":
		errs = append(errs, field.Forbidden(rp.Child("criDockerdVersion"), "applies only to the docker runtime"))
	}
	pp := field.NewPath("pauseImage")
	if !imageRefRE.MatchString(m.PauseImage.Reference) {
		errs = append(errs, field.Invalid(pp.Child("reference"), m.PauseImage.Reference, "must be an image reference such as registry.k8s.io/pause:3.10"))
	}
	if !digestRE.MatchString(m.PauseImage.Digest) {
		errs = append(errs, field.Invalid(pp.Child("digest"), m.PauseImage.Digest, `must be "sha256:" followed by 64 lower-case hex digits`))
	}
	if a := m.PauseImage.Archive; a != "" && !slices.ContainsFunc(m.Files, func(f File) bool { return f.Path == a }) {
		errs = append(errs, field.Invalid(pp.Child("archive"), a, "must be the path of one of the files listed in files"))
	}
	errs = append(errs, m.validateIsolation(field.NewPath("isolation"))...)
	errs = append(errs, m.validateWorkloadImages(field.NewPath("workloadImages"))...)
	if m.NodebootVersion == "" {
		errs = append(errs, field.Required(field.NewPath("nodebootVersion"), "the nodeboot version baked into the image"))
	}
	if v := m.ACRCredentialProvider; v != "" && !slices.ContainsFunc(m.Files, func(f File) bool { return f.Path == ACRCredentialProviderPath }) {
		errs = append(errs, field.Invalid(field.NewPath("acrCredentialProvider"), v, "files must list "+ACRCredentialProviderPath))
	}
	return append(errs, validateFiles(field.NewPath("files"), m.Files)...)
}

func (m *ImageManifest) validateWorkloadImages(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	archives := map[string]int{}
	for i, w := range m.WorkloadImages {
		ip := p.Index(i)
		if !imageRefRE.MatchString(w.Reference) {
			errs = append(errs, field.Invalid(ip.Child("reference"), w.Reference,
				"must be an image reference such as mcr.microsoft.com/windows/nanoserver:ltsc2022"))
		}
		if !digestRE.MatchString(w.Digest) {
			errs = append(errs, field.Invalid(ip.Child("digest"), w.Digest, `must be "sha256:" followed by 64 lower-case hex digits`))
		}
		if err := CheckImageBuild(m.WindowsBuild, w.OSVersion, m.HyperV()); err != nil {
			errs = append(errs, field.Invalid(ip.Child("osVersion"), w.OSVersion, err.Error()))
		}
		if w.Size <= 0 {
			errs = append(errs, field.Invalid(ip.Child("size"), w.Size, "must be the image's size in bytes"))
		}
		switch j, dup := archives[w.Archive]; {
		case w.Archive == "":
			// Imported by the bake, which deleted the archive.
		case !slices.ContainsFunc(m.Files, func(f File) bool { return f.Path == w.Archive }):
			errs = append(errs, field.Invalid(ip.Child("archive"), w.Archive, "must be the path of one of the files listed in files"))
		case dup:
			errs = append(errs, field.Duplicate(ip.Child("archive"), fmt.Sprintf("%s (the archive of workloadImages[%d])", w.Archive, j)))
		case w.Archive == m.PauseImage.Archive:
			errs = append(errs, field.Duplicate(ip.Child("archive"), w.Archive+" (the pause image's archive)"))
		default:
			archives[w.Archive] = i
		}
	}
	return errs
}

// validateIsolation checks the isolation modes: known, each once, process among them, and
// hyperv only with containerd, whose runhcs-wcow-hypervisor runtime handler the bake configures
// (Docker Engine has no runtime handler a Kubernetes RuntimeClass can select).
func (m *ImageManifest) validateIsolation(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(m.Isolation) == 0 {
		return nil
	}
	seen := map[Isolation]bool{}
	for i, mode := range m.Isolation {
		switch {
		case !slices.Contains(Isolations, mode):
			errs = append(errs, field.NotSupported(p.Index(i), mode, Isolations))
		case seen[mode]:
			errs = append(errs, field.Duplicate(p.Index(i), mode))
		case mode == IsolationHyperV && m.Runtime.Name != RuntimeContainerd:
			errs = append(errs, field.Invalid(p.Index(i), mode, fmt.Sprintf(
				"Hyper-V isolation is configured only with containerd (its runhcs-wcow-hypervisor runtime handler), and the image's runtime is %s: "+
					"bake a containerd image, or leave hyperv out", m.Runtime.Name)))
		}
		seen[mode] = true
	}
	if !seen[IsolationProcess] {
		errs = append(errs, field.Required(p, "process isolation is always configured: list process first, e.g. [process, hyperv]"))
	}
	return errs
}

func validateFiles(p *field.Path, files []File) field.ErrorList {
	var errs field.ErrorList
	if len(files) == 0 {
		return append(errs, field.Required(p, "list every file of the payload with its sha256"))
	}
	seen := map[string]int{}
	for i, f := range files {
		ip := p.Index(i)
		if err := ValidatePayloadPath(f.Path); err != nil {
			errs = append(errs, field.Invalid(ip.Child("path"), f.Path, err.Error()))
		}
		// Windows paths are case-insensitive: two entries differing in case are one file.
		if j, dup := seen[strings.ToLower(f.Path)]; dup {
			errs = append(errs, field.Duplicate(ip.Child("path"), fmt.Sprintf("%s (same file as files[%d] on Windows)", f.Path, j)))
		} else {
			seen[strings.ToLower(f.Path)] = i
		}
		if !sha256RE.MatchString(f.SHA256) {
			errs = append(errs, field.Invalid(ip.Child("sha256"), f.SHA256, "must be 64 lower-case hex digits"))
		}
		if f.Size < 0 {
			errs = append(errs, field.Invalid(ip.Child("size"), f.Size, "must not be negative"))
		}
		if f.Unpack != "" {
			if err := ValidatePayloadPath(f.Unpack); err != nil {
				errs = append(errs, field.Invalid(ip.Child("unpack"), f.Unpack, err.Error()))
			} else if !IsArchive(f.Path) {
				errs = append(errs, field.Invalid(ip.Child("path"), f.Path, "an unpacked file must end in .zip, .tar.gz or .tgz"))
			}
		}
	}
	return errs
}

// IsArchive reports whether a payload path names an archive bake can unpack.
func IsArchive(path string) bool {
	p := strings.ToLower(path)
	return strings.HasSuffix(p, ".zip") || strings.HasSuffix(p, ".tar.gz") || strings.HasSuffix(p, ".tgz")
}

// ValidatePayloadPath checks a payload path: relative, forward slashes, no "." or ".." parts.
func ValidatePayloadPath(path string) error {
	if path == "" {
		return fmt.Errorf("must not be empty")
	}
	if strings.ContainsAny(path, `\:*?"<>|`) {
		return fmt.Errorf(`must be relative with forward slashes and none of \:*?"<>|`)
	}
	for _, part := range strings.Split(path, "/") {
		if part == "" || part == "." || part == ".." {
			return fmt.Errorf(`must be relative, without empty, "." or ".." parts`)
		}
	}
	return nil
}

func validateHostPort(hp string) error {
	host, port, err := net.SplitHostPort(hp)
	if err != nil || host == "" {
		return fmt.Errorf("must be host:port without a scheme, e.g. 10.0.0.4:6443")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port must be a number from 1 to 65535")
	}
	return nil
}

func requiredPrefix(p *field.Path, s string, errs field.ErrorList) (netip.Prefix, field.ErrorList) {
	if s == "" {
		return netip.Prefix{}, append(errs, field.Required(p, "an IPv4 CIDR such as 10.244.0.0/16"))
	}
	pfx, err := ipam.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, append(errs, field.Invalid(p, s, err.Error()))
	}
	return pfx, errs
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
