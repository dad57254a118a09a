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

	UseOIDC, UseAKSWorkloadIdentity bool
	OIDCToken, OIDCTokenFilePath    string
	// OIDCRequestURL and OIDCRequestToken fetch a token from a CI system (GitHub Actions).
	OIDCRequestURL, OIDCRequestToken string

	UseMSI, UseCLI bool

	// Environment is public, usgovernment or china; MetadataHost, when set, names a host serving
	// the cloud's metadata document instead (custom clouds, Azure Stack, tests).
	Environment, MetadataHost string
}

// Environment variables, as azurerm reads them (and the CI systems set them).
var envNames = map[string][]string{
	"subscription_id":             {"ARM_SUBSCRIPTION_ID"},
	"tenant_id":                   {"ARM_TENANT_ID"},
	"client_id":                   {"ARM_CLIENT_ID"},
	"client_id_file_path":         {"ARM_CLIENT_ID_FILE_PATH"},
	"client_secret":               {"ARM_CLIENT_SECRET"},
	"client_secret_file_path":     {"ARM_CLIENT_SECRET_FILE_PATH"},
	"client_certificate":          {"ARM_CLIENT_CERTIFICATE"},
	"client_certificate_path":     {"ARM_CLIENT_CERTIFICATE_PATH"},
	"client_certificate_password": {"ARM_CLIENT_CERTIFICATE_PASSWORD"},
	"use_oidc":                    {"ARM_USE_OIDC"},
	"use_aks_workload_identity":   {"ARM_USE_AKS_WORKLOAD_IDENTITY"},
	"oidc_token":                  {"ARM_OIDC_TOKEN"},
	"oidc_token_file_path":        {"ARM_OIDC_TOKEN_FILE_PATH"},
	"oidc_request_url":            {"ARM_OIDC_REQUEST_URL", "ACTIONS_ID_TOKEN_REQUEST_URL"},
	"oidc_request_token":          {"ARM_OIDC_REQUEST_TOKEN", "ACTIONS_ID_TOKEN_REQUEST_TOKEN"},
	"use_msi":                     {"ARM_USE_MSI"},
	"use_cli":                     {"ARM_USE_CLI"},
	"environment":                 {"ARM_ENVIRONMENT"},
	"metadata_host":               {"ARM_METADATA_HOSTNAME"},
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

// Workload identity tokens that platforms hand a run: HCP Terraform's generic token (with
// TFC_WORKLOAD_IDENTITY_AUDIENCE set on the workspace), and AKS workload identity's token file.
const (
	envTFCWorkloadIdentityToken = "TFC_WORKLOAD_IDENTITY_TOKEN"
	envAzureFederatedTokenFile  = "AZURE_FEDERATED_TOKEN_FILE"
)

// tokenExchangeAudience is the audience Entra expects of federated tokens.
const tokenExchangeAudience = "api://AzureADTokenExchange"

// Cloud resolves the cloud: a well-known environment, or the metadata document of MetadataHost.
func (c Config) Cloud(ctx context.Context, client *http.Client) (cloud.Configuration, error) {
	if c.MetadataHost != "" {
		return cloudFromMetadata(ctx, client, c.MetadataHost)
	}
	switch strings.ToLower(c.Environment) {
	case "", "public", "global":
		return cloud.AzurePublic, nil
	case "usgovernment", "usgovernmentl4":
		return cloud.AzureGovernment, nil
	case "china":
		return cloud.AzureChina, nil
	}
	return cloud.Configuration{}, fmt.Errorf("environment %q is not an Azure cloud kubewin knows: use public, usgovernment or china, or "+
		"metadata_host for another cloud", c.Environment)
}

// metadataAPIVersion is the version of the cloud metadata document azurerm reads.
const metadataAPIVersion = "2022-09-01"

// cloudFromMetadata reads https://<host>/metadata/endpoints, as azurerm does for metadata_host.
func cloudFromMetadata(ctx context.Context, client *http.Client, host string) (cloud.Configuration, error) {
	u := url.URL{Scheme: "https", Host: host, Path: "/metadata/endpoints", RawQuery: "api-version=" + metadataAPIVersion}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return cloud.Configuration{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return cloud.Configuration{}, fmt.Errorf("read the cloud metadata from metadata_host %s: %w", host, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return cloud.Configuration{}, fmt.Errorf("read the cloud metadata from %s: %s: %s", u.String(), resp.Status, body)
	}
	var md struct {
		Authentication struct {
			LoginEndpoint string   `json:"loginEndpoint"`
			Audiences     []string `json:"audiences"`
		} `json:"authentication"`
		ResourceManager string `json:"resourceManager"`
	}
	if err := json.Unmarshal(body,
		&md); err != nil || md.Authentication.LoginEndpoint == "" || md.ResourceManager == "" || len(md.Authentication.Audiences) == 0 {
		return cloud.Configuration{}, fmt.Errorf("the cloud metadata at %s names no login endpoint, resource manager and audience (%v)", u.String(), err)
	}
	return cloud.Configuration{
		ActiveDirectoryAuthorityHost: strings.TrimSuffix(md.Authentication.LoginEndpoint, "/") + "/",
		Services: map[cloud.ServiceName]cloud.ServiceConfiguration{
			cloud.ResourceManager: {Endpoint: strings.TrimSuffix(md.ResourceManager, "/"), Audience: md.Authentication.Audiences[0]},
		},
	}, nil
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
			ClientOptions: opts, DisableInstanceDiscovery: customCloud, SendCertificateChain: true,
		})
	case secret != "":
		if err := needTenant("a client secret"); err != nil {
			return nil, err
		}
		return azidentity.NewClientSecretCredential(c.TenantID, clientID, secret, &azidentity.ClientSecretCredentialOptions{
			ClientOptions: opts, DisableInstanceDiscovery: customCloud,
		})
	}
	if assertion := c.oidcAssertion(opts); assertion != nil {
		if err := needTenant("an OIDC token"); err != nil {
			return nil, err
		}
		return azidentity.NewClientAssertionCredential(c.TenantID, clientID, assertion, &azidentity.ClientAssertionCredentialOptions{
			ClientOptions: opts, DisableInstanceDiscovery: customCloud,
		})
	}
	switch {
	case c.UseMSI:
		o := &azidentity.ManagedIdentityCredentialOptions{ClientOptions: opts}
		if clientID != "" {
			o.ID = azidentity.ClientID(clientID)
		}
		return azidentity.NewManagedIdentityCredential(o)
	case c.UseCLI:
		return azidentity.NewAzureCLICredential(&azidentity.AzureCLICredentialOptions{TenantID: c.TenantID})
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
	case c.OIDCRequestURL != "" && c.OIDCRequestToken != "":
		return c.requestOIDCToken(opts)
	}
	return nil
}

