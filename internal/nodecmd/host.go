package nodecmd

import "github.com/kubewin/kubewin/internal/api/v1alpha1"

// InboundPort is a port a node serves, opened in the host firewall when the image is baked.
type InboundPort struct {
	Name     string // the firewall rule's name
	Protocol string // TCP or UDP
	Port     int
}

// InboundPorts are the firewall rules a bake adds: the kubelet's API and VXLAN (overlay).
var InboundPorts = []InboundPort{
	{Name: "kubelet", Protocol: "TCP", Port: 10250},
	{Name: "kubewin-vxlan", Protocol: "UDP", Port: v1alpha1.VXLANPort},
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
