// Package kubeadmboot writes the cloud-init user data that makes an Ubuntu machine a node of a
// kubeadm cluster: the first control plane (`kubeadm init --upload-certs`), further control
// planes (`kubeadm join --control-plane`, stacked etcd, the certificates downloaded with the
// certificate key) and workers (`kubeadm join`). The user data carries the kubeadm configuration
// (kubeadm.k8s.io/v1beta4) and a bootstrap script; the script reports on the serial console
// ("kubewin-boot:" lines), where boot diagnostics keep it. The package also reads user data back
// (the ARM test server's simulated machines boot from it) and the serial console (the provider
// learns the cluster CA from it), and writes the script that signs a short-lived admin
// certificate on a control plane, which the provider runs there through ARM's run command.
package kubeadmboot

import (
	"bytes"
	_ "embed"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"text/template"
	"time"

	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/yaml"

	"github.com/kubewin/kubewin/internal/acrcredential"
	"github.com/kubewin/kubewin/internal/api/v1alpha1"
)

// Role is what a machine becomes.
type Role string

// Roles.
const (
	// RoleInit is the first control plane: it creates the cluster, its CA and the bootstrap token.
	RoleInit Role = "init"
	// RoleControlPlane joins as a further control plane with stacked etcd.
	RoleControlPlane Role = "control-plane"
	// RoleWorker joins as a worker.
	RoleWorker Role = "worker"
)

// Files on the machine.
const (
	// ConfigPath is the kubeadm configuration; the script removes it once kubeadm is done.
	ConfigPath = "/etc/kubernetes/kubewin/kubeadm.yaml"
	// ScriptPath is the bootstrap script.
	ScriptPath = "/var/lib/kubewin/bootstrap.sh"
	// CNITemplatePath is containerd's CNI configuration template (bridge and host-local on the
	// node's pod CIDR).
	CNITemplatePath = "/etc/kubewin/cni.template"
	// CACertPath is where kubeadm keeps the cluster CA certificate.
	CACertPath = "/etc/kubernetes/pki/ca.crt"
	// AdminKubeconfig is kubeadm's cluster-admin kubeconfig on a control plane.
	AdminKubeconfig = "/etc/kubernetes/admin.conf"
	// CRISocket is containerd's socket.
	CRISocket = "unix:///var/run/containerd/containerd.sock"
	// APIServerPort is the port of every control plane's API server and of the load balancer.
	APIServerPort = 6443
)

// Cluster is what every machine of a cluster shares.
type Cluster struct {
	Name string
	// KubernetesVersion is a release, "v1.37.1".
	KubernetesVersion string
	// Endpoint is the control plane endpoint every node reaches the API servers at: the load
	// balancer's frontend address (or a name standing for it, see EndpointAddress) and
	// APIServerPort.
	Endpoint string
	// EndpointAddress, set when Endpoint's host is a name, is the internal load balancer frontend
	// address the name stands for. A backend's connection to its own internal load balancer's
	// frontend fails (https://learn.microsoft.com/azure/load-balancer/components#limitations), and
	// `kubeadm init` and a control plane's admin.conf go through the endpoint, so every machine
	// maps the name in /etc/hosts (cloud-init's bootcmd, at every boot): a worker to this address,
	// a control plane to 127.0.0.1, its own API server — a joining one to JoinAddress until its
	// own API server runs — as cluster-api-provider-azure's private cluster template does
	// (templates/flavors/private/patches/apiserver-host-dns.yaml).
	EndpointAddress          string
	PodSubnet, ServiceSubnet string
	NodeCIDRMaskSize         int
	// CertSANs are further names of the API server (the frontend's DNS name).
	CertSANs []string
	// ExternalCloudProvider runs every machine's kubelet with --cloud-provider=external: it
	// registers its Node with the uninitialized taint, which the cloud provider's node manager
	// removes once it initialized the Node. kube-apiserver and kube-controller-manager get no
	// --cloud-provider (https://kubernetes.io/docs/tasks/administer-cluster/running-cloud-controller/).
	ExternalCloudProvider bool
	// CloudConfig, with ExternalCloudProvider, is the cloud provider's configuration, written to
	// CloudConfigPath on the control planes only (cloud-controller-manager runs there; the node
	// managers read the instance metadata).
	CloudConfig []byte
	// Registry, when set, makes the workers' kubelets pull from Azure Container Registry as the
	// user-assigned identity the machines carry.
	Registry *Registry
}

