//go:generate packer-sdc struct-markdown
//go:generate packer-sdc mapstructure-to-hcl2 -type Config,DatasourceOutput

package release

import (
	"fmt"
	"net/url"
	"strings"

	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"
	utilversion "k8s.io/apimachinery/pkg/util/version"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/kubeversion"
	"github.com/kubewin/kubewin/internal/version"
)

// Config of the kubewin-release data source. Every base URL can point at a mirror: the data
// source appends the upstream path layout to it.
type Config struct {
	// The Kubernetes version of the node binaries (kubelet, kube-proxy, kubeadm, kube-log-runner),
	// such as `v1.37.1`. Supported: 1.34 to 1.37.
	KubernetesVersion string `mapstructure:"kubernetes_version" required:"true"`
	// The Windows Server release the image is for: `2019`, `2022` or `2025` (or its build
	// number: `17763`, `20348`, `26100`). It selects the pause image for that OS build.
	// Default `2022`.
	WindowsVersion string `mapstructure:"windows_version"`
	// The container runtime: `containerd` (default) or `docker` (with cri-dockerd, as in the
	// original Windows guides).
	Runtime string `mapstructure:"runtime"`
	// The containerd version. Default `2.1.4`.
	ContainerdVersion string `mapstructure:"containerd_version"`
	// The Docker version (static Windows build); required with `runtime = "docker"`.
	DockerVersion string `mapstructure:"docker_version"`
	// The sha256 of the Docker zip, which Docker publishes no checksum file for; without it the
	// data source downloads the zip once to compute it.
	DockerSHA256 string `mapstructure:"docker_sha256"`
	// The cri-dockerd version; required with `runtime = "docker"`.
	CRIDockerdVersion string `mapstructure:"cri_dockerd_version"`
	// The sha256 of the cri-dockerd zip; without it the data source downloads the zip once to
	// compute it.
	CRIDockerdSHA256 string `mapstructure:"cri_dockerd_sha256"`
	// Plan the image for Hyper-V isolation as well as process isolation: the manifest records
	// `isolation: [process, hyperv]`, from which the `kubewin-node` provisioner installs the
	// Windows Hyper-V feature and configures containerd's `runhcs-wcow-hypervisor` runtime
	// handler, and `azure_tags` carry `kubewin.io/isolation = "process,hyperv"`, from which
	// kubewin's azure backend knows the image's pools need the `windows-hyperv` RuntimeClass.
	// containerd only: `runtime = "docker"` is refused. The build VM, and every node VM, needs
	// nested virtualization (on Azure, a size that supports it). Default false.
	HyperVIsolation bool `mapstructure:"hyperv_isolation"`
	// The CNI plugins version (win-bridge, win-overlay, host-local). Default `1.7.1`.
	CNIPluginsVersion string `mapstructure:"cni_plugins_version"`
	// The nodeboot version. Default: this plugin's version.
	NodebootVersion string `mapstructure:"nodeboot_version"`
	// The cloud-provider-azure release whose `acr-credential-provider` the image carries, such
	// as `v1.34.2` (the leading `v` is optional): the kubelet's credential provider plugin that
	// gets Azure Container Registry tokens for the machine's managed identity. The manifest
	// records it, and `azure_tags` carry it as `kubewin.io/acr-credential-provider`.
	// cloud-provider-azure's minor releases match Kubernetes minors (the version matrix of its
	// README): pick a release of `kubernetes_version`'s minor. Default empty: the image carries
	// none, and pools of it cannot pull from Azure Container Registry by identity.
	ACRCredentialProviderVersion string `mapstructure:"acr_credential_provider_version"`
	// The sha256 of the `acr-credential-provider` binary, which cloud-provider-azure publishes no
	// checksum file for; without it the data source downloads the binary once to compute it.
	// Only with `acr_credential_provider_version`.
	ACRCredentialProviderSHA256 string `mapstructure:"acr_credential_provider_sha256"`
	// The pause (sandbox) image. It must have a windows/amd64 image for the chosen Windows
	// build. Default `registry.k8s.io/pause:3.10.2`, which covers 2019, 2022 and 2025.
	PauseImage string `mapstructure:"pause_image"`
	// The digest of the pause image's windows/amd64 manifest for the Windows build. Without it
	// the data source asks the registry, which must then be reachable from the Packer host.
	PauseImageDigest string `mapstructure:"pause_image_digest"`

	// Kubernetes release downloads: `<base>/<version>/bin/windows/amd64/kubelet.exe` and its
	// `.sha256`. Default `https://dl.k8s.io/release`.
	KubernetesBaseURL string `mapstructure:"kubernetes_base_url"`
	// containerd releases: `<base>/v<version>/containerd-<version>-windows-amd64.tar.gz` and its
	// `.sha256sum`. Default `https://github.com/containerd/containerd/releases/download`.
	ContainerdBaseURL string `mapstructure:"containerd_base_url"`
	// CNI plugins releases: `<base>/v<version>/cni-plugins-windows-amd64-v<version>.tgz` and its
	// `.sha256`. Default `https://github.com/containernetworking/plugins/releases/download`.
	CNIPluginsBaseURL string `mapstructure:"cni_plugins_base_url"`
	// Docker static builds: `<base>/docker-<version>.zip`. Default
	// `https://download.docker.com/win/static/stable/x86_64`.
	DockerBaseURL string `mapstructure:"docker_base_url"`
	// cri-dockerd releases: `<base>/v<version>/cri-dockerd-<version>.win.amd64.zip`. Default
	// `https://github.com/Mirantis/cri-dockerd/releases/download`.
	CRIDockerdBaseURL string `mapstructure:"cri_dockerd_base_url"`
	// nodeboot releases: `<base>/v<version>/nodeboot_<version>_windows_amd64.exe` and
	// `nodeboot_<version>_SHA256SUMS`. Default `https://github.com/kubewin/kubewin/releases/download`.
	NodebootBaseURL string `mapstructure:"nodeboot_base_url"`
	// cloud-provider-azure releases:
	// `<base>/<version>/azure-acr-credential-provider-windows-amd64.exe`. Default
	// `https://github.com/kubernetes-sigs/cloud-provider-azure/releases/download`.
	CloudProviderAzureBaseURL string `mapstructure:"cloud_provider_azure_base_url"`

	build v1alpha1.WindowsBuild
}

