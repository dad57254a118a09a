package provider

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/kubewin/kubewin/provider/internal/azure"
)

// azureModel is the provider's azure block: the azurerm provider's authentication arguments,
// each defaulting to azurerm's environment variable.
type azureModel struct {
	SubscriptionID            types.String `tfsdk:"subscription_id"`
	TenantID                  types.String `tfsdk:"tenant_id"`
	ClientID                  types.String `tfsdk:"client_id"`
	ClientIDFilePath          types.String `tfsdk:"client_id_file_path"`
	ClientSecret              types.String `tfsdk:"client_secret"`
	ClientSecretFilePath      types.String `tfsdk:"client_secret_file_path"`
	ClientCertificate         types.String `tfsdk:"client_certificate"`
	ClientCertificatePath     types.String `tfsdk:"client_certificate_path"`
	ClientCertificatePassword types.String `tfsdk:"client_certificate_password"`
	UseOIDC                   types.Bool   `tfsdk:"use_oidc"`
	UseAKSWorkloadIdentity    types.Bool   `tfsdk:"use_aks_workload_identity"`
	OIDCToken                 types.String `tfsdk:"oidc_token"`
	OIDCTokenFilePath         types.String `tfsdk:"oidc_token_file_path"`
	OIDCRequestURL            types.String `tfsdk:"oidc_request_url"`
	OIDCRequestToken          types.String `tfsdk:"oidc_request_token"`
	ADOServiceConnectionID    types.String `tfsdk:"ado_pipeline_service_connection_id"`
	UseMSI                    types.Bool   `tfsdk:"use_msi"`
	MSIEndpoint               types.String `tfsdk:"msi_endpoint"`
	AuxiliaryTenantIDs        types.List   `tfsdk:"auxiliary_tenant_ids"`
	UseCLI                    types.Bool   `tfsdk:"use_cli"`
	Environment               types.String `tfsdk:"environment"`
	MetadataHost              types.String `tfsdk:"metadata_host"`
}

func azureBlock() schema.Block {
	str := func(attribute, desc string, sensitive bool) schema.StringAttribute {
		return schema.StringAttribute{Optional: true, Sensitive: sensitive, Description: desc + envDoc(attribute)}
	}
	boolean := func(attribute, desc string) schema.BoolAttribute {
		return schema.BoolAttribute{Optional: true, Description: desc + envDoc(attribute)}
	}
	return schema.SingleNestedBlock{
		Description: "Connection to Azure for the `azure` backend, with the arguments and `ARM_*` environment variables of the azurerm provider. " +
			"The first credential configured is used, in azurerm's order: client certificate, client secret, " +
			"OIDC token (given, in a file, from AKS workload identity, or requested from an Azure DevOps service connection or GitHub Actions), " +
			"managed identity, Azure CLI. " +
			"A Terraform Cloud workspace with Azure dynamic credentials needs nothing here: the run's `ARM_CLIENT_ID`, `ARM_OIDC_TOKEN` and `ARM_USE_OIDC` " +
			"are read as azurerm reads them (set `ARM_SUBSCRIPTION_ID` and `ARM_TENANT_ID` on the workspace); the generic `TFC_WORKLOAD_IDENTITY_TOKEN` " +
			"works too. " +
			"No credential is stored in the state or logged.",
		Attributes: map[string]schema.Attribute{
			"subscription_id": str("subscription_id", "The subscription the backend creates scale sets in and whose route tables it writes.",
				false),
			"tenant_id": str("tenant_id", "The Entra ID tenant.", false),
			"client_id": str("client_id", "The client (application) ID of a service principal, or of a user-assigned managed identity.",
				false),
			"client_id_file_path":     str("client_id_file_path", "A file holding the client ID.", false),
			"client_secret":           str("client_secret", "A client secret of the service principal.", true),
			"client_secret_file_path": str("client_secret_file_path", "A file holding the client secret.", false),
			"client_certificate": str("client_certificate", "A PKCS#12 bundle with the service principal's certificate and key, base64-encoded.",
				true),
			"client_certificate_path":     str("client_certificate_path", "A PKCS#12 file with the service principal's certificate and key.", false),
			"client_certificate_password": str("client_certificate_password", "The password of the PKCS#12 bundle.", true),
			"use_oidc":                    boolean("use_oidc", "Authenticate with an OIDC token exchanged for an Entra token (workload identity federation)."),
			"use_aks_workload_identity": boolean("use_aks_workload_identity",
				"Authenticate with AKS workload identity: the token file, client ID and tenant ID "+
					"its webhook injects (`AZURE_FEDERATED_TOKEN_FILE`, `AZURE_CLIENT_ID`, `AZURE_TENANT_ID`) are read when not set otherwise."),
			"oidc_token":           str("oidc_token", "An OIDC token to exchange.", true),
			"oidc_token_file_path": str("oidc_token_file_path", "A file holding the OIDC token, read again at every exchange.", false),
			"oidc_request_url": str("oidc_request_url", "The URL a CI system serves OIDC tokens at: GitHub Actions, or an Azure DevOps pipeline "+
				"with `ado_pipeline_service_connection_id`. The token is requested for the cloud's audience: `api://AzureADTokenExchange`, "+
				"`api://AzureADTokenExchangeUSGov` (usgovernment) or `api://AzureADTokenExchangeChina` (china).", false),
			"oidc_request_token": str("oidc_request_token", "The bearer token for `oidc_request_url` (in Azure DevOps, `$(System.AccessToken)`).", true),
			"ado_pipeline_service_connection_id": str("ado_pipeline_service_connection_id", "The ID of an Azure DevOps service connection with workload "+
				"identity federation: its token is requested from the pipeline (`oidc_request_url`, `oidc_request_token`) and exchanged. "+
				"Without it, a token request is GitHub Actions'.", false),
			"use_msi": boolean("use_msi", "Authenticate with the machine's managed identity."),
			"msi_endpoint": str("msi_endpoint",
				"A managed identity endpoint to use instead of the instance metadata service, asked as that service is.", false),
			"auxiliary_tenant_ids": schema.ListAttribute{
				Optional: true, ElementType: types.StringType,
				Validators: []validator.List{listvalidator.SizeAtMost(3)},
				Description: "Up to 3 other tenants whose resources the backend uses, such as a gallery image shared from another tenant: " +
					"a token for each goes with every ARM request (`x-ms-authorization-auxiliary`), as ARM requires of a scale set or machine " +
					"made from such an image, and the image's tags are read with a token of its tenant; the app must be registered in each " +
					"and allowed to read the image. Without its tenant here, such an image is refused at plan time (with `image_manifest`, " +
					"at apply) naming the tenant to add. Default: `$ARM_AUXILIARY_TENANT_IDS` (separated by `;`).",
			},
			"use_cli": boolean("use_cli", "Authenticate as the Azure CLI's logged-in account when nothing else is configured. Default `true`."),
			"environment": schema.StringAttribute{
				Optional:    true,
				Validators:  []validator.String{stringvalidator.OneOf("public", "usgovernment", "china")},
				Description: "The Azure cloud: `public`, `usgovernment` or `china`. Default `public`." + envDoc("environment"),
			},
			"metadata_host": str("metadata_host", "A host serving the cloud's metadata document (`/metadata/endpoints`), for custom clouds; it "+
				"overrides `environment`, and instance discovery is off.", false),
		},
	}
}

