package v1alpha1

import "strconv"

// NetworkMode is the pod network topology of a Windows node (the original guides' topologies).
type NetworkMode string

const (
	// NetworkModeL2Bridge is an l2bridge HNS network whose pod CIDRs are routed by an upstream
	// router or a cloud route table (kubewin_pod_route).
	NetworkModeL2Bridge NetworkMode = "l2bridge"
	// NetworkModeHostGateway is the same l2bridge network with every node routing its peers' pod
	// CIDRs itself, reconciled from Node objects (like flannel's host-gw).
	NetworkModeHostGateway NetworkMode = "host-gateway"
	// NetworkModeOverlay is a win-overlay VXLAN network (VNI ≥ 4096, UDP 4789).
	NetworkModeOverlay NetworkMode = "overlay"
	// NetworkModeExternal leaves the pod network to a CNI shipped as HostProcess DaemonSets
	// (Calico, flannel, Antrea); nodeboot only prepares the node.
	NetworkModeExternal NetworkMode = "external"
)

// NetworkModes lists every NetworkMode, in documentation order.
var NetworkModes = []NetworkMode{NetworkModeL2Bridge, NetworkModeHostGateway, NetworkModeOverlay, NetworkModeExternal}

// CNIFlavour is the CNI plugin and configuration format written on the node.
type CNIFlavour string

const (
	// CNIWinBridge is containernetworking's win-bridge plugin.
	CNIWinBridge CNIFlavour = "win-bridge"
	// CNIWinOverlay is containernetworking's win-overlay plugin.
	CNIWinOverlay CNIFlavour = "win-overlay"
	// CNINone writes no CNI configuration (network mode external).
	CNINone CNIFlavour = "none"
)

// removedWinCNI is the original guides' wincni.exe format: validation refuses it with its replacement.
const removedWinCNI CNIFlavour = "wincni"

// CNIFlavours lists every CNIFlavour.
var CNIFlavours = []CNIFlavour{CNIWinBridge, CNIWinOverlay, CNINone}

// RuntimeName is the container runtime of a node.
type RuntimeName string

const (
	// RuntimeContainerd is containerd, the default.
	RuntimeContainerd RuntimeName = "containerd"
	// RuntimeDocker is Docker Engine, reached by the kubelet through cri-dockerd.
	RuntimeDocker RuntimeName = "docker"
)

// RuntimeNames lists every RuntimeName.
var RuntimeNames = []RuntimeName{RuntimeContainerd, RuntimeDocker}

// Isolation is how a Windows container is isolated from its host.
type Isolation string

const (
	// IsolationProcess shares the host's kernel: the container's image must match the host's
	// build (a down-level image fails with HCS_E_IMAGE_MISMATCH).
	IsolationProcess Isolation = "process"
	// IsolationHyperV runs each pod in a utility VM with its own kernel: images of the host's
	// build and of earlier builds run (a 2019 or 2022 image on a 2025 host). containerd only.
	IsolationHyperV Isolation = "hyperv"
)

// Isolations lists every Isolation.
var Isolations = []Isolation{IsolationProcess, IsolationHyperV}

// LabelHyperVIsolation is "true" on the nodes whose image was baked with Hyper-V isolation: the
// kubelet sets it on its own Node (--node-labels) from the image manifest. NodeRestriction lets a
// kubelet set any label outside the kubernetes.io and k8s.io namespaces (and a few within them),
// so kubewin.io is allowed (kubernetes staging/src/k8s.io/kubelet/pkg/apis/well_known_labels.go
// IsKubeletLabel; plugin/pkg/admission/noderestriction/admission.go). A NodeConfig may not set it.
const LabelHyperVIsolation = "kubewin.io/hyperv-isolation"

// RuntimeClassHyperV is the RuntimeClass a pod names to run Hyper-V isolated, which node pools of
// an image with Hyper-V isolation keep in the cluster (the provider's pool.HyperVRuntimeClass).
const RuntimeClassHyperV = "windows-hyperv"

// ProxyMode says how kube-proxy runs on the node.
type ProxyMode string

const (
	// ProxyModeKernelspace runs kube-proxy's winkernel proxier as a Windows service.
	ProxyModeKernelspace ProxyMode = "kernelspace"
	// ProxyModeNone leaves kube-proxy to a HostProcess DaemonSet (or to the CNI).
	ProxyModeNone ProxyMode = "none"
)

// ProxyModes lists every ProxyMode.
var ProxyModes = []ProxyMode{ProxyModeKernelspace, ProxyModeNone}

// WindowsBuild is the build number of a supported Windows Server release.
type WindowsBuild uint32

const (
	// WindowsServer2019 is Windows Server 2019 (10.0.17763, LTSC 2019).
	WindowsServer2019 WindowsBuild = 17763
	// WindowsServer2022 is Windows Server 2022 (10.0.20348, LTSC 2022).
	WindowsServer2022 WindowsBuild = 20348
	// WindowsServer2025 is Windows Server 2025 (10.0.26100, LTSC 2025).
	WindowsServer2025 WindowsBuild = 26100
)

// WindowsBuilds lists every supported WindowsBuild.
var WindowsBuilds = []WindowsBuild{WindowsServer2019, WindowsServer2022, WindowsServer2025}

// Release is the marketing name of the build ("2019", "2022", "2025"), or "" when unknown.
func (b WindowsBuild) Release() string {
	switch b {
	case WindowsServer2019:
		return "2019"
	case WindowsServer2022:
		return "2022"
	case WindowsServer2025:
		return "2025"
	}
	return ""
}

// ParseWindowsVersion reads a Windows Server release ("2022") or build number ("20348") and
// reports whether it is a supported one.
func ParseWindowsVersion(s string) (WindowsBuild, bool) {
	for _, b := range WindowsBuilds {
		if s == b.Release() || s == strconv.FormatUint(uint64(b), 10) {
			return b, true
		}
	}
	return 0, false
}

// OSVersion is the full OS version string ("10.0.20348"), as in node.kubernetes.io/windows-build.
func (b WindowsBuild) OSVersion() string { return "10.0." + strconv.FormatUint(uint64(b), 10) }

// Taint effects a NodeConfig may use.
var TaintEffects = []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}
