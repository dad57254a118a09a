package controlplane

import (
	"context"
	"fmt"
	"net"
	"strconv"
)

// KubeadmFiles are the files kubeadm made on a machine (`kubeadm init phase certs all` and
// `kubeadm init phase kubeconfig`), as paths on this host, that a control plane runs from.
type KubeadmFiles struct {
	// PKIDir is kubeadm's certificatesDir.
	PKIDir string `json:"pkiDir"`
	// Admin and SuperAdmin are kubeadm's admin.conf and super-admin.conf.
	Admin      string `json:"admin"`
	SuperAdmin string `json:"superAdmin"`
	// ControllerManager and Scheduler are kubeconfigs of system:kube-controller-manager and
	// system:kube-scheduler that reach the API server at the control plane endpoint.
	ControllerManager string `json:"controllerManager"`
	Scheduler         string `json:"scheduler"`
	// ServerName, when set, is the name the API server's certificate is checked for: the control
	// plane endpoint's name, when the API server is bound at an address its certificate lacks.
	ServerName string `json:"serverName,omitempty"`
}

// StartKubeadm runs a control plane, in cfg.Dir, from the certificates and kubeconfigs kubeadm
// made on a machine, with the API server bound at endpoint (host:port, the control plane
// endpoint of kubeadm's configuration). It does what `kubeadm init` does after those phases up to
// its uploads: etcd, the API server, the kubeadm:cluster-admins binding, the controller manager
// (signing with kubeadm's CA, node IPAM on cfg.ClusterCIDR) and the scheduler. The phases that
// write cluster state (upload-config, upload-certs, bootstrap-token, addons) are the caller's,
// with kubeadm on the machine. etcd runs on loopback without TLS, not with kubeadm's etcd
// certificates.
func StartKubeadm(ctx context.Context, cfg Config, files KubeadmFiles, endpoint string) (*ControlPlane, error) {
	host, portText, err := net.SplitHostPort(endpoint)
	if err != nil {
		return nil, fmt.Errorf("control plane endpoint %q: %w", endpoint, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || net.ParseIP(host) == nil {
		return nil, fmt.Errorf("control plane endpoint %q is not an IP address and port", endpoint)
	}
	version, err := BinaryVersion(cfg.BinDir)
	if err != nil {
		return nil, err
	}
	cp := &ControlPlane{Address: host, Ports: Ports{APIServer: port}, Kubeadm: &files, Version: version}
	return launch(cfg, cp, func(cp *ControlPlane) []step {
		return []step{
			{"etcd ready", func() error { return cp.startEtcd(ctx) }},
			{"kube-apiserver ready", func() error { return cp.startAPIServer(ctx) }},
			{"cluster-admin binding", func() error { return cp.bindClusterAdmins(ctx) }},
			{"kube-controller-manager and kube-scheduler started", cp.startControllers},
			{"controllers working", func() error { return cp.waitControllers(ctx) }},
		}
	})
}