// Registry is how the workers' kubelets pull from Azure Container Registry: the image credential
// provider acr-credential-provider (internal/acrcredential), as the identity Credentials names.
// The bootstrap script downloads the provider from ProviderURL unless the image has it in
// CredentialProviderBinDir, as it installs kubeadm unless the image has it.
type Registry struct {
	Credentials v1alpha1.AzureContainerRegistry
	// ProviderURL is the provider's HTTPS download; ArchPlaceholder in it stands for the
	// machine's architecture as dpkg names it (amd64, arm64).
	ProviderURL string
}

// ArchPlaceholder, in a download's URL, is the machine's architecture.
const ArchPlaceholder = "@ARCH@"

// The Linux workers' image credential provider, where AKS's Linux nodes keep it (AgentBaker's
// --image-credential-provider-config and --image-credential-provider-bin-dir), and the Azure
// configuration it reads, beside kubewin's kubeadm configuration: not /etc/kubernetes/azure.json,
// which the CSI drivers' node plugins would read as the cloud provider's.
const (
	CredentialProviderConfigPath = "/var/lib/kubelet/credential-provider-config.yaml"
	CredentialProviderBinDir     = "/var/lib/kubelet/credential-provider"
	RegistryConfigPath           = "/etc/kubernetes/kubewin/acr-credential-provider.json"
)

// DownloadsPath lists the programs the bootstrap script downloads when the image lacks them, a
// "<URL> <path>" line each.
const DownloadsPath = "/etc/kubewin/downloads"

// CloudConfigPath is where the control planes keep the cloud provider's configuration.
const CloudConfigPath = "/etc/kubernetes/azure.json"

// Machine is one machine's part.
type Machine struct {
	Role Role
	// AdvertiseAddress is a control plane's own address.
	AdvertiseAddress string
	// Token is the bootstrap token the machine joins with (RoleInit: the one it creates).
	Token string
	// TokenTTL is the lifetime of the token RoleInit creates.
	TokenTTL time.Duration
	// CertificateKey encrypts the control plane certificates kubeadm uploads (RoleInit) and
	// decrypts them (RoleControlPlane): 32 bytes, hex.
	CertificateKey string
	// CAHash pins the cluster CA for discovery (joins): "sha256:<hex>".
	CAHash string
	// JoinAddress is the address of a running control plane, which a joining control plane
	// reaches the endpoint's name at (Cluster.EndpointAddress) until its own API server runs.
	JoinAddress string
}

// Check reports what is missing or wrong in the inputs.
func Check(c Cluster, m Machine) error {
	if _, err := version.ParseSemantic(c.KubernetesVersion); err != nil {
		return fmt.Errorf("kubernetes version %q: %w", c.KubernetesVersion, err)
	}
	host, _, err := net.SplitHostPort(c.Endpoint)
	if err != nil {
		return fmt.Errorf("control plane endpoint %q: %w", c.Endpoint, err)
	}
	if isName := net.ParseIP(host) == nil; isName != (c.EndpointAddress != "") {
		return fmt.Errorf("control plane endpoint %q: a name needs the address it stands for, an address none (EndpointAddress %q)", c.Endpoint,
			c.EndpointAddress)
	}
	if c.EndpointAddress != "" && m.Role == RoleControlPlane && m.JoinAddress == "" {
		return fmt.Errorf("a joining control plane needs a running control plane's address to reach endpoint %s at", c.Endpoint)
	}
	if m.Token == "" {
		return fmt.Errorf("a %s needs a bootstrap token", m.Role)
	}
	if c.ExternalCloudProvider != (len(c.CloudConfig) > 0) {
		return fmt.Errorf("an external cloud provider needs its configuration, and a configuration the external cloud provider")
	}
	if r := c.Registry; r != nil {
		if u, err := url.Parse(r.ProviderURL); err != nil || u.Scheme != "https" || u.Host == "" {
			return fmt.Errorf("the credential provider's download %q is not an HTTPS URL", r.ProviderURL)
		}
		if r.Credentials.Cloud == "" || r.Credentials.TenantID == "" || r.Credentials.IdentityClientID == "" {
			return fmt.Errorf("pulls from Azure Container Registry need the cloud, the tenant and the identity's client ID: %+v", r.Credentials)
		}
	}
	switch m.Role {
	case RoleInit:
		if m.CertificateKey == "" || m.AdvertiseAddress == "" {
			return fmt.Errorf("the first control plane needs its address and the certificate key")
		}
	case RoleControlPlane:
		if m.CertificateKey == "" || m.AdvertiseAddress == "" || m.CAHash == "" {
			return fmt.Errorf("a joining control plane needs its address, the certificate key and the CA pin")
		}
	case RoleWorker:
		if m.CAHash == "" {
			return fmt.Errorf("a worker needs the CA pin")
		}
	default:
		return fmt.Errorf("unknown role %q", m.Role)
	}
	return nil
}

