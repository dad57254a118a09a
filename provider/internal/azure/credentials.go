package azure

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
)

// Config is how the provider reaches Azure, with the names and environment variables of the
// azurerm provider, so that a configuration — or a Terraform Cloud workspace with Azure dynamic
// credentials — that works for azurerm works for kubewin. Set fields win over the environment.
type Config struct {
	SubscriptionID, TenantID, ClientID, ClientIDFilePath string

	ClientSecret, ClientSecretFilePath string
	// ClientCertificate is a base64-encoded PKCS#12 bundle; ClientCertificatePath a file holding one.
	ClientCertificate, ClientCertificatePath, ClientCertificatePassword string

	// UseAKSWorkloadIdentity reads the token file, client ID and tenant ID AKS workload identity
	// injects (AZURE_FEDERATED_TOKEN_FILE, AZURE_CLIENT_ID, AZURE_TENANT_ID) when not set otherwise.
	UseOIDC, UseAKSWorkloadIdentity bool
	OIDCToken, OIDCTokenFilePath    string
	// OIDCRequestURL and OIDCRequestToken fetch a token from a CI system: GitHub Actions, or an
	// Azure DevOps pipeline when ADOPipelineServiceConnectionID names its service connection.
	OIDCRequestURL, OIDCRequestToken, ADOPipelineServiceConnectionID string

	UseMSI, UseCLI bool
	// MSIEndpoint is a managed identity endpoint other than the instance metadata service.
	MSIEndpoint string
	// AuxiliaryTenantIDs are other tenants ARM requests may reach (a gallery image shared from
	// another tenant): their tokens go in x-ms-authorization-auxiliary. At most 3.
	AuxiliaryTenantIDs []string

	// Environment is public, usgovernment or china; MetadataHost, when set, names a host serving
	// the cloud's metadata document instead (custom clouds, Azure Stack, tests).
	Environment, MetadataHost string
}

// Environment variables, as azurerm reads them (and the CI systems set them).
var envNames = map[string][]string{
	"subscription_id":                    {"ARM_SUBSCRIPTION_ID"},
	"tenant_id":                          {"ARM_TENANT_ID"},
	"client_id":                          {"ARM_CLIENT_ID"},
	"client_id_file_path":                {"ARM_CLIENT_ID_FILE_PATH"},
	"client_secret":                      {"ARM_CLIENT_SECRET"},
	"client_secret_file_path":            {"ARM_CLIENT_SECRET_FILE_PATH"},
	"client_certificate":                 {"ARM_CLIENT_CERTIFICATE"},
	"client_certificate_path":            {"ARM_CLIENT_CERTIFICATE_PATH"},
	"client_certificate_password":        {"ARM_CLIENT_CERTIFICATE_PASSWORD"},
	"use_oidc":                           {"ARM_USE_OIDC"},
	"use_aks_workload_identity":          {"ARM_USE_AKS_WORKLOAD_IDENTITY"},
	"oidc_token":                         {"ARM_OIDC_TOKEN"},
	"oidc_token_file_path":               {"ARM_OIDC_TOKEN_FILE_PATH"},
	"oidc_request_url":                   {"ARM_OIDC_REQUEST_URL", "ACTIONS_ID_TOKEN_REQUEST_URL", "SYSTEM_OIDCREQUESTURI"},
	"oidc_request_token":                 {"ARM_OIDC_REQUEST_TOKEN", "ACTIONS_ID_TOKEN_REQUEST_TOKEN", "SYSTEM_ACCESSTOKEN"},
	"ado_pipeline_service_connection_id": {"ARM_ADO_PIPELINE_SERVICE_CONNECTION_ID", "ARM_OIDC_AZURE_SERVICE_CONNECTION_ID"},
	"use_msi":                            {"ARM_USE_MSI"},
	"msi_endpoint":                       {"ARM_MSI_ENDPOINT"},
	"auxiliary_tenant_ids":               {"ARM_AUXILIARY_TENANT_IDS"},
	"use_cli":                            {"ARM_USE_CLI"},
	"environment":                        {"ARM_ENVIRONMENT"},
	"metadata_host":                      {"ARM_METADATA_HOSTNAME"},
}

// EnvNames returns the environment variables an attribute defaults to, for documentation.
func EnvNames(attribute string) []string { return envNames[attribute] }

