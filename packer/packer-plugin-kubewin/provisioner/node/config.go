//go:generate packer-sdc struct-markdown
//go:generate packer-sdc mapstructure-to-hcl2 -type Config,RegistryCredential

package node

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/hashicorp/packer-plugin-sdk/common"
	"github.com/hashicorp/packer-plugin-sdk/hcl2helper"
	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"

	"github.com/kubewin/kubewin/internal/api"
	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/guest"
	"github.com/kubewin/kubewin/internal/ociimage"
)

// unknownValue is what packer validate passes for a data source's output it did not evaluate.
const unknownValue = "<unknown>"

// Config of the kubewin-node provisioner.
type Config struct {
	common.PackerConfig `mapstructure:",squash"`

	// The bake plan: the `manifest` of a `kubewin-release` data source (an image manifest in
	// JSON listing every artifact with its URL, sha256 and size).
	Release string `mapstructure:"release" required:"true"`
	// How artifacts reach the guest: `guest-fetch` (default) has the guest download each one
	// itself, in parallel and resumably, verifying every sha256 — use it over WinRM, whose
	// uploads move a few KB per command; `host-cache` downloads on the Packer host into a
	// content-addressed cache (reused by later builds), exports the pause image as an OCI
	// archive and uploads everything — use it over SSH, with the `kubewin-local` builder and
	// on air-gapped sites.
	Transfer string `mapstructure:"transfer"`
	// With `guest-fetch`, fetch every file from `<mirror>/<path>` (the path on the node's
	// system drive, such as `k/kubelet.exe`) instead of its upstream URL.
	Mirror string `mapstructure:"mirror"`
	// With `guest-fetch`, how many files the guest downloads at once. Default 4.
	Parallel int `mapstructure:"parallel"`
	// With `host-cache`, the cache directory. Default: `kubewin/packer` in the user's cache
	// directory (`$XDG_CACHE_HOME` or `~/.cache` on Linux).
	CacheDir string `mapstructure:"cache_dir"`
	// Where the image manifest baked into the guest is written on the Packer host, for
	// Terraform (`kubewin_image_manifest`) and HCP Packer. Default `kubewin-manifest.json`.
	ManifestOutput string `mapstructure:"manifest_output"`
	// Whether to install the Windows Containers feature (and restart when Windows asks to).
	// Default true.
	InstallContainersFeature *bool `mapstructure:"install_containers_feature"`
	// Bake the image for Hyper-V isolation as well as process isolation even though the release
	// does not ask for it. Prefer the `kubewin-release` data source's `hyperv_isolation`: a
	// release that says `isolation: [process, hyperv]` is baked for Hyper-V without this option,
	// and only then do its `azure_tags` carry the `kubewin.io/isolation` tag kubewin's azure
	// backend reads. This option alone does not tag the image. A Hyper-V bake installs the
	// Windows Hyper-V feature (with the Containers feature, one restart for both), configures
	// containerd's `runhcs-wcow-hypervisor` runtime handler next to the default
	// `runhcs-wcow-process`, and records `isolation: [process, hyperv]` in the image manifest,
	// from which a node pool labels its nodes and creates the `windows-hyperv` RuntimeClass.
	// containerd images only: a Docker image is refused. The build VM, and every node VM, needs
	// nested virtualization (on Azure, a size that supports it). Default false.
	HyperVIsolation bool `mapstructure:"hyperv_isolation"`
	// How long to wait for the guest to come back from that restart. Default `15m`.
	RestartTimeout time.Duration `mapstructure:"restart_timeout"`
	// Run the feature installation and the bake as this user through a scheduled task, as
	// the `powershell` provisioner does: use `build.User` on images whose WinRM user is not
	// elevated. `SYSTEM` with an empty password runs as LocalSystem.
	ElevatedUser string `mapstructure:"elevated_user"`
	// The password of `elevated_user`.
	ElevatedPassword string `mapstructure:"elevated_password"`

	// Workload container images to pre-pull into the image, by tag or by digest
	// (`mcr.microsoft.com/windows/servercore:ltsc2022`, `myregistry.example.com/app@sha256:…`). Each
	// is resolved to its windows/amd64 image whose `os.version` is the image's Windows build (the
	// build must match: a process-isolated container runs only on its own build), pinned by
	// digest, pulled on the Packer host into `cache_dir`, uploaded and imported into the
	// runtime's image store the kubelet uses (containerd's `k8s.io` namespace, or Docker's), so
	// that pods using it start without a pull (`imagePullPolicy: IfNotPresent`). The image
	// manifest lists each with its digest, `os.version` and size. An image that does not exist,
	// that the registry refuses, without a windows/amd64 entry or of another build fails the
	// build before anything reaches the guest.
	Images []string `mapstructure:"images"`
	// Logins for the registries of `images`, one `registry_credentials` block per registry. They
	// stay on the Packer host: never in the guest, the image or its manifest. Pass the password
	// from a variable marked `sensitive = true`.
	RegistryCredentials []RegistryCredential `mapstructure:"registry_credentials"`

	// Bake a simulated Windows machine (nodeboot's sim platform) kept in this directory of a
	// POSIX guest instead of a Windows guest: what the `kubewin-local` builder sets up by itself;
	// with another builder (such as `null` over SSH) set it and `sim_nodeboot`.
	SimRoot string `mapstructure:"sim_root"`
	// The nodeboot binary on the guest that runs the simulated machine's bake.
	SimNodeboot string `mapstructure:"sim_nodeboot"`

	plan *v1alpha1.ImageManifest
	// logins are the registry_credentials by registry.
	logins ociimage.Logins
}