// The kubeadm configuration, as kubeadm.k8s.io/v1beta4 spells it (only the fields kubewin sets).
type (
	typeMeta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	arg struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	}
	apiEndpoint struct {
		AdvertiseAddress string `json:"advertiseAddress,omitempty"`
		BindPort         int    `json:"bindPort,omitempty"`
	}
	nodeRegistration struct {
		CRISocket        string `json:"criSocket,omitempty"`
		KubeletExtraArgs []arg  `json:"kubeletExtraArgs,omitempty"`
	}
	bootstrapToken struct {
		Token       string   `json:"token"`
		Description string   `json:"description,omitempty"`
		TTL         string   `json:"ttl,omitempty"`
		Usages      []string `json:"usages,omitempty"`
		Groups      []string `json:"groups,omitempty"`
	}
	initConfiguration struct {
		typeMeta
		BootstrapTokens  []bootstrapToken `json:"bootstrapTokens,omitempty"`
		NodeRegistration nodeRegistration `json:"nodeRegistration"`
		LocalAPIEndpoint apiEndpoint      `json:"localAPIEndpoint"`
		CertificateKey   string           `json:"certificateKey,omitempty"`
	}
	clusterConfiguration struct {
		typeMeta
		ClusterName          string `json:"clusterName"`
		KubernetesVersion    string `json:"kubernetesVersion"`
		ControlPlaneEndpoint string `json:"controlPlaneEndpoint"`
		EncryptionAlgorithm  string `json:"encryptionAlgorithm"`
		Networking           struct {
			PodSubnet     string `json:"podSubnet"`
			ServiceSubnet string `json:"serviceSubnet"`
			DNSDomain     string `json:"dnsDomain"`
		} `json:"networking"`
		APIServer struct {
			CertSANs []string `json:"certSANs,omitempty"`
		} `json:"apiServer"`
		ControllerManager struct {
			ExtraArgs []arg `json:"extraArgs,omitempty"`
		} `json:"controllerManager"`
		Etcd struct {
			Local struct {
				DataDir string `json:"dataDir"`
			} `json:"local"`
		} `json:"etcd"`
	}
	kubeletConfiguration struct {
		typeMeta
		CgroupDriver string `json:"cgroupDriver"`
	}
	joinConfiguration struct {
		typeMeta
		NodeRegistration nodeRegistration `json:"nodeRegistration"`
		Discovery        struct {
			BootstrapToken struct {
				Token             string   `json:"token"`
				APIServerEndpoint string   `json:"apiServerEndpoint"`
				CACertHashes      []string `json:"caCertHashes"`
			} `json:"bootstrapToken"`
		} `json:"discovery"`
		ControlPlane *struct {
			LocalAPIEndpoint apiEndpoint `json:"localAPIEndpoint"`
			CertificateKey   string      `json:"certificateKey"`
		} `json:"controlPlane,omitempty"`
	}
)

const kubeadmAPI = "kubeadm.k8s.io/v1beta4"

// DefaultNodeGroup is kubeadm's group of node bootstrap tokens, bound to the node bootstrapper
// role and CSR auto-approval.
const DefaultNodeGroup = "system:bootstrappers:kubeadm:default-node-token"

