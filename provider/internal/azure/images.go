package azure

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
)

// ImageTags reads the tags of an image: a gallery image version, a gallery image (its latest
// version's tags are not read: name the version) or a managed image. An image of another tenant's
// subscription is read with a token of that tenant, one of the auxiliary tenants (tenants.go).
func (c *Client) ImageTags(ctx context.Context, id string) (map[string]string, error) {
	r, err := arm.ParseResourceID(id)
	if err != nil {
		return nil, fmt.Errorf("%q is not an image's resource ID: %w", id, err)
	}
	tags, err := c.imageTags(ctx, r, c.cred)
	var re *azcore.ResponseError
	if errors.As(err, &re) && re.ErrorCode == "InvalidAuthenticationTokenTenant" {
		tenant := challengeTenant(re.RawResponse.Header)
		if !c.auxiliary(tenant) {
			return nil, fmt.Errorf("read image %s: %s\n\n%w", id, auxiliaryTenantRemedy(r.SubscriptionID, tenant), err)
		}
		tags, err = c.imageTags(ctx, r, tenantCredential{c.cred, tenant})
	}
	if err != nil {
		return nil, fmt.Errorf("read image %s: %w", id, err)
	}
	out := map[string]string{}
	for k, v := range tags {
		if v != nil {
			out[k] = *v
		}
	}
	return out, nil
}

// imageTags reads an image's tags with cred; the image may be in another subscription than the
// scale sets (a shared gallery).
func (c *Client) imageTags(ctx context.Context, r *arm.ResourceID, cred azcore.TokenCredential) (map[string]*string, error) {
	compute, err := armcompute.NewClientFactory(r.SubscriptionID, cred, c.armOptions)
	if err != nil {
		return nil, err
	}
	switch strings.ToLower(r.ResourceType.String()) {
	case "microsoft.compute/galleries/images/versions":
		if r.Parent == nil || r.Parent.Parent == nil {
			return nil, fmt.Errorf("not a gallery image version's resource ID")
		}
		resp, err := compute.NewGalleryImageVersionsClient().Get(ctx, r.ResourceGroupName, r.Parent.Parent.Name, r.Parent.Name, r.Name, nil)
		return resp.Tags, err
	case "microsoft.compute/images":
		resp, err := compute.NewImagesClient().Get(ctx, r.ResourceGroupName, r.Name, nil)
		return resp.Tags, err
	}
	return nil, fmt.Errorf("neither a gallery image version nor a managed image: name the image version the kubewin Packer plugin published")
}
