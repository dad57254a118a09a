package nodecmd

import "github.com/kubewin/kubewin/internal/api/v1alpha1"

// InboundPort is a port, or a range of ports, a node serves, opened in the host firewall when
// the image is baked.
type InboundPort struct {
	Name     string // the firewall rule's name
	Protocol string // TCP or UDP
	Port     int
	// LastPort ends a range of ports that starts at Port; zero for Port alone.
	LastPort int
}

// Health check node ports are allocated from the API server's NodePort range, by default
// 30000-32767 (kube-apiserver --service-node-port-range).
const (
	NodePortFirst = 30000
	NodePortLast  = 32767
)

// InboundPorts are the firewall rules a bake adds, the one list of what a node opens:
//   - the kubelet's API (sig-windows-tools hostprocess/PrepareNode.ps1: New-NetFirewallRule
//     -Name kubelet ... -LocalPort 10250);
//   - VXLAN, for overlay networks (flannel's vxlan backend on Windows, UDP 4789);
//   - kube-proxy's health endpoint, which load balancers probe (KubeProxyConfiguration
//     healthzBindAddress, default 0.0.0.0:10256);
//   - the NodePort range, which holds the healthCheckNodePort that kube-proxy serves for each
//     LoadBalancer service with externalTrafficPolicy Local, the port through which a cloud
//     load balancer learns which nodes hold its endpoints (k8s.io/api core/v1
//     ServiceSpec.HealthCheckNodePort), and the services' NodePorts.
//
// aks-engine turns the whole firewall off instead ("Turn off Firewall to enable pods to talk to
// service endpoints": netsh advfirewall set allprofiles state off, Azure/aks-engine
// staging/provisioning/windows/kubeletstart.ps1).
var InboundPorts = []InboundPort{
	{Name: "kubelet", Protocol: "TCP", Port: 10250},
	{Name: "kubewin-vxlan", Protocol: "UDP", Port: v1alpha1.VXLANPort},
	{Name: "kubewin-kube-proxy-healthz", Protocol: "TCP", Port: 10256},
	{Name: "kubewin-node-ports", Protocol: "TCP", Port: NodePortFirst, LastPort: NodePortLast},
}

// ScanExclusions are the paths a bake keeps the antivirus out of: the node's binaries, the CNI
// plugins and the runtime.
func (p Paths) ScanExclusions() []string {
	return []string{p.BinDir, p.CNIBinDir, `C:\ProgramData\containerd`, `C:\Program Files\containerd`}
}

// OwnedRoots are the directories and files of a node that hold what kubewin puts there — the
// payload, the runtime it unpacks, configuration, credentials, state and logs — at the highest
// level that is not a system directory. Removing what appeared under them since a point in
// time undoes a bake and a join done since then (services, firewall rules and HNS networks
// aside). Pulled container images live in the runtime's root and are not included.
func (p Paths) OwnedRoots() []string {
	return []string{
		p.BinDir, `C:\var`, `C:\etc`, `C:\opt`, `C:\ProgramData\kubewin`,
		`C:\Program Files\containerd`, p.DockerBinDir, p.CustomData,
	}
}
