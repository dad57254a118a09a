// Package nodefiles composes everything nodeboot writes on a Windows node for its components
// at join time (kubelet, kube-proxy, cri-dockerd, CNI) from a NodeConfig, the image manifest and
// the facts found at boot. containerd's configuration depends on the image alone and is baked.
package nodefiles

import (
	"fmt"
	"net/netip"
	"path"
	"strings"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/cni"
	"github.com/kubewin/kubewin/internal/ipam"
	"github.com/kubewin/kubewin/internal/nodecmd"
)

// Facts are what nodeboot learns on the node before rendering.
type Facts struct {
	NodeName string
	NodeIP   netip.Addr
	// NodeSubnet is the subnet of the node's adapter (or node.subnet), excluded from outbound
	// NAT on bridged networks.
	NodeSubnet netip.Prefix
	PodCIDR    netip.Prefix
	// Memory is the machine's physical memory in bytes, which the kubelet's memory
	// reservations are sized from (zero: not known, none sized).
	Memory uint64
}

// Plan is the rendered result: files to write and the command line of each service.
type Plan struct {
	// Files maps a path on the node to its content.
	Files map[string][]byte
	// Services maps a Windows service name (kubelet, kube-proxy, cri-dockerd) to its arguments.
	Services map[string][]string
}

// Render renders the plan for a node.
func Render(c *v1alpha1.NodeConfig, m *v1alpha1.ImageManifest, f Facts, paths nodecmd.Paths) (*Plan, error) {
	in := nodecmd.Input{Config: c, Manifest: m, NodeName: f.NodeName, NodeIP: f.NodeIP, Memory: f.Memory, Paths: paths}
	if c.Network.Mode == v1alpha1.NetworkModeOverlay {
		vip, err := sourceVIP(c, f.PodCIDR)
		if err != nil {
			return nil, err
		}
		in.SourceVIP = vip
	}
	p := &Plan{Files: map[string][]byte{}, Services: map[string][]string{}}
	for name, render := range map[string]func(nodecmd.Input) (*nodecmd.Component, error){
		"kubelet":     nodecmd.Kubelet,
		"kube-proxy":  nodecmd.KubeProxy,
		"cri-dockerd": nodecmd.CRIDockerd,
	} {
		comp, err := render(in)
		if err != nil {
			return nil, fmt.Errorf("render %s: %w", name, err)
		}
		if comp == nil {
			continue
		}
		for file, content := range comp.Files {
			p.Files[file] = content
		}
		if comp.Args != nil {
			p.Services[name] = comp.Args
		}
	}
	if c.Network.CNI != v1alpha1.CNINone {
		cin, err := cni.FromNodeConfig(c, f.PodCIDR, f.NodeIP, f.NodeSubnet)
		if err != nil {
			return nil, err
		}
		conf, err := cni.Render(cin)
		if err != nil {
			return nil, fmt.Errorf("render CNI config: %w", err)
		}
		p.Files[windowsJoin(paths.CNIConfDir, cni.FileName)] = conf
	}
	return p, nil
}

// sourceVIP is kubeProxy.sourceVIP, or the pod CIDR's second address, which an overlay network
// leaves to the host.
func sourceVIP(c *v1alpha1.NodeConfig, pod netip.Prefix) (netip.Addr, error) {
	if c.KubeProxy.SourceVIP != "" {
		return ipam.ParseAddr(c.KubeProxy.SourceVIP)
	}
	b, err := ipam.BridgeAddresses(pod)
	if err != nil {
		return netip.Addr{}, err
	}
	return b.HostEndpoint, nil
}

func windowsJoin(dir, name string) string {
	return strings.TrimSuffix(dir, `\`) + `\` + path.Base(name)
}