// KubeadmConfig is the machine's kubeadm configuration: InitConfiguration, ClusterConfiguration
// and KubeletConfiguration for the first control plane, a JoinConfiguration for the others.
func KubeadmConfig(c Cluster, m Machine) ([]byte, error) {
	if err := Check(c, m); err != nil {
		return nil, err
	}
	reg := nodeRegistration{CRISocket: CRISocket}
	if c.ExternalCloudProvider {
		reg.KubeletExtraArgs = []arg{{Name: "cloud-provider", Value: "external"}}
	}
	if registryOf(c, m) != nil {
		for _, a := range acrcredential.KubeletArgs(CredentialProviderConfigPath, CredentialProviderBinDir) {
			name, value, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
			reg.KubeletExtraArgs = append(reg.KubeletExtraArgs, arg{Name: name, Value: value})
		}
	}
	var docs []any
	if m.Role == RoleInit {
		ic := initConfiguration{
			typeMeta: typeMeta{kubeadmAPI, "InitConfiguration"},
			BootstrapTokens: []bootstrapToken{{
				Token: m.Token, Description: "kubewin: joins the cluster's machines", TTL: m.TokenTTL.String(),
				Usages: []string{"signing", "authentication"}, Groups: []string{DefaultNodeGroup},
			}},
			NodeRegistration: reg,
			LocalAPIEndpoint: apiEndpoint{AdvertiseAddress: m.AdvertiseAddress, BindPort: APIServerPort},
			CertificateKey:   m.CertificateKey,
		}
		cc := clusterConfiguration{
			typeMeta: typeMeta{kubeadmAPI, "ClusterConfiguration"}, ClusterName: c.Name, KubernetesVersion: c.KubernetesVersion,
			ControlPlaneEndpoint: c.Endpoint,
			// ECDSA keys keep certificates small: the CA and an admin certificate fit in the 4 KiB
			// of output a run command returns.
			EncryptionAlgorithm: "ECDSA-P256",
		}
		cc.Networking.PodSubnet, cc.Networking.ServiceSubnet, cc.Networking.DNSDomain = c.PodSubnet, c.ServiceSubnet, "cluster.local"
		cc.APIServer.CertSANs = c.CertSANs
		if c.NodeCIDRMaskSize > 0 {
			cc.ControllerManager.ExtraArgs = []arg{{Name: "node-cidr-mask-size", Value: strconv.Itoa(c.NodeCIDRMaskSize)}}
		}
		cc.Etcd.Local.DataDir = "/var/lib/etcd"
		docs = append(docs, ic, cc, kubeletConfiguration{typeMeta{"kubelet.config.k8s.io/v1beta1", "KubeletConfiguration"}, "systemd"})
	} else {
		jc := joinConfiguration{typeMeta: typeMeta{kubeadmAPI, "JoinConfiguration"}, NodeRegistration: reg}
		bt := &jc.Discovery.BootstrapToken
		bt.Token, bt.APIServerEndpoint, bt.CACertHashes = m.Token, c.Endpoint, []string{m.CAHash}
		if m.Role == RoleControlPlane {
			jc.ControlPlane = &struct {
				LocalAPIEndpoint apiEndpoint `json:"localAPIEndpoint"`
				CertificateKey   string      `json:"certificateKey"`
			}{apiEndpoint{m.AdvertiseAddress, APIServerPort}, m.CertificateKey}
		}
		docs = append(docs, jc)
	}
	var out bytes.Buffer
	for i, d := range docs {
		b, err := yaml.Marshal(d)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			out.WriteString("---\n")
		}
		out.Write(b)
	}
	return out.Bytes(), nil
}

//go:embed bootstrap.sh.tmpl
var scriptText string

var script = template.Must(template.New("bootstrap").Parse(scriptText))

// cniTemplate is containerd's CNI configuration template: a bridge with host-local addresses from
// the pod CIDR containerd fills in, masquerading what leaves it, and port mappings.
const cniTemplate = `{
  "cniVersion": "1.0.0",
  "name": "kubewin",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cbr0",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {"type": "host-local", "ranges": [[{"subnet": "{{.PodCIDR}}"}]], "routes": [{"dst": "0.0.0.0/0"}]}
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`

// File is a file cloud-init writes.
type File struct {
	Path        string `json:"path"`
	Content     string `json:"content"`
	Permissions string `json:"permissions"`
	Owner       string `json:"owner,omitempty"`
}

// cloudConfig is the part of cloud-init's cloud-config kubewin writes.
type cloudConfig struct {
	BootCmd    []string    `json:"bootcmd,omitempty"`
	WriteFiles []File      `json:"write_files"`
	RunCmd     [][]string  `json:"runcmd"`
	Output     *outputSpec `json:"output,omitempty"`
}

type outputSpec struct {
	All string `json:"all"`
}