// Env returns the first set environment variable of an attribute.
func Env(attribute string) string {
	for _, name := range envNames[attribute] {
		if v := os.Getenv(name); v != "" {
			return v
		}
	}
	return ""
}

// EnvBool is Env as a boolean, with a default for an unset variable.
func EnvBool(attribute string, def bool) (bool, error) {
	v := Env(attribute)
	if v == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s=%q is not a boolean", envNames[attribute][0], v)
	}
	return b, nil
}

// ConfigFrom makes the configuration of the azure block's set values by attribute name (booleans
// as strconv.ParseBool reads them); an attribute absent from set is read from its environment
// variables, so ConfigFrom(nil) is the configuration of the environment alone.
func ConfigFrom(set map[string]string) (Config, error) {
	var errs []error
	str := func(attribute string) string {
		if v, ok := set[attribute]; ok {
			return v
		}
		return Env(attribute)
	}
	boolean := func(attribute string, def bool) bool {
		v, ok := set[attribute]
		if !ok {
			b, err := EnvBool(attribute, def)
			errs = append(errs, err)
			return b
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s = %q is not a boolean", attribute, v))
		}
		return b
	}
	c := Config{
		SubscriptionID: str("subscription_id"), TenantID: str("tenant_id"),
		ClientID: str("client_id"), ClientIDFilePath: str("client_id_file_path"),
		ClientSecret: str("client_secret"), ClientSecretFilePath: str("client_secret_file_path"),
		ClientCertificate: str("client_certificate"), ClientCertificatePath: str("client_certificate_path"),
		ClientCertificatePassword: str("client_certificate_password"),
		UseOIDC:                   boolean("use_oidc", false), UseAKSWorkloadIdentity: boolean("use_aks_workload_identity", false),
		OIDCToken: str("oidc_token"), OIDCTokenFilePath: str("oidc_token_file_path"),
		OIDCRequestURL: str("oidc_request_url"), OIDCRequestToken: str("oidc_request_token"),
		ADOPipelineServiceConnectionID: str("ado_pipeline_service_connection_id"),
		UseMSI:                         boolean("use_msi", false), UseCLI: boolean("use_cli", true), MSIEndpoint: str("msi_endpoint"),
		Environment: str("environment"), MetadataHost: str("metadata_host"),
	}
	// A list, separated by semicolons as azurerm reads ARM_AUXILIARY_TENANT_IDS.
	for _, id := range strings.Split(str("auxiliary_tenant_ids"), ";") {
		if id = strings.TrimSpace(id); id != "" {
			c.AuxiliaryTenantIDs = append(c.AuxiliaryTenantIDs, id)
		}
	}
	if len(c.AuxiliaryTenantIDs) > maxAuxiliaryTenants {
		errs = append(errs, fmt.Errorf("auxiliary_tenant_ids names %d tenants: ARM takes at most %d "+
			"(https://learn.microsoft.com/azure/azure-resource-manager/management/authenticate-multi-tenant)",
			len(c.AuxiliaryTenantIDs), maxAuxiliaryTenants))
	}
	return c, errors.Join(errs...)
}

// maxAuxiliaryTenants is how many auxiliary tokens one ARM request may carry.
const maxAuxiliaryTenants = 3

// Workload identity tokens that platforms hand a run: HCP Terraform's generic token (with
// TFC_WORKLOAD_IDENTITY_AUDIENCE set on the workspace), and AKS workload identity's token file,
// client ID and tenant ID (https://azure.github.io/azure-workload-identity/docs/topics/service-account-labels-and-annotations.html).
const (
	envTFCWorkloadIdentityToken = "TFC_WORKLOAD_IDENTITY_TOKEN"
	envAzureFederatedTokenFile  = "AZURE_FEDERATED_TOKEN_FILE"
	envAzureClientID            = "AZURE_CLIENT_ID"
	envAzureTenantID            = "AZURE_TENANT_ID"
)

// tokenExchangeAudience is the audience Entra expects of federated tokens in the public cloud;
// the sovereign clouds expect their own
// (https://learn.microsoft.com/entra/workload-id/workload-identity-federation-create-trust).
const tokenExchangeAudience = "api://AzureADTokenExchange"

// TokenExchangeAudience is the audience of the federated tokens the configuration's cloud expects.
func (c Config) TokenExchangeAudience() string {
	switch strings.ToLower(c.Environment) {
	case "usgovernment", "usgovernmentl4":
		return tokenExchangeAudience + "USGov"
	case "china":
		return tokenExchangeAudience + "China"
	}
	return tokenExchangeAudience
}

