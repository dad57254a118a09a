package azure

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
)

// Tags of a kubewin image in Azure (a gallery image version or a managed image), which the
// Packer templates set from the kubewin-release data source: what a pool needs to know of the
// image before it creates anything.
const (
	TagWindowsBuild      = "kubewin.io/windows-build"
	TagKubernetesVersion = "kubewin.io/kubernetes-version"
	TagRuntime           = "kubewin.io/runtime"
	TagRuntimeVersion    = "kubewin.io/runtime-version"
)

// ImageTags reads the tags of an image: a gallery image version, a gallery image (its latest
// version's tags are not read: name the version) or a managed image.
func (c *Client) ImageTags(ctx context.Context, id string) (map[string]string, error) {
	r, err := arm.ParseResourceID(id)
	if err != nil {
		return nil, fmt.Errorf("%q is not an image's resource ID: %w", id, err)
	}
	var tags map[string]*string
	switch strings.ToLower(r.ResourceType.String()) {
	case "microsoft.compute/galleries/images/versions":
		if r.Parent == nil || r.Parent.Parent == nil {
			return nil, fmt.Errorf("%q is not a gallery image version's resource ID", id)
		}
		resp, err := c.compute.NewGalleryImageVersionsClient().Get(ctx, r.ResourceGroupName, r.Parent.Parent.Name, r.Parent.Name, r.Name, nil)
		if err != nil {
			return nil, fmt.Errorf("read image %s: %w", id, err)
		}
		tags = resp.Tags
	case "microsoft.compute/images":
		resp, err := c.compute.NewImagesClient().Get(ctx, r.ResourceGroupName, r.Name, nil)
		if err != nil {
			return nil, fmt.Errorf("read image %s: %w", id, err)
		}
		tags = resp.Tags
	default:
		return nil, fmt.Errorf("%q is neither a gallery image version nor a managed image: name the image version the kubewin Packer plugin published", id)
	}
	out := map[string]string{}
	for k, v := range tags {
		if v != nil {
			out[k] = *v
		}
	}
	return out, nil
}

// ManifestFromTags is the part of an image's manifest its tags carry: Windows build, Kubernetes
// version and runtime. An image without them is an error that says how to tag it.
func ManifestFromTags(id string, tags map[string]string) (*v1alpha1.ImageManifest, error) {
	var missing []string
	for _, k := range []string{TagWindowsBuild, TagKubernetesVersion, TagRuntime} {
		if tags[k] == "" {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("image %s has no %s tag: tag it when you publish it (the kubewin Packer examples do), or give the pool its manifest (image_manifest = file(\"…/kubewin-manifest.json\"))", id, strings.Join(missing, ", "))
	}
	build, err := strconv.ParseUint(tags[TagWindowsBuild], 10, 32)
	if err != nil {
		return nil, fmt.Errorf("image %s: tag %s=%q is not a Windows build number", id, TagWindowsBuild, tags[TagWindowsBuild])
	}
	return &v1alpha1.ImageManifest{
		APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindImageManifest,
		WindowsBuild:      v1alpha1.WindowsBuild(build),
		KubernetesVersion: tags[TagKubernetesVersion],
		Runtime:           v1alpha1.RuntimeInfo{Name: v1alpha1.RuntimeName(tags[TagRuntime]), Version: tags[TagRuntimeVersion]},
	}, nil
}
