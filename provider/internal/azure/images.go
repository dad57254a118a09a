package azure

import (
	"context"
	"fmt"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
)

// ImageTags reads the tags of an image: a gallery image version, a gallery image (its latest
// version's tags are not read: name the version) or a managed image.
func (c *Client) ImageTags(ctx context.Context, id string) (map[string]string, error) {
	r, err := arm.ParseResourceID(id)
	if err != nil {
		return nil, fmt.Errorf("%q is not an image's resource ID: %w", id, err)
	}
	// The image may be in another subscription than the scale sets (a shared gallery).
	compute := c.compute
	if !strings.EqualFold(r.SubscriptionID, c.SubscriptionID) {
		if compute, err = armcompute.NewClientFactory(r.SubscriptionID, c.cred, c.armOptions); err != nil {
			return nil, err
		}
	}
	var tags map[string]*string
	switch strings.ToLower(r.ResourceType.String()) {
	case "microsoft.compute/galleries/images/versions":
		if r.Parent == nil || r.Parent.Parent == nil {
			return nil, fmt.Errorf("%q is not a gallery image version's resource ID", id)
		}
		resp, err := compute.NewGalleryImageVersionsClient().Get(ctx, r.ResourceGroupName, r.Parent.Parent.Name, r.Parent.Name, r.Name, nil)
		if err != nil {
			return nil, fmt.Errorf("read image %s: %w", id, err)
		}
		tags = resp.Tags
	case "microsoft.compute/images":
		resp, err := compute.NewImagesClient().Get(ctx, r.ResourceGroupName, r.Name, nil)
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
