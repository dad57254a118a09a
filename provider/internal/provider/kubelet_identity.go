package provider

import (
	"context"
	"fmt"
	"regexp"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
)

// A kubelet identity is a user-assigned managed identity machines carry, as which their kubelets
// pull from Azure Container Registry through cloud-provider-azure's acr-credential-provider: a
// Windows pool's (azure.kubelet_identity_id) and an azure cluster's Linux agents'
// (azure.linux_pool.kubelet_identity_id).

// userAssignedIdentityRE is a user-assigned identity's resource ID; ARM matches the segment
// names without regard to case.
var userAssignedIdentityRE = regexp.MustCompile(`(?i)^/subscriptions/[0-9a-f-]{36}/resourceGroups/[^/]+/providers/` +
	`Microsoft\.ManagedIdentity/userAssignedIdentities/[^/]+$`)

// acrRegistriesDoc names the registries the credential provider is asked for.
const acrRegistriesDoc = "Registries in Azure's public, government and China clouds are matched (`*.azurecr.io`, `*.azurecr.us`, " +
	"`*.azurecr.cn`, `*.azurecr.de`)."

// kubeletIdentityAttribute is the attribute naming a kubelet identity, described by what
// carries it and the rest of its description.
func kubeletIdentityAttribute(machines, rest string) schema.StringAttribute {
	return schema.StringAttribute{
		Optional: true,
		Validators: []validator.String{stringvalidator.RegexMatches(userAssignedIdentityRE,
			"must be a user-assigned managed identity's resource ID: /subscriptions/<id>/resourceGroups/<group>/providers/"+
				"Microsoft.ManagedIdentity/userAssignedIdentities/<name>")},
		Description: "Resource ID of a user-assigned managed identity (e.g. `azurerm_user_assigned_identity`'s `id`) " + machines +
			" carry, as which their kubelets pull images from Azure Container Registry through cloud-provider-azure's " +
			"acr-credential-provider: pods need no image pull secret. Give the identity the `AcrPull` role on the registries " +
			"(`azurerm_role_assignment`); the provider's credential needs the Managed Identity Operator role on it (or Contributor) to " +
			"assign it, which the plan checks, and the plan reads the identity. " + acrRegistriesDoc + " " + rest,
	}
}

// readKubeletIdentity reads the identity at: its client ID and tenant, in the provider's cloud,
// as the credential provider's configuration names them.
func readKubeletIdentity(ctx context.Context, data *providerData, at path.Path, identityID string) (*v1alpha1.AzureContainerRegistry,
	diag.Diagnostics) {
	var diags diag.Diagnostics
	c, err := data.azure(ctx)
	if err != nil {
		diags.AddAttributeError(at, "Cannot Reach Azure", err.Error())
		return nil, diags
	}
	creds, err := c.RegistryCredentials(ctx, identityID)
	if err != nil {
		diags.AddAttributeError(at, "Cannot Read the Kubelet Identity", fmt.Sprintf(
			"%s.\n\nCreate the identity first (azurerm_user_assigned_identity, referenced by its id so that Terraform orders the two), "+
				"and make sure the provider's credentials may read it.", err))
		return nil, diags
	}
	return creds, diags
}

// checkKubeletIdentity checks that the identity at exists and that the provider's credential
// may assign it, which making machines carry it needs (Azure refuses the scale set otherwise:
// LinkedAuthorizationFailed).
func checkKubeletIdentity(ctx context.Context, data *providerData, at path.Path, identityID string) diag.Diagnostics {
	_, diags := readKubeletIdentity(ctx, data, at, identityID)
	if diags.HasError() {
		return diags
	}
	c, err := data.azure(ctx)
	if err != nil {
		diags.AddAttributeError(at, "Cannot Reach Azure", err.Error())
		return diags
	}
	id, err := arm.ParseResourceID(identityID)
	if err != nil {
		diags.AddAttributeError(at, "Invalid Kubelet Identity", err.Error())
		return diags
	}
	const assign = "Microsoft.ManagedIdentity/userAssignedIdentities/assign/action"
	missing, scope, err := c.MissingActions(ctx, id.SubscriptionID, id.ResourceGroupName, assign)
	switch {
	case err != nil:
		diags.AddAttributeWarning(at, "Permissions Not Checked", err.Error())
	case len(missing) > 0:
		diags.AddAttributeError(at, "Cannot Assign the Kubelet Identity", fmt.Sprintf("The provider's credential may not perform %s at %s, "+
			"which making the machines carry the identity needs (Azure refuses it with LinkedAuthorizationFailed). Give the "+
			"credential the Managed Identity Operator role on the identity (or a role that allows the action, such as Contributor), or "+
			"remove %s.", assign, scope, at))
	}
	return diags
}