func envDoc(attribute string) string {
	names := azure.EnvNames(attribute)
	if len(names) == 0 {
		return ""
	}
	return " Default: `$" + strings.Join(names, "`, then `$") + "`."
}

// config is the block's settings over the environment.
func (a *azureModel) config() (azure.Config, bool, diag.Diagnostics) {
	var diags diag.Diagnostics
	if a == nil {
		a = &azureModel{}
	}
	for _, v := range []types.String{a.SubscriptionID, a.TenantID, a.ClientID, a.ClientSecret, a.OIDCToken, a.MetadataHost} {
		if v.IsUnknown() {
			return azure.Config{}, false, diags // known only at apply: the backend is configured then
		}
	}
	set := map[string]string{}
	v := reflect.ValueOf(a).Elem()
	for i := range v.NumField() {
		attribute := v.Type().Field(i).Tag.Get("tfsdk")
		switch f := v.Field(i).Interface().(type) {
		case types.String:
			if !f.IsNull() && !f.IsUnknown() {
				set[attribute] = f.ValueString()
			}
		case types.Bool:
			if !f.IsNull() && !f.IsUnknown() {
				set[attribute] = strconv.FormatBool(f.ValueBool())
			}
		case types.List:
			if !f.IsNull() && !f.IsUnknown() {
				var ids []string
				diags.Append(f.ElementsAs(context.Background(), &ids, false)...)
				set[attribute] = strings.Join(ids, ";")
			}
		}
	}
	c, err := azure.ConfigFrom(set)
	if err != nil {
		diags.AddAttributeError(path.Root("azure"), "Invalid Azure Setting", err.Error())
	}
	return c, true, diags
}

// azureConn connects to Azure on first use, so that configurations without azure resources
// never need Azure credentials.
type azureConn struct {
	config azure.Config
	known  bool
	once   sync.Once
	client *azure.Client
	err    error
}

// azure returns the Azure client, or an error saying what to configure.
func (d *providerData) azure(ctx context.Context) (*azure.Client, error) {
	a := d.azureConn
	if !a.known {
		return nil, fmt.Errorf("the provider's azure settings are known only after apply")
	}
	a.once.Do(func() { a.client, a.err = azure.New(ctx, a.config) })
	if a.err != nil {
		return nil, fmt.Errorf("connect to Azure (the provider's azure block, or ARM_* variables): %w", a.err)
	}
	return a.client, nil
}