// DatasourceOutput is what the data source resolves.
type DatasourceOutput struct {
	// The bake plan: an image manifest (JSON) listing every payload file with its URL, sha256
	// and size, and the pause image pinned by digest. Give it to the `kubewin-node`
	// provisioner's `release`.
	Manifest string `mapstructure:"manifest"`
	// The Kubernetes version, with a leading `v`.
	KubernetesVersion string `mapstructure:"kubernetes_version"`
	// The Windows build number (17763, 20348 or 26100).
	WindowsBuild int `mapstructure:"windows_build"`
	// The container runtime.
	Runtime string `mapstructure:"runtime"`
	// The pause image pinned to its windows/amd64 digest for the build.
	PauseImage string `mapstructure:"pause_image"`
	// Every payload file's URL, keyed by its path on the node's system drive.
	URLs map[string]string `mapstructure:"urls"`
	// Every payload file's sha256, keyed by its path.
	SHA256 map[string]string `mapstructure:"sha256"`
	// The tags that tell kubewin's azure backend what the image is (Windows build, Kubernetes
	// version, runtime, with `hyperv_isolation` its isolation modes, and with
	// `acr_credential_provider_version` the release of the `acr-credential-provider` it carries,
	// as `kubewin.io/acr-credential-provider`): give them to the
	// published image, e.g. the `azure-arm` builder's `azure_tags`, which tag the gallery image
	// version.
	AzureTags map[string]string `mapstructure:"azure_tags"`
}