// Cloud resolves the cloud: a well-known environment, or the metadata document of MetadataHost.
func (c Config) Cloud(ctx context.Context, client *http.Client) (cloud.Configuration, error) {
	cl, _, err := c.resolveCloud(ctx, client)
	return cl, err
}

// ProviderCloud is the cloud as the out-of-tree Azure cloud provider's configuration names it:
// Name is its "cloud" (AzurePublicCloud, AzureUSGovernment, AzureChinaCloud, or a custom
// cloud's name in its metadata document) and ResourceManagerEndpoint, for a custom cloud only,
// where the cloud provider reads that document
// (https://kubernetes-sigs.github.io/cloud-provider-azure/install/configs/, "cloud" and
// "resourceManagerEndpoint"; azclient's GetAzureCloudConfigAndEnvConfig).
type ProviderCloud struct {
	Name, ResourceManagerEndpoint string
}

// resolveCloud resolves the cloud for the SDK and for the cloud provider. The cloud provider's
// names are azclient's EnvironmentMapping keys.
func (c Config) resolveCloud(ctx context.Context, client *http.Client) (cloud.Configuration, ProviderCloud, error) {
	if c.MetadataHost != "" {
		cl, name, err := cloudFromMetadata(ctx, client, c.MetadataHost)
		return cl, ProviderCloud{Name: name, ResourceManagerEndpoint: "https://" + c.MetadataHost}, err
	}
	switch strings.ToLower(c.Environment) {
	case "", "public", "global":
		return cloud.AzurePublic, ProviderCloud{Name: "AzurePublicCloud"}, nil
	case "usgovernment", "usgovernmentl4":
		return cloud.AzureGovernment, ProviderCloud{Name: "AzureUSGovernment"}, nil
	case "china":
		return cloud.AzureChina, ProviderCloud{Name: "AzureChinaCloud"}, nil
	}
	return cloud.Configuration{}, ProviderCloud{}, fmt.Errorf("environment %q is not an Azure cloud kubewin knows: use public, usgovernment or "+
		"china, or metadata_host for another cloud", c.Environment)
}

// metadataAPIVersion is the version of the cloud metadata document azurerm reads.
const metadataAPIVersion = "2022-09-01"

// cloudFromMetadata reads https://<host>/metadata/endpoints, as azurerm does for metadata_host:
// the cloud and its name.
func cloudFromMetadata(ctx context.Context, client *http.Client, host string) (cloud.Configuration, string, error) {
	u := url.URL{Scheme: "https", Host: host, Path: "/metadata/endpoints", RawQuery: "api-version=" + metadataAPIVersion}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return cloud.Configuration{}, "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return cloud.Configuration{}, "", fmt.Errorf("read the cloud metadata from metadata_host %s: %w", host, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return cloud.Configuration{}, "", fmt.Errorf("read the cloud metadata from %s: %s: %s", u.String(), resp.Status, body)
	}
	var md struct {
		Authentication struct {
			LoginEndpoint string   `json:"loginEndpoint"`
			Audiences     []string `json:"audiences"`
		} `json:"authentication"`
		ResourceManager string `json:"resourceManager"`
		Name            string `json:"name"`
	}
	if err := json.Unmarshal(body,
		&md); err != nil || md.Authentication.LoginEndpoint == "" || md.ResourceManager == "" || len(md.Authentication.Audiences) == 0 {
		return cloud.Configuration{}, "", fmt.Errorf("the cloud metadata at %s names no login endpoint, resource manager and audience (%v)",
			u.String(), err)
	}
	cl := cloud.Configuration{
		ActiveDirectoryAuthorityHost: strings.TrimSuffix(md.Authentication.LoginEndpoint, "/") + "/",
		Services: map[cloud.ServiceName]cloud.ServiceConfiguration{
			cloud.ResourceManager: {Endpoint: strings.TrimSuffix(md.ResourceManager, "/"), Audience: md.Authentication.Audiences[0]},
		},
	}
	return cl, md.Name, nil
}

