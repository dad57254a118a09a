package azure

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kubewin/kubewin/internal/testkit/armtest"
	"github.com/kubewin/kubewin/provider/internal/pool"
)

// A pool's image shared from a gallery of another tenant, where the provider's app is registered
// too: without that tenant among the auxiliary tenants, reading the image and creating the scale
// set fail naming auxiliary_tenant_ids and the tenant; with it, both succeed.
func TestImageOfAnotherTenant(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	other := server.AddTenant(armtest.Tenant{ClientIDs: []string{server.Credentials().ClientID}})
	image := "/subscriptions/" + other.SubscriptionID + "/resourceGroups/gallery/providers/Microsoft.Compute/galleries/g/images/w/versions/1.0.0"
	if err := server.AddImage(image, map[string]string{"kubewin.io/runtime": "containerd"}); err != nil {
		t.Fatal(err)
	}
	s := testScaleSet(t, "pool-shared")
	s.Machines.ImageID = image
	t.Cleanup(func() { _ = s.Destroy(context.Background()) })
	names := func(err error) bool {
		return err != nil && strings.Contains(err.Error(), "add "+other.ID+" to auxiliary_tenant_ids") &&
			strings.Contains(err.Error(), "ARM_AUXILIARY_TENANT_IDS")
	}

	if _, err := s.Client.ImageTags(ctx, image); !names(err) || !strings.Contains(err.Error(), "InvalidAuthenticationTokenTenant") {
		t.Errorf("reading the image without the auxiliary tenant: %v", err)
	}
	_, err := s.Add(ctx, 1, []byte("config"), nil)
	var ae *pool.ActionError
	if !errors.As(err, &ae) || ae.Summary != "Image in Another Tenant" || !names(errors.New(ae.Remedy)) ||
		!strings.Contains(err.Error(), "LinkedAuthorizationFailed") {
		t.Errorf("creating the scale set without the auxiliary tenant: %v", err)
	}

	s.Client = secretClient(ctx, t, other.ID)
	tags, err := s.Client.ImageTags(ctx, image)
	if err != nil || tags["kubewin.io/runtime"] != "containerd" {
		t.Errorf("reading the image with the auxiliary tenant: %v, %v", tags, err)
	}
	if added, err := s.Add(ctx, 1, []byte("config"), nil); err != nil || len(added) != 1 {
		t.Errorf("creating the scale set with the auxiliary tenant: %v, %v", added, err)
	}
}
