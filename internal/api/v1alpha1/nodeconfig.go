package v1alpha1

// NodeConfig is what the provider hands a Windows node, through custom data, for nodeboot to
// join it to a cluster. It carries a bootstrap token: treat the whole document as a secret.
type NodeConfig struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`

	Cluster   Cluster   `json:"cluster"`
	Node      Node      `json:"node"`
	Network   Network   `json:"network"`
	Runtime   Runtime   `json:"runtime"`
	KubeProxy KubeProxy `json:"kubeProxy"`
	Kubelet   Kubelet   `json:"kubelet"`
}

// Cluster says which cluster to join and how to trust it.
type Cluster struct {
	// APIServerEndpoint is the API server as host:port (no scheme).
	APIServerEndpoint string `json:"apiServerEndpoint"`
	// CACertHashes pins the cluster CA: "sha256:<hex>" of its DER SubjectPublicKeyInfo, as
	// kubeadm's --discovery-token-ca-cert-hash.
	CACertHashes []string `json:"caCertHashes,omitempty"`
	// UnsafeSkipCAVerification joins without a CA pin. Only for throw-away clusters.
	UnsafeSkipCAVerification bool `json:"unsafeSkipCAVerification,omitempty"`
	// BootstrapToken is a kubeadm bootstrap token, "[a-z0-9]{6}.[a-z0-9]{16}".
	BootstrapToken string `json:"bootstrapToken"`
	// KubernetesVersion is the control plane's version ("v1.36.2"), used for the skew check.
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
	// ClusterCIDR is the pod network of the whole cluster.
	ClusterCIDR string `json:"clusterCIDR"`
	// ServiceCIDR is the service network.
	ServiceCIDR string `json:"serviceCIDR"`
	// ClusterDNS are the cluster DNS service IPs. Default: the tenth address of ServiceCIDR.
	ClusterDNS []string `json:"clusterDNS,omitempty"`
	// ClusterDomain is the DNS domain of the cluster. Default: cluster.local.
	ClusterDomain string `json:"clusterDomain,omitempty"`
}

// Node describes the node itself.
type Node struct {
	// Name is the Node object's name. Default: the computer name, lower-cased.
	Name string `json:"name,omitempty"`
	// IP is the node's address on Subnet. Default: the address of the interface named by
	// network.interfaceName, found at boot.
	IP string `json:"ip,omitempty"`
	// Subnet is the node (management) subnet, excluded from outbound NAT.
	Subnet string `json:"subnet,omitempty"`
	// PodCIDR is a static pod CIDR. When empty the node waits for the controller manager's
	// node IPAM to assign one.
	PodCIDR string `json:"podCIDR,omitempty"`
	// Labels are added to the Node at registration.
	Labels map[string]string `json:"labels,omitempty"`
	// Taints are added to the Node at registration.
	Taints []Taint `json:"taints,omitempty"`
	// MaxPods is the kubelet's pod limit. Default: 110.
	MaxPods int32 `json:"maxPods,omitempty"`
}

// Taint is a Node taint.
type Taint struct {
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Effect string `json:"effect"`
}

// Network selects the pod network topology and its CNI configuration.
type Network struct {
	// Mode is the topology. Default: l2bridge.
	Mode NetworkMode `json:"mode,omitempty"`
	// CNI is the plugin and config format. Default: win-overlay for overlay, none for external,
	// win-bridge otherwise. The original guides' wincni is refused: no image contains wincni.exe,
	// which was never released; win-bridge programs the same l2bridge network.
	CNI CNIFlavour `json:"cni,omitempty"`
	// Name is the HNS network name. Default: cbr0, or vxlan0 for overlay.
	Name string `json:"name,omitempty"`
	// InterfaceName is the host adapter the network binds to. Default: Ethernet.
	InterfaceName string `json:"interfaceName,omitempty"`
	// VNI is the VXLAN network identifier (overlay): 4096 to 65535 on Windows, the same on
	// every node (flannel nodes included). Default: 4096.
	VNI int32 `json:"vni,omitempty"`
	// VXLANPort is the VXLAN UDP port (overlay). Windows supports only 4789. Default: 4789.
	VXLANPort int32 `json:"vxlanPort,omitempty"`
}

// Runtime selects the container runtime.
type Runtime struct {
	// Name is containerd (default) or docker (through cri-dockerd).
	Name RuntimeName `json:"name,omitempty"`
	// Endpoint is the CRI endpoint. Default: the runtime's named pipe.
	Endpoint string `json:"endpoint,omitempty"`
}

// KubeProxy configures kube-proxy.
type KubeProxy struct {
	// Mode is kernelspace (a Windows service, default) or none (left to a DaemonSet).
	Mode ProxyMode `json:"mode,omitempty"`
	// EnableDSR turns on Direct Server Return for load-balanced traffic.
	EnableDSR bool `json:"enableDSR,omitempty"`
	// SourceVIP is the overlay source VIP. Default: reserved from the pod CIDR at boot.
	SourceVIP string `json:"sourceVIP,omitempty"`
}

// Kubelet configures the kubelet beyond what kubewin sets.
type Kubelet struct {
	// ExtraArgs are added to the kubelet command line as --key=value, after kubewin's own.
	ExtraArgs map[string]string `json:"extraArgs,omitempty"`
	// SystemReservedMemory is the memory reserved for Windows itself, as a quantity such as
	// "2Gi". Windows has no cgroups to fence the node's processes off from pods: reservations
	// only lower the node's allocatable memory, which the scheduler places pods against.
	// Default: 2Gi (the 2 GB AKS reserves on Windows nodes).
	SystemReservedMemory string `json:"systemReservedMemory,omitempty"`
	// KubeReservedMemory is the memory reserved for the kubelet, kube-proxy and the runtime.
	// Default: sized from the machine's memory as AKS does: 25% of the first 4 GiB, 20% of the
	// next 4, 10% of the next 8, 6% of the next 112 and 2% of the rest.
	KubeReservedMemory string `json:"kubeReservedMemory,omitempty"`
	// EvictionHardMemory is the kubelet's hard eviction threshold on memory.available: under
	// it the kubelet evicts pods. Default: 750Mi (AKS).
	EvictionHardMemory string `json:"evictionHardMemory,omitempty"`
	// AzureContainerRegistry has the kubelet pull images from Azure Container Registry as a
	// user-assigned managed identity the machine carries, through cloud-provider-azure's
	// acr-credential-provider, which the image must carry (ImageManifest.ACRCredentialProvider):
	// pods need no image pull secret.
	AzureContainerRegistry *AzureContainerRegistry `json:"azureContainerRegistry,omitempty"`
}

// AzureContainerRegistry is how the kubelet's credential provider authenticates to Azure
// Container Registry: the machine's managed identity, in its tenant and cloud. It holds no
// secret: the identity's token comes from the machine's instance metadata service.
type AzureContainerRegistry struct {
	// Cloud is the Azure cloud as cloud-provider-azure names it: AzurePublicCloud,
	// AzureUSGovernment, AzureChinaCloud, or a custom cloud's name.
	Cloud string `json:"cloud"`
	// ResourceManagerEndpoint is set for a custom cloud only: the credential provider reads the
	// cloud's endpoints from its metadata there.
	ResourceManagerEndpoint string `json:"resourceManagerEndpoint,omitempty"`
	// TenantID is the identity's tenant.
	TenantID string `json:"tenantID"`
	// IdentityClientID is the client ID of the user-assigned managed identity the machine
	// carries and that holds AcrPull on the registries.
	IdentityClientID string `json:"identityClientID"`
}
