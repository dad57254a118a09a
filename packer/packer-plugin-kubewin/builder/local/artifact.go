package local

import (
	"fmt"
	"path/filepath"

	registryimage "github.com/hashicorp/packer-plugin-sdk/packer/registry/image"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/sim/simmachine"
)

// Artifact is an image directory.
type Artifact struct {
	dir      string
	manifest *v1alpha1.ImageManifest
}

func (*Artifact) BuilderId() string { return BuilderID } //nolint:revive // packersdk.Artifact's method name

func (a *Artifact) Files() []string {
	files := []string{filepath.Join(a.dir, simmachine.ImageManifestFile)}
	for _, f := range a.manifest.Files {
		files = append(files, filepath.Join(a.dir, simmachine.ImagePayloadDir, filepath.FromSlash(f.Path)))
	}
	return files
}

func (a *Artifact) Id() string { return a.dir } //nolint:revive // packersdk.Artifact's method name

func (a *Artifact) String() string {
	return fmt.Sprintf("kubewin image %s: Kubernetes %s, Windows Server %s, %s %s, %d files", a.dir,
		a.manifest.KubernetesVersion, a.manifest.WindowsBuild.Release(), a.manifest.Runtime.Name, a.manifest.Runtime.Version, len(a.manifest.Files))
}

// State gives HCP Packer the image and its labels.
func (a *Artifact) State(name string) any {
	if name != registryimage.ArtifactStateURI {
		return nil
	}
	img, err := registryimage.FromArtifact(a, registryimage.WithProvider("kubewin-local"), registryimage.SetLabels(map[string]any{
		"kubernetes_version": a.manifest.KubernetesVersion,
		"windows_build":      fmt.Sprint(uint32(a.manifest.WindowsBuild)),
		"runtime":            string(a.manifest.Runtime.Name) + " " + a.manifest.Runtime.Version,
		"pause_image":        a.manifest.PauseImage.Reference + "@" + a.manifest.PauseImage.Digest,
		"nodeboot_version":   a.manifest.NodebootVersion,
	}))
	if err != nil {
		return nil
	}
	return img
}

// Destroy leaves the image: it is the build's product.
func (a *Artifact) Destroy() error { return nil }