// prepare applies defaults and checks the configuration, reporting every problem at once.
func (c *Config) prepare() error {
	var errs *packersdk.MultiError
	add := func(format string, a ...any) { errs = packersdk.MultiErrorAppend(errs, fmt.Errorf(format, a...)) }
	def := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	def(&c.WindowsVersion, "2022")
	def(&c.Runtime, string(v1alpha1.RuntimeContainerd))
	def(&c.ContainerdVersion, "2.1.4")
	def(&c.CNIPluginsVersion, "1.7.1")
	def(&c.NodebootVersion, version.Version)
	def(&c.PauseImage, "registry.k8s.io/pause:3.10.2")
	def(&c.KubernetesBaseURL, "https://dl.k8s.io/release")
	def(&c.ContainerdBaseURL, "https://github.com/containerd/containerd/releases/download")
	def(&c.CNIPluginsBaseURL, "https://github.com/containernetworking/plugins/releases/download")
	def(&c.DockerBaseURL, "https://download.docker.com/win/static/stable/x86_64")
	def(&c.CRIDockerdBaseURL, "https://github.com/Mirantis/cri-dockerd/releases/download")
	def(&c.NodebootBaseURL, "https://github.com/kubewin/kubewin/releases/download")
	def(&c.CloudProviderAzureBaseURL, "https://github.com/kubernetes-sigs/cloud-provider-azure/releases/download")

	if c.KubernetesVersion == "" {
		add("kubernetes_version is required: set it to the node binaries' version, such as %q", fmt.Sprintf("v1.%d.0", kubeversion.NewestMinor))
	} else if v, err := kubeversion.Parse(c.KubernetesVersion); err != nil {
		add("kubernetes_version: %w", err)
	} else if err := kubeversion.CheckSupported(v); err != nil {
		add("kubernetes_version %q: %w", c.KubernetesVersion, err)
	} else {
		c.KubernetesVersion = "v" + v.String()
	}
	c.build, _ = v1alpha1.ParseWindowsVersion(c.WindowsVersion)
	if c.build == 0 {
		add("windows_version %q is not supported: use 2019, 2022 or 2025", c.WindowsVersion)
	}
	switch v1alpha1.RuntimeName(c.Runtime) {
	case v1alpha1.RuntimeContainerd:
	case v1alpha1.RuntimeDocker:
		if c.DockerVersion == "" {
			add(`docker_version is required with runtime = "docker": set the Docker static build version, such as "28.3.3"`)
		}
		if c.CRIDockerdVersion == "" {
			add(`cri_dockerd_version is required with runtime = "docker": set the cri-dockerd version, such as "0.3.18"`)
		}
		if c.HyperVIsolation {
			add(`hyperv_isolation is for containerd images only, and runtime is "docker": Hyper-V isolation here is containerd's ` +
				`runhcs-wcow-hypervisor runtime handler, selected by a Kubernetes RuntimeClass; set runtime = "containerd", or leave ` +
				`hyperv_isolation out`)
		}
	default:
		add("runtime %q is not supported: use %q or %q", c.Runtime, v1alpha1.RuntimeContainerd, v1alpha1.RuntimeDocker)
	}
	if c.ACRCredentialProviderVersion != "" {
		if v, err := utilversion.ParseSemantic(c.ACRCredentialProviderVersion); err != nil {
			add("acr_credential_provider_version %q is not a cloud-provider-azure release version: give one such as \"v1.34.2\"",
				c.ACRCredentialProviderVersion)
		} else {
			c.ACRCredentialProviderVersion = "v" + v.String()
		}
	} else if c.ACRCredentialProviderSHA256 != "" {
		add("acr_credential_provider_sha256 %q is set without acr_credential_provider_version: set acr_credential_provider_version "+
			"to the cloud-provider-azure release the sha256 is of (such as \"v1.34.2\"), or leave acr_credential_provider_sha256 out",
			c.ACRCredentialProviderSHA256)
	}
	for _, s := range []struct{ field, sum string }{
		{"docker_sha256", c.DockerSHA256}, {"cri_dockerd_sha256", c.CRIDockerdSHA256},
		{"acr_credential_provider_sha256", c.ACRCredentialProviderSHA256},
	} {
		if s.sum != "" && !isSHA256(s.sum) {
			add("%s %q is not a sha256: give 64 hex digits", s.field, s.sum)
		}
	}
	if c.PauseImageDigest != "" && !strings.HasPrefix(c.PauseImageDigest,
		"sha256:") || c.PauseImageDigest != "" && !isSHA256(strings.TrimPrefix(c.PauseImageDigest, "sha256:")) {
		add("pause_image_digest %q is not an image digest: give sha256:<64 hex digits>", c.PauseImageDigest)
	}
	for _, u := range []struct{ field, url string }{
		{"kubernetes_base_url", c.KubernetesBaseURL}, {"containerd_base_url", c.ContainerdBaseURL},
		{"cni_plugins_base_url", c.CNIPluginsBaseURL}, {"docker_base_url", c.DockerBaseURL},
		{"cri_dockerd_base_url", c.CRIDockerdBaseURL}, {"nodeboot_base_url", c.NodebootBaseURL},
		{"cloud_provider_azure_base_url", c.CloudProviderAzureBaseURL},
	} {
		if p, err := url.Parse(u.url); err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" {
			add("%s %q is not an http(s) URL", u.field, u.url)
		}
	}
	if errs != nil && len(errs.Errors) > 0 {
		return errs
	}
	return nil
}

func isSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, r := range strings.ToLower(s) {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}