// UserData is the machine's cloud-init user data (#cloud-config).
func UserData(c Cluster, m Machine) ([]byte, error) {
	cfg, err := KubeadmConfig(c, m)
	if err != nil {
		return nil, err
	}
	v, err := version.ParseSemantic(c.KubernetesVersion)
	if err != nil {
		return nil, err
	}
	host, _, _ := net.SplitHostPort(c.Endpoint) // Check parsed it
	var bootCmd []string
	ownEndpoint := "" // the script's command that maps the endpoint's name to this machine once it runs an API server
	if c.EndpointAddress != "" {
		switch m.Role {
		case RoleInit:
			bootCmd = []string{HostsCommand(host, "127.0.0.1")}
		case RoleControlPlane:
			bootCmd = []string{HostsCommand(host, "$a", "a="+m.JoinAddress+"; [ ! -f "+AdminKubeconfig+" ] || a=127.0.0.1")}
			ownEndpoint = HostsCommand(host, "127.0.0.1")
		default:
			bootCmd = []string{HostsCommand(host, c.EndpointAddress)}
		}
	}
	downloads := downloadsOf(c, m)
	var sh bytes.Buffer
	if err := script.Execute(&sh, map[string]any{
		"Role": m.Role, "Minor": fmt.Sprintf("%d.%d", v.Major(), v.Minor()), "Version": fmt.Sprintf("%d.%d.%d", v.Major(), v.Minor(), v.Patch()),
		"Config": ConfigPath, "CNITemplate": CNITemplatePath, "OwnEndpoint": ownEndpoint, "Downloads": downloads != nil,
		"DownloadsPath": DownloadsPath, "Arch": ArchPlaceholder,
	}); err != nil {
		return nil, err
	}
	doc := cloudConfig{
		BootCmd: bootCmd,
		WriteFiles: []File{
			{Path: ConfigPath, Content: string(cfg), Permissions: "0600", Owner: "root:root"},
			{Path: ScriptPath, Content: sh.String(), Permissions: "0700", Owner: "root:root"},
			{Path: CNITemplatePath, Content: cniTemplate, Permissions: "0644"},
			{Path: "/etc/modules-load.d/kubewin.conf", Content: "overlay\nbr_netfilter\n", Permissions: "0644"},
			{Path: "/etc/sysctl.d/90-kubewin.conf", Content: "net.ipv4.ip_forward = 1\nnet.bridge.bridge-nf-call-iptables = 1\n", Permissions: "0644"},
		},
		RunCmd: [][]string{{ScriptPath, string(m.Role)}},
		// The script's output goes to the log file and the console, as cloud-init's own does.
		Output: &outputSpec{All: "| tee -a /var/log/cloud-init-output.log"},
	}
	if downloads != nil {
		var list strings.Builder
		for _, d := range downloads {
			fmt.Fprintf(&list, "%s %s\n", d.URL, d.Path)
		}
		doc.WriteFiles = append(doc.WriteFiles, File{Path: DownloadsPath, Content: list.String(), Permissions: "0644"})
	}
	if r := registryOf(c, m); r != nil {
		conf, azure, err := acrcredential.Files(&r.Credentials, RegistryConfigPath)
		if err != nil {
			return nil, err
		}
		doc.WriteFiles = append(doc.WriteFiles, File{Path: CredentialProviderConfigPath, Content: string(conf), Permissions: "0644"},
			File{Path: RegistryConfigPath, Content: string(azure), Permissions: "0644"})
	}
	if c.ExternalCloudProvider && m.Role != RoleWorker {
		// Its client ID and tenant are no secret, but nothing but cloud-controller-manager reads it.
		doc.WriteFiles = append(doc.WriteFiles, File{Path: CloudConfigPath, Content: string(c.CloudConfig), Permissions: "0600", Owner: "root:root"})
	}
	body, err := yaml.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return append([]byte("#cloud-config\n"), body...), nil
}

// Download is a program the bootstrap script downloads when the image lacks it.
type Download struct{ URL, Path string }

// registryOf is how the machine's kubelet pulls from Azure Container Registry: the cluster's
// Registry on a worker, nil on a control plane (which runs no workloads).
func registryOf(c Cluster, m Machine) *Registry {
	if m.Role != RoleWorker {
		return nil
	}
	return c.Registry
}

// downloadsOf are the programs the machine's script downloads when the image lacks them.
func downloadsOf(c Cluster, m Machine) []Download {
	r := registryOf(c, m)
	if r == nil {
		return nil
	}
	return []Download{{URL: r.ProviderURL, Path: CredentialProviderBinDir + "/" + acrcredential.ProviderName}}
}