// Credential builds the credential the configuration names, in azurerm's order: a client
// certificate, a client secret, an OIDC token (given, in a file, from HCP Terraform, from AKS
// workload identity, or requested from a CI system), a managed identity, the Azure CLI. The
// first one configured is used; none configured is an error that says what to set.
func (c Config) Credential(opts azcore.ClientOptions, customCloud bool) (azcore.TokenCredential, error) {
	clientID, err := valueOrFile(c.ClientID, c.ClientIDFilePath, "client_id")
	if err != nil {
		return nil, err
	}
	if c.UseAKSWorkloadIdentity && clientID == "" {
		clientID = os.Getenv(envAzureClientID)
	}
	if c.UseAKSWorkloadIdentity && c.TenantID == "" {
		c.TenantID = os.Getenv(envAzureTenantID)
	}
	secret, err := valueOrFile(c.ClientSecret, c.ClientSecretFilePath, "client_secret")
	if err != nil {
		return nil, err
	}
	needTenant := func(kind string) error {
		if c.TenantID == "" || clientID == "" {
			return fmt.Errorf("authenticating with %s needs tenant_id and client_id (or ARM_TENANT_ID and ARM_CLIENT_ID)", kind)
		}
		return nil
	}
	// Tokens for the auxiliary tenants come from the same credential.
	tenants := c.AuxiliaryTenantIDs
	switch {
	case c.ClientCertificate != "" || c.ClientCertificatePath != "":
		if err := needTenant("a client certificate"); err != nil {
			return nil, err
		}
		der, err := certificateBytes(c.ClientCertificate, c.ClientCertificatePath)
		if err != nil {
			return nil, err
		}
		certs, key, err := azidentity.ParseCertificates(der, []byte(c.ClientCertificatePassword))
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w (check client_certificate_password)", err)
		}
		return azidentity.NewClientCertificateCredential(c.TenantID, clientID, certs, key, &azidentity.ClientCertificateCredentialOptions{
			ClientOptions: opts, DisableInstanceDiscovery: customCloud, SendCertificateChain: true, AdditionallyAllowedTenants: tenants,
		})
	case secret != "":
		if err := needTenant("a client secret"); err != nil {
			return nil, err
		}
		return azidentity.NewClientSecretCredential(c.TenantID, clientID, secret, &azidentity.ClientSecretCredentialOptions{
			ClientOptions: opts, DisableInstanceDiscovery: customCloud, AdditionallyAllowedTenants: tenants,
		})
	}
	if assertion := c.oidcAssertion(opts); assertion != nil {
		if err := needTenant("an OIDC token"); err != nil {
			return nil, err
		}
		return azidentity.NewClientAssertionCredential(c.TenantID, clientID, assertion, &azidentity.ClientAssertionCredentialOptions{
			ClientOptions: opts, DisableInstanceDiscovery: customCloud, AdditionallyAllowedTenants: tenants,
		})
	}
	switch {
	case c.UseMSI && c.MSIEndpoint != "":
		return newMSIEndpointCredential(c.MSIEndpoint, clientID, opts)
	case c.UseMSI:
		o := &azidentity.ManagedIdentityCredentialOptions{ClientOptions: opts}
		if clientID != "" {
			o.ID = azidentity.ClientID(clientID)
		}
		return azidentity.NewManagedIdentityCredential(o)
	case c.UseCLI:
		return azidentity.NewAzureCLICredential(&azidentity.AzureCLICredentialOptions{TenantID: c.TenantID, AdditionallyAllowedTenants: tenants})
	}
	return nil, errors.New("no Azure credential is configured: set client_id with client_secret or client_certificate, or use_oidc with an OIDC token " +
		"(oidc_token, oidc_token_file_path, a Terraform Cloud workspace with Azure dynamic credentials, or a CI system's token request), " +
		"or use_msi for a managed identity, or leave use_cli on and log in with `az login`; each has an ARM_* environment variable, as for the " +
		"azurerm provider")
}

