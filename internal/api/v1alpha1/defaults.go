package v1alpha1

import "github.com/kubewin/kubewin/internal/ipam"

// Defaults that Default fills in, and the cluster networks every kubewin cluster defaults to.
const (
	// DefaultClusterCIDR is a cluster's pod network when none is set (flannel's and kubeadm
	// guides' usual 10.244.0.0/16).
	DefaultClusterCIDR = "10.244.0.0/16"
	// DefaultServiceCIDR is a cluster's service network when none is set (kubeadm's default
	// serviceSubnet).
	DefaultServiceCIDR        = "10.96.0.0/12"
	DefaultClusterDomain      = "cluster.local"
	DefaultMaxPods            = 110
	DefaultInterfaceName      = "Ethernet"
	DefaultBridgeNetworkName  = "cbr0"
	DefaultOverlayNetworkName = "vxlan0"
	DefaultVNI                = 4096
	// MaxWindowsVNI is the largest VNI a Windows overlay can use: HNS takes it in 16 bits.
	MaxWindowsVNI = 1<<16 - 1
	VXLANPort     = 4789
	// ContainerdEndpoint is containerd's CRI named pipe.
	ContainerdEndpoint = "npipe:////./pipe/containerd-containerd"
	// CRIDockerdEndpoint is cri-dockerd's CRI named pipe, in front of Docker Engine.
	CRIDockerdEndpoint = "npipe:////./pipe/cri-dockerd"
)

// Default fills every unset field that has a default. It is idempotent.
func (c *NodeConfig) Default() {
	if c.Cluster.ClusterDomain == "" {
		c.Cluster.ClusterDomain = DefaultClusterDomain
	}
	if len(c.Cluster.ClusterDNS) == 0 {
		if svc, err := ipam.ParsePrefix(c.Cluster.ServiceCIDR); err == nil {
			if dns, err := ipam.Nth(svc, 10); err == nil {
				c.Cluster.ClusterDNS = []string{dns.String()}
			}
		}
	}
	if c.Node.MaxPods == 0 {
		c.Node.MaxPods = DefaultMaxPods
	}
	n := &c.Network
	if n.Mode == "" {
		n.Mode = NetworkModeL2Bridge
	}
	if n.CNI == "" {
		switch n.Mode {
		case NetworkModeOverlay:
			n.CNI = CNIWinOverlay
		case NetworkModeExternal:
			n.CNI = CNINone
		default:
			n.CNI = CNIWinBridge
		}
	}
	if n.Name == "" {
		n.Name = DefaultBridgeNetworkName
		if n.Mode == NetworkModeOverlay {
			n.Name = DefaultOverlayNetworkName
		}
	}
	if n.InterfaceName == "" {
		n.InterfaceName = DefaultInterfaceName
	}
	if n.Mode == NetworkModeOverlay {
		if n.VNI == 0 {
			n.VNI = DefaultVNI
		}
		if n.VXLANPort == 0 {
			n.VXLANPort = VXLANPort
		}
	}
	if c.Runtime.Name == "" {
		c.Runtime.Name = RuntimeContainerd
	}
	if c.Runtime.Endpoint == "" {
		switch c.Runtime.Name {
		case RuntimeContainerd:
			c.Runtime.Endpoint = ContainerdEndpoint
		case RuntimeDocker:
			c.Runtime.Endpoint = CRIDockerdEndpoint
		}
	}
	if c.KubeProxy.Mode == "" {
		c.KubeProxy.Mode = ProxyModeKernelspace
	}
}

// Redacted returns a copy safe to log or print: the bootstrap token is replaced.
func (c NodeConfig) Redacted() NodeConfig {
	if c.Cluster.BootstrapToken != "" {
		c.Cluster.BootstrapToken = Redaction
	}
	return c
}

// Redaction stands in for a secret in logs and error messages.
const Redaction = "<redacted>"