// Downloads reads the programs the machine's script downloads when the image lacks them.
func (d *Document) Downloads() ([]Download, error) {
	var out []Download
	for _, line := range strings.Split(strings.TrimSpace(d.Files[DownloadsPath].Content), "\n") {
		if line == "" {
			continue
		}
		u, p, ok := strings.Cut(line, " ")
		if !ok || !strings.HasPrefix(p, "/") {
			return nil, fmt.Errorf("%s: %q is not \"<URL> <path>\"", DownloadsPath, line)
		}
		out = append(out, Download{URL: u, Path: p})
	}
	return out, nil
}

// HostsCommand is the shell command that maps name to addr in /etc/hosts, replacing the name's
// earlier entry; addr may be a shell expansion that the commands in prepare, run first, set.
func HostsCommand(name, addr string, prepare ...string) string {
	pattern := "/[[:space:]]" + strings.ReplaceAll(name, ".", `\.`) + "$/d"
	return strings.Join(append(prepare, "sed -i '"+pattern+"' /etc/hosts", `echo "`+addr+` `+name+`" >>/etc/hosts`), "; ")
}

// Document is user data as a machine reads it.
type Document struct {
	Role Role
	// BootCmd are the commands cloud-init runs at every boot, before it writes the files.
	BootCmd []string
	Files   map[string]File
}

// Parse reads user data UserData wrote: its files and the role its run command names.
func Parse(userData []byte) (*Document, error) {
	if !bytes.HasPrefix(userData, []byte("#cloud-config\n")) {
		return nil, fmt.Errorf("the user data is not a #cloud-config document")
	}
	var cfg cloudConfig
	if err := yaml.UnmarshalStrict(userData, &cfg); err != nil {
		return nil, fmt.Errorf("cloud-config: %w", err)
	}
	d := &Document{Files: map[string]File{}, BootCmd: cfg.BootCmd}
	for _, f := range cfg.WriteFiles {
		d.Files[f.Path] = f
	}
	for _, cmd := range cfg.RunCmd {
		if len(cmd) == 2 && cmd[0] == ScriptPath {
			d.Role = Role(cmd[1])
		}
	}
	switch d.Role {
	case RoleInit, RoleControlPlane, RoleWorker:
	default:
		return nil, fmt.Errorf("the cloud-config runs no kubewin bootstrap (%s with a role)", ScriptPath)
	}
	if _, ok := d.Files[ConfigPath]; !ok {
		return nil, fmt.Errorf("the cloud-config writes no kubeadm configuration (%s)", ConfigPath)
	}
	return d, nil
}

// EndpointOf reads the API server endpoint a machine's kubeadm configuration connects to: the
// first control plane's controlPlaneEndpoint, a joining machine's discovery endpoint.
func EndpointOf(kubeadmConfig []byte) (string, error) {
	for _, doc := range bytes.Split(kubeadmConfig, []byte("\n---\n")) {
		var tm typeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return "", err
		}
		switch tm.Kind {
		case "ClusterConfiguration":
			var cc clusterConfiguration
			err := yaml.Unmarshal(doc, &cc)
			return cc.ControlPlaneEndpoint, err
		case "JoinConfiguration":
			var jc joinConfiguration
			err := yaml.Unmarshal(doc, &jc)
			return jc.Discovery.BootstrapToken.APIServerEndpoint, err
		}
	}
	return "", fmt.Errorf("the kubeadm configuration has no ClusterConfiguration or JoinConfiguration")
}

// ClusterOf reads the cluster settings back from a first control plane's kubeadm configuration.
func ClusterOf(kubeadmConfig []byte) (Cluster, error) {
	var c Cluster
	for _, doc := range bytes.Split(kubeadmConfig, []byte("\n---\n")) {
		var tm typeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return c, err
		}
		if tm.Kind != "ClusterConfiguration" {
			continue
		}
		var cc clusterConfiguration
		if err := yaml.Unmarshal(doc, &cc); err != nil {
			return c, err
		}
		c = Cluster{
			Name: cc.ClusterName, KubernetesVersion: cc.KubernetesVersion, Endpoint: cc.ControlPlaneEndpoint,
			PodSubnet: cc.Networking.PodSubnet, ServiceSubnet: cc.Networking.ServiceSubnet, CertSANs: cc.APIServer.CertSANs,
		}
		for _, a := range cc.ControllerManager.ExtraArgs {
			if a.Name == "node-cidr-mask-size" {
				c.NodeCIDRMaskSize, _ = strconv.Atoi(a.Value)
			}
		}
		return c, nil
	}
	return c, fmt.Errorf("the kubeadm configuration has no ClusterConfiguration")
}
