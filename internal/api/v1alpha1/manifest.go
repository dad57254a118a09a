package v1alpha1

import (
	"fmt"
	"slices"
)

// ImageManifest says what a baked kubewin image contains. The Packer plugin writes it into the
// image; nodeboot verifies the payload against it on first boot; the provider reads it to check
// version skew and OS build before creating anything.
type ImageManifest struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`

	// WindowsBuild is the image's OS build: 17763, 20348 or 26100.
	WindowsBuild WindowsBuild `json:"windowsBuild"`
	// KubernetesVersion is the version of kubelet and kube-proxy in the image ("v1.36.2").
	KubernetesVersion string `json:"kubernetesVersion"`
	// Runtime is the container runtime in the image.
	Runtime RuntimeInfo `json:"runtime"`
	// PauseImage is the sandbox image, imported into the runtime, matching WindowsBuild.
	PauseImage PauseImage `json:"pauseImage"`
	// WorkloadImages are the workload container images pre-pulled into the runtime's image store
	// (containerd's k8s.io namespace, or Docker's) when the image was baked: the kubelet finds
	// them present, and first boot pulls nothing for them.
	WorkloadImages []WorkloadImage `json:"workloadImages,omitempty"`
	// Isolation lists the isolation modes the image's runtime is configured for: process
	// (always) and hyperv when the image was baked with Hyper-V isolation (the Hyper-V feature
	// installed and containerd's runhcs-wcow-hypervisor runtime handler configured). Empty
	// means process only, as in images baked before the field existed.
	Isolation []Isolation `json:"isolation,omitempty"`
	// ACRCredentialProvider is the release of cloud-provider-azure whose acr-credential-provider
	// the image carries at ACRCredentialProviderPath ("v1.34.2"); empty when it carries none.
	ACRCredentialProvider string `json:"acrCredentialProvider,omitempty"`
	// NodebootVersion is the version of nodeboot in the image.
	NodebootVersion string `json:"nodebootVersion"`
	// Files lists every file of the payload with its sha256.
	Files []File `json:"files"`
}

// ACRCredentialProviderPath is where an image carries cloud-provider-azure's
// acr-credential-provider: in the kubelet's credential provider directory, under the provider's
// name with .exe, which the Windows kubelet finds by the name alone (kubernetes
// pkg/credentialprovider/plugin/plugin.go: exec.LookPath; AKS's Windows CSE installs it there).
const ACRCredentialProviderPath = "var/lib/kubelet/credential-provider/acr-credential-provider.exe"

// RuntimeInfo names a runtime and its version.
type RuntimeInfo struct {
	Name    RuntimeName `json:"name"`
	Version string      `json:"version"`
	// CRIDockerdVersion is the cri-dockerd version; required with docker.
	CRIDockerdVersion string `json:"criDockerdVersion,omitempty"`
}

// PauseImage is the sandbox image: a reference and the digest that was imported.
type PauseImage struct {
	Reference string `json:"reference"`
	Digest    string `json:"digest"`
	// Archive is the payload path of the image as an OCI archive, imported into the runtime when
	// the image is baked, so that the first boot pulls nothing.
	Archive string `json:"archive,omitempty"`
}

// WorkloadImage is a workload container image baked into the runtime's image store.
type WorkloadImage struct {
	// Reference is the image as it was asked for, by tag or by digest ("mcr.microsoft.com/windows/servercore:ltsc2022").
	Reference string `json:"reference"`
	// Digest is the digest of the windows/amd64 image that was imported (not of a multi-platform index).
	Digest string `json:"digest"`
	// OSVersion is the image's os.version ("10.0.20348.2849"): its Windows build.
	OSVersion string `json:"osVersion"`
	// Size is what a pull of the image downloads, in bytes: its manifest, config and compressed layers.
	Size int64 `json:"size"`
	// Archive is the payload path of the image as an OCI archive, imported into the runtime when
	// the image is baked. The bake then deletes it: the manifest installed in the image has none,
	// and the image is in the runtime's store only.
	Archive string `json:"archive,omitempty"`
}

// File is one file of the payload.
type File struct {
	// Path is relative to the system drive (C:\), with forward slashes ("k/kubelet.exe").
	Path string `json:"path"`
	// SHA256 is the lower-case hex sha256 of the content.
	SHA256 string `json:"sha256"`
	// Size is the content length in bytes.
	Size int64 `json:"size"`
	// Source is where the file was fetched from, when it was fetched.
	Source string `json:"source,omitempty"`
	// Unpack, when set, makes the file an archive (.zip, .tar.gz or .tgz) whose content is
	// extracted at bake into this directory, relative to the system drive ("Program Files/containerd").
	Unpack string `json:"unpack,omitempty"`
}

// HyperV reports whether the image runs containers under Hyper-V isolation too.
func (m *ImageManifest) HyperV() bool { return slices.Contains(m.Isolation, IsolationHyperV) }

// HyperVOnly is whether the workload image is of an earlier Windows build than the host's: its
// containers run Hyper-V isolated only (a pod names the RuntimeClass windows-hyperv), which is
// why an image with Hyper-V isolation accepted it (CheckImageBuild).
func (w WorkloadImage) HyperVOnly(host WindowsBuild) bool {
	b, err := ImageBuild(w.OSVersion)
	return err == nil && b != host
}

// IsolationNote is what a bake says of an image that runs Hyper-V isolated only, and why it was
// accepted; "" for an image of the host's build.
func (w WorkloadImage) IsolationNote(host WindowsBuild) string {
	if !w.HyperVOnly(host) {
		return ""
	}
	return fmt.Sprintf(" (Hyper-V isolation only: its build is older than the host's %d, which Hyper-V isolation runs; pods set "+
		"runtimeClassName: %s)", host, RuntimeClassHyperV)
}
