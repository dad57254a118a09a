package azure

import (
	"context"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
)

// RegistryCredentials is how a pool's kubelets pull from Azure Container Registry as the
// user-assigned identity the pool's machines carry: the identity's client ID and tenant (read
// from Azure, so that an identity that does not exist is an error before any machine is made)
// in the provider's cloud, by the name cloud-provider-azure reads it.
func (c *Client) RegistryCredentials(ctx context.Context, identityID string) (*v1alpha1.AzureContainerRegistry, error) {
	ids, err := c.UserAssignedIdentity(ctx, identityID)
	if err != nil {
		return nil, err
	}
	return &v1alpha1.AzureContainerRegistry{Cloud: c.providerCloud.Name, ResourceManagerEndpoint: c.providerCloud.ResourceManagerEndpoint,
		TenantID: ids.TenantID, IdentityClientID: ids.ClientID}, nil
}