// requestOIDCToken asks a CI system for a token, as GitHub Actions serves them:
// GET <request URL>&audience=api://AzureADTokenExchange with the request token as bearer.
func (c Config) requestOIDCToken(opts azcore.ClientOptions) func(context.Context) (string, error) {
	client := &http.Client{Timeout: 30 * time.Second}
	if hc, ok := opts.Transport.(*http.Client); ok {
		client = hc
	}
	return func(ctx context.Context) (string, error) {
		u, err := url.Parse(c.OIDCRequestURL)
		if err != nil {
			return "", fmt.Errorf("oidc_request_url: %w", err)
		}
		q := u.Query()
		q.Set("audience", tokenExchangeAudience)
		u.RawQuery = q.Encode()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return "", err
		}
		req.Header.Set("Authorization", "Bearer "+c.OIDCRequestToken)
		resp, err := client.Do(req)
		if err != nil {
			return "", fmt.Errorf("request an OIDC token: %w", err)
		}
		defer func() { _ = resp.Body.Close() }()
		var body struct {
			Value string `json:"value"`
		}
		if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&body); err != nil || resp.StatusCode != http.StatusOK || body.Value == "" {
			return "", fmt.Errorf("request an OIDC token from %s: %s", u.Host, resp.Status)
		}
		return body.Value, nil
	}
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
