// Package azureimage is how a kubewin image published to Azure (a gallery image version or a
// managed image) says what it is: tags with its Windows build, Kubernetes version and runtime,
// which the Packer templates set from the kubewin-release data source and the provider reads
// before it creates anything.
package azureimage

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
)

// The tags of a kubewin image in Azure.
const (
	TagWindowsBuild      = "kubewin.io/windows-build"
	TagKubernetesVersion = "kubewin.io/kubernetes-version"
	TagRuntime           = "kubewin.io/runtime"
	TagRuntimeVersion    = "kubewin.io/runtime-version"
	// TagIsolation lists the image's isolation modes, comma-separated ("process,hyperv"); an
	// image without it runs process isolation only.
	TagIsolation = "kubewin.io/isolation"
	// TagACRCredentialProvider is the release of cloud-provider-azure's acr-credential-provider
	// the image carries; an image without it carries none.
	TagACRCredentialProvider = "kubewin.io/acr-credential-provider"
)

// Tags are the tags of an image with manifest m.
func Tags(m *v1alpha1.ImageManifest) map[string]string {
	tags := map[string]string{
		TagWindowsBuild: strconv.FormatUint(uint64(m.WindowsBuild), 10), TagKubernetesVersion: m.KubernetesVersion,
		TagRuntime: string(m.Runtime.Name), TagRuntimeVersion: m.Runtime.Version,
	}
	if len(m.Isolation) > 0 {
		modes := make([]string, len(m.Isolation))
		for i, mode := range m.Isolation {
			modes[i] = string(mode)
		}
		tags[TagIsolation] = strings.Join(modes, ",")
	}
	if m.ACRCredentialProvider != "" {
		tags[TagACRCredentialProvider] = m.ACRCredentialProvider
	}
	return tags
}

// ManifestFromTags is the part of an image's manifest its tags carry: Windows build, Kubernetes
// version and runtime. An image without them is an error that says how to tag it.
func Manifest(id string, tags map[string]string) (*v1alpha1.ImageManifest, error) {
	var missing []string
	for _, k := range []string{TagWindowsBuild, TagKubernetesVersion, TagRuntime} {
		if tags[k] == "" {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("image %s has no %s tag: tag it when you publish it (the kubewin Packer examples do), or give the pool its manifest "+
			"(image_manifest = file(\"…/kubewin-manifest.json\"))", id, strings.Join(missing, ", "))
	}
	build, err := strconv.ParseUint(tags[TagWindowsBuild], 10, 32)
	if err != nil || !slices.Contains(v1alpha1.WindowsBuilds, v1alpha1.WindowsBuild(build)) {
		return nil, fmt.Errorf("image %s: tag %s=%q is not a Windows Server build kubewin supports (%v)", id, TagWindowsBuild, tags[TagWindowsBuild],
			v1alpha1.WindowsBuilds)
	}
	m := &v1alpha1.ImageManifest{
		APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindImageManifest,
		WindowsBuild:          v1alpha1.WindowsBuild(build),
		KubernetesVersion:     tags[TagKubernetesVersion],
		Runtime:               v1alpha1.RuntimeInfo{Name: v1alpha1.RuntimeName(tags[TagRuntime]), Version: tags[TagRuntimeVersion]},
		ACRCredentialProvider: tags[TagACRCredentialProvider],
	}
	if s := tags[TagIsolation]; s != "" {
		for _, mode := range strings.Split(s, ",") {
			m.Isolation = append(m.Isolation, v1alpha1.Isolation(strings.TrimSpace(mode)))
		}
		if errs := m.Validate().Filter(func(e error) bool {
			return !strings.HasPrefix(e.Error(), "isolation")
		}); len(errs) > 0 {
			return nil, fmt.Errorf("image %s: tag %s=%q: %v", id, TagIsolation, s, errs.ToAggregate())
		}
	}
	return m, nil
}