// RegistryCredential is a login to a container registry.
type RegistryCredential struct {
	// The registry's host name, with its port if not 443 (`myregistry.azurecr.io`,
	// `registry.example.com:5000`; Docker Hub is `docker.io`).
	Server string `mapstructure:"server" required:"true"`
	// The user name (for Azure Container Registry, a service principal's ID or a token's name).
	Username string `mapstructure:"username" required:"true"`
	// The password or token.
	Password string `mapstructure:"password" required:"true"`
}

func (c *Config) prepare() error {
	var errs *packersdk.MultiError
	add := func(format string, a ...any) { errs = packersdk.MultiErrorAppend(errs, fmt.Errorf(format, a...)) }
	switch c.Release {
	case "":
		add("release is required: set it to data.kubewin-release.<name>.manifest")
	case unknownValue, hcl2helper.UnknownVariableValue:
		// packer validate leaves data sources unevaluated: the plan is checked at build.
	default:
		m, err := api.LoadImageManifest([]byte(c.Release))
		if err != nil {
			add("release is not a kubewin bake plan (the manifest of a kubewin-release data source): %w", err)
		}
		c.plan = m
		if m != nil {
			for i, w := range m.WorkloadImages {
				if w.Archive == "" {
					add("release: workloadImages[%d] (%s) has no archive: this is an installed image's manifest, whose images are in its "+
						"runtime's store already; give the manifest of a kubewin-release data source, and the workload images in images", i,
						w.Reference)
				}
			}
		}
		if m != nil && c.HyperVIsolation {
			if m.Runtime.Name != v1alpha1.RuntimeContainerd {
				add("hyperv_isolation is for containerd images only, and this release bakes %s %s: Hyper-V isolation here is containerd's "+
					"runhcs-wcow-hypervisor runtime handler, selected by a Kubernetes RuntimeClass; bake a containerd release, or leave "+
					"hyperv_isolation out", m.Runtime.Name, m.Runtime.Version)
			} else {
				m.Isolation = []v1alpha1.Isolation{v1alpha1.IsolationProcess, v1alpha1.IsolationHyperV}
			}
		}
	}
	switch c.Transfer {
	case "":
		c.Transfer = guest.GuestFetch
	case guest.GuestFetch, guest.HostCache:
	default:
		add("transfer %q is not a transfer mode: use %q or %q", c.Transfer, guest.GuestFetch, guest.HostCache)
	}
	if c.Mirror != "" {
		if u, err := url.Parse(c.Mirror); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add("mirror %q is not an http(s) URL", c.Mirror)
		} else if c.Transfer != guest.GuestFetch {
			add("mirror is for transfer = %q; with %q the Packer host downloads: point the release's base URLs at the mirror instead", guest.GuestFetch,
				c.Transfer)
		}
	}
	if c.Parallel < 0 {
		add("parallel %d must be positive", c.Parallel)
	} else if c.Parallel == 0 {
		c.Parallel = 4
	}
	if c.CacheDir == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			dir = os.TempDir()
		}
		c.CacheDir = filepath.Join(dir, "kubewin", "packer")
	}
	if c.ManifestOutput == "" {
		c.ManifestOutput = "kubewin-manifest.json"
	}
	if c.InstallContainersFeature == nil {
		yes := true
		c.InstallContainersFeature = &yes
	}
	if c.RestartTimeout < 0 {
		add("restart_timeout %s must be positive", c.RestartTimeout)
	} else if c.RestartTimeout == 0 {
		c.RestartTimeout = 15 * time.Minute
	}
	if c.ElevatedPassword != "" && c.ElevatedUser == "" {
		add("elevated_password is set without elevated_user: set both, or neither")
	}
	seen := map[string]int{}
	for i, ref := range c.Images {
		if _, err := name.ParseReference(ref); err != nil {
			add("images[%d] %q is not an image reference (%v): use registry/repository:tag or registry/repository@sha256:<digest>", i, ref, err)
		} else if j, dup := seen[ref]; dup {
			add("images[%d] %q is images[%d] again: list each image once", i, ref, j)
		} else {
			seen[ref] = i
		}
	}
	c.logins = ociimage.Logins{}
	for i, rc := range c.RegistryCredentials {
		reg, err := name.NewRegistry(rc.Server)
		switch {
		case rc.Server == "" || err != nil:
			add("registry_credentials[%d].server %q is not a registry host name: use the host of the images' references, such as "+
				"myregistry.azurecr.io", i, rc.Server)
		case rc.Username == "" || rc.Password == "":
			add("registry_credentials[%d] (%s) needs both username and password", i, rc.Server)
		default:
			if _, dup := c.logins[reg.RegistryStr()]; dup {
				add("registry_credentials[%d]: %s has credentials already: give one block per registry", i, rc.Server)
			}
			c.logins[reg.RegistryStr()] = authn.Basic{Username: rc.Username, Password: rc.Password}
		}
	}
	if (c.SimRoot == "") != (c.SimNodeboot == "") {
		add("sim_root and sim_nodeboot go together: set both to bake a simulated machine, or neither")
	}
	if errs != nil && len(errs.Errors) > 0 {
		return errs
	}
	return nil
}