// oidcAssertion returns a function giving the federated token to exchange, or nil when OIDC
// is not configured. Tokens in files are read on every exchange: platforms refresh them.
func (c Config) oidcAssertion(opts azcore.ClientOptions) func(context.Context) (string, error) {
	if !c.UseOIDC && !c.UseAKSWorkloadIdentity && os.Getenv(envTFCWorkloadIdentityToken) == "" {
		return nil
	}
	fromFile := func(path string) func(context.Context) (string, error) {
		return func(context.Context) (string, error) {
			b, err := os.ReadFile(path)
			if err != nil {
				return "", fmt.Errorf("read the OIDC token file: %w", err)
			}
			return strings.TrimSpace(string(b)), nil
		}
	}
	fixed := func(token string) func(context.Context) (string, error) {
		return func(context.Context) (string, error) { return token, nil }
	}
	switch {
	case c.OIDCToken != "":
		return fixed(c.OIDCToken)
	case c.OIDCTokenFilePath != "":
		return fromFile(c.OIDCTokenFilePath)
	case os.Getenv(envTFCWorkloadIdentityToken) != "":
		return fixed(os.Getenv(envTFCWorkloadIdentityToken))
	case c.UseAKSWorkloadIdentity && os.Getenv(envAzureFederatedTokenFile) != "":
		return fromFile(os.Getenv(envAzureFederatedTokenFile))
	case c.OIDCRequestURL != "" && c.OIDCRequestToken != "" && c.ADOPipelineServiceConnectionID != "":
		return c.requestADOToken(opts)
	case c.OIDCRequestURL != "" && c.OIDCRequestToken != "":
		return c.requestOIDCToken(opts)
	}
	return nil
}

// requestOIDCToken asks a CI system for a token, as GitHub Actions serves them:
// GET <request URL>&audience=<the cloud's token exchange audience> with the request token as
// bearer, answered {"value": token}.
func (c Config) requestOIDCToken(opts azcore.ClientOptions) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		u, err := url.Parse(c.OIDCRequestURL)
		if err != nil {
			return "", fmt.Errorf("oidc_request_url: %w", err)
		}
		q := u.Query()
		q.Set("audience", c.TokenExchangeAudience())
		u.RawQuery = q.Encode()
		return c.requestToken(ctx, opts, http.MethodGet, u, "value")
	}
}

// adoOIDCAPIVersion is the version of Azure DevOps' OIDC token API azidentity's
// AzurePipelinesCredential calls.
const adoOIDCAPIVersion = "7.1"

// requestADOToken asks an Azure DevOps pipeline for its service connection's token, as
// azidentity's AzurePipelinesCredential and azurerm do: POST
// <SYSTEM_OIDCREQUESTURI>?api-version=7.1&serviceConnectionId=<ID> with System.AccessToken as
// bearer, answered {"oidcToken": token}.
func (c Config) requestADOToken(opts azcore.ClientOptions) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		u, err := url.Parse(c.OIDCRequestURL)
		if err != nil {
			return "", fmt.Errorf("oidc_request_url: %w", err)
		}
		q := u.Query()
		q.Set("api-version", adoOIDCAPIVersion)
		q.Set("serviceConnectionId", c.ADOPipelineServiceConnectionID)
		u.RawQuery = q.Encode()
		return c.requestToken(ctx, opts, http.MethodPost, u, "oidcToken")
	}
}

// requestToken makes a CI system's token request and returns the token in the answer's field.
func (c Config) requestToken(ctx context.Context, opts azcore.ClientOptions, method string, u *url.URL, field string) (string, error) {
	client := &http.Client{Timeout: 30 * time.Second}
	if hc, ok := opts.Transport.(*http.Client); ok {
		client = hc
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+c.OIDCRequestToken)
	req.Header.Set("Content-Type", "application/json")
	// Azure DevOps answers an unauthenticated request with a sign-in redirect unless told not to.
	req.Header.Set("X-TFS-FedAuthRedirect", "Suppress")
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("request an OIDC token: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("request an OIDC token from %s: %s", u.Host, resp.Status)
	}
	var body map[string]any
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&body); err != nil {
		return "", fmt.Errorf("request an OIDC token from %s: %w", u.Host, err)
	}
	token, _ := body[field].(string)
	if token == "" {
		return "", fmt.Errorf("request an OIDC token from %s: the answer has no %q", u.Host, field)
	}
	return token, nil
}

func valueOrFile(value, path, attribute string) (string, error) {
	if value != "" || path == "" {
		return value, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s_file_path: %w", attribute, err)
	}
	return strings.TrimSpace(string(b)), nil
}

func certificateBytes(encoded, path string) ([]byte, error) {
	if encoded != "" {
		der, err := base64.StdEncoding.DecodeString(encoded)
		if err != nil {
			return nil, fmt.Errorf("client_certificate is not base64 (a PKCS#12 bundle, as `base64 -w0 cert.pfx` prints it): %w", err)
		}
		return der, nil
	}
	der, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("client_certificate_path: %w", err)
	}
	return der, nil
}
