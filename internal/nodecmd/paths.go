// Package nodecmd renders how a Windows node's components run: the kubelet's and kube-proxy's
// command lines and configuration files, and the container runtime's configuration, for every
// supported Kubernetes minor and runtime. It is pure: nodeboot writes what it returns.
package nodecmd

import "strings"

// Paths are where things live on a Windows node. Kubernetes accepts Windows paths in flags and
// configuration files alike.
type Paths struct {
	BinDir               string // kubelet.exe, kube-proxy.exe, nodeboot.exe
	KubeletConfig        string
	KubeletKubeconfig    string
	KubeletCertDir       string
	ClusterCA            string
	KubeProxyConfig      string
	KubeProxyKubeconfig  string
	CNIBinDir            string
	CNIConfDir           string
	ContainerdConfigFile string
	// ContainerdBinDir holds containerd.exe and ctr.exe, as containerd's Windows release unpacks.
	ContainerdBinDir string
	// DockerBinDir holds dockerd.exe and docker.exe, as Docker's Windows static build unpacks.
	DockerBinDir string
	// CRIDockerd is cri-dockerd.exe where its Windows release zip unpacks into BinDir: the zip
	// holds cri-dockerd/cri-dockerd.exe (Mirantis/cri-dockerd packaging/static/Makefile,
	// target cross-win).
	CRIDockerd string
	LogDir     string
	// CustomData is where the provisioner hands the NodeConfig to the machine (Azure's custom data).
	CustomData string
	// NodebootDir holds nodeboot's state, its copy of the NodeConfig and the cluster CA pin result.
	NodebootDir string
	// ImageManifest is the manifest baked into the image; its file paths are relative to PayloadRoot.
	ImageManifest string
	PayloadRoot   string
	// KubeletRootDir is the kubelet's --root-dir (its default on Windows): pods' volumes and
	// plugins live under it.
	KubeletRootDir string
	// CNIStateDir is where CNI keeps its state on the system drive: host-local's address leases
	// (containernetworking/plugins plugins/ipam/host-local/backend/disk: /var/lib/cni/networks)
	// and libcni's result cache (containernetworking/cni libcni: CacheDir /var/lib/cni).
	CNIStateDir string
	// CredentialProviderConfig is the kubelet's --image-credential-provider-config and
	// CredentialProviderBinDir its --image-credential-provider-bin-dir, which holds the image's
	// credential providers (v1alpha1.ACRCredentialProviderPath); AzureConfig is the Azure
	// configuration the ACR credential provider reads. The paths are AKS's on Windows nodes
	// (its Windows CSE: C:\k\credential-provider-config.yaml, C:\var\lib\kubelet\credential-provider,
	// C:\k\azure.json).
	CredentialProviderConfig string
	CredentialProviderBinDir string
	AzureConfig              string
}

// Payload is the node path of a payload file listed in the image manifest ("k/kubelet.exe").
func (p Paths) Payload(path string) string {
	return strings.TrimSuffix(p.PayloadRoot, `\`) + `\` + strings.ReplaceAll(path, "/", `\`)
}

// DefaultPaths is the layout nodeboot bakes into every image.
func DefaultPaths() Paths {
	return Paths{
		BinDir:                   `C:\k`,
		KubeletConfig:            `C:\var\lib\kubelet\config.yaml`,
		KubeletKubeconfig:        `C:\etc\kubernetes\kubelet.conf`,
		KubeletCertDir:           `C:\var\lib\kubelet\pki`,
		ClusterCA:                `C:\etc\kubernetes\pki\ca.crt`,
		KubeProxyConfig:          `C:\var\lib\kube-proxy\config.yaml`,
		KubeProxyKubeconfig:      `C:\etc\kubernetes\kubelet.conf`,
		CNIBinDir:                `C:\opt\cni\bin`,
		CNIConfDir:               `C:\etc\cni\net.d`,
		ContainerdConfigFile:     `C:\Program Files\containerd\config.toml`,
		ContainerdBinDir:         `C:\Program Files\containerd\bin`,
		DockerBinDir:             `C:\Program Files\docker`,
		CRIDockerd:               `C:\k\cri-dockerd\cri-dockerd.exe`,
		LogDir:                   `C:\var\log\kubernetes`,
		CustomData:               `C:\AzureData\CustomData.bin`,
		NodebootDir:              `C:\ProgramData\kubewin\nodeboot`,
		ImageManifest:            `C:\ProgramData\kubewin\image-manifest.json`,
		PayloadRoot:              `C:\`,
		KubeletRootDir:           `C:\var\lib\kubelet`,
		CNIStateDir:              `C:\var\lib\cni`,
		CredentialProviderConfig: `C:\k\credential-provider-config.yaml`,
		CredentialProviderBinDir: `C:\var\lib\kubelet\credential-provider`,
		AzureConfig:              `C:\k\azure.json`,
	}
}

// DiagnosticsBundle is where `nodeboot diagnose` writes a node's diagnostics bundle by
// default (owner-only; each run replaces it).
func (p Paths) DiagnosticsBundle() string { return p.NodebootDir + `\diagnostics.tar.gz` }

// ContainerdLog is the log file containerd writes itself (--log-file).
func (p Paths) ContainerdLog() string { return p.LogDir + `\containerd.log` }
