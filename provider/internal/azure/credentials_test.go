package azure

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"software.sslmate.com/src/go-pkcs12"

	"github.com/kubewin/kubewin/internal/testkit/armtest"
	"github.com/kubewin/kubewin/internal/testkit/armtest/simboot"
	"github.com/kubewin/kubewin/internal/testkit/testenv"
)

// The credentials are tested against the ARM + Entra test server over HTTPS: each kind gets a
// real token from its Entra endpoint, and the token reads a route table through ARM.

var server *armtest.Server

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kubewin-azure-test-")
	if err != nil {
		panic(err)
	}
	// Linux machines (the clusters' control planes and agents) boot as simulated machines with
	// the test environment's kubeadm and control plane.
	bin, err := testenv.BinDir()
	if err != nil {
		panic(err)
	}
	// Operations are polled every 10 ms instead of every second (RetryAfter), and Azure's clock,
	// which refills the throttling budgets, runs as much faster (TimeScale): the tests, some in
	// parallel, spend the subscription's read budget at the rate Azure's clients spend it.
	const retryAfter = 10 * time.Millisecond
	s, err := armtest.New(armtest.Options{RetryAfter: retryAfter, TimeScale: float64(time.Second / retryAfter),
		Booter: &simboot.Booter{Dir: dir, KubeBin: bin}})
	if err != nil {
		panic(err)
	}
	server = s
	// The server's CA, as a user of a custom cloud trusts it (read once, before any TLS).
	if err := os.Setenv("SSL_CERT_FILE", s.CAFile()); err != nil {
		panic(err)
	}
	code := m.Run()
	if err := s.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = max(code, 1)
	}
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// base is a configuration reaching the server with nothing but its metadata host.
func base() Config {
	return Config{SubscriptionID: server.SubscriptionID(), TenantID: server.TenantID(), MetadataHost: server.MetadataHost()}
}

// readARM uses a configuration to read a route table through ARM.
func readARM(t *testing.T, c Config) error {
	t.Helper()
	client, err := New(context.Background(), c)
	if err != nil {
		return err
	}
	_, err = client.network.NewRouteTablesClient().Get(context.Background(), "nowhere", "none", nil)
	if notFound(err) {
		return nil // authenticated: ARM answered about the resource itself
	}
	return err
}

func TestCloud(t *testing.T) {
	for env, want := range map[string]string{"": cloud.AzurePublic.ActiveDirectoryAuthorityHost,
		"public":       cloud.AzurePublic.ActiveDirectoryAuthorityHost,
		"usgovernment": cloud.AzureGovernment.ActiveDirectoryAuthorityHost, "china": cloud.AzureChina.ActiveDirectoryAuthorityHost} {
		got, err := Config{Environment: env}.Cloud(context.Background(), http.DefaultClient)
		if err != nil || got.ActiveDirectoryAuthorityHost != want {
			t.Errorf("environment %q: %v, %v", env, got.ActiveDirectoryAuthorityHost, err)
		}
	}
	if _, err := (Config{Environment: "germany"}).Cloud(context.Background(), http.DefaultClient); err == nil || !strings.Contains(err.Error(),
		"use public, usgovernment or china") {
		t.Errorf("unknown environment: %v", err)
	}
	got, err := base().Cloud(context.Background(), http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	if got.ActiveDirectoryAuthorityHost != server.URL()+"/" || got.Services[cloud.ResourceManager].Endpoint != server.URL() {
		t.Errorf("cloud from metadata = %+v", got)
	}
}

func TestClientSecret(t *testing.T) {
	c := base()
	c.ClientID, c.ClientSecret = server.Credentials().ClientID, server.Credentials().ClientSecret
	if err := readARM(t, c); err != nil {
		t.Fatal(err)
	}
	// From a file, as client_secret_file_path.
	c.ClientSecret, c.ClientSecretFilePath = "", writeFile(t, server.Credentials().ClientSecret+"\n")
	if err := readARM(t, c); err != nil {
		t.Fatal(err)
	}
	// A wrong secret: Entra's error, never the secret.
	c.ClientSecretFilePath, c.ClientSecret = "", "wrong-secret-value"
	err := readARM(t, c)
	if err == nil || !strings.Contains(err.Error(), "AADSTS7000215") || strings.Contains(err.Error(), "wrong-secret-value") {
		t.Errorf("wrong secret: %v", err)
	}
}

func TestClientCertificate(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubewin"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	app := server.RegisterApp(armtest.App{Certificates: []*x509.Certificate{cert}})
	pfx, err := pkcs12.Legacy.Encode(key, cert, nil, "pfx-password")
	if err != nil {
		t.Fatal(err)
	}
	c := base()
	c.ClientID, c.ClientCertificate, c.ClientCertificatePassword = app.ClientID, base64.StdEncoding.EncodeToString(pfx), "pfx-password"
	if err := readARM(t, c); err != nil {
		t.Fatal(err)
	}
	c.ClientCertificate, c.ClientCertificatePath = "", writeFile(t, string(pfx))
	if err := readARM(t, c); err != nil {
		t.Fatal(err)
	}
	c.ClientCertificatePassword = "wrong"
	if err := readARM(t, c); err == nil || !strings.Contains(err.Error(), "client_certificate_password") {
		t.Errorf("wrong certificate password: %v", err)
	}
	// Another key, same name: Entra does not know it.
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	oder, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &other.PublicKey, other)
	ocert, _ := x509.ParseCertificate(oder)
	opfx, _ := pkcs12.Legacy.Encode(other, ocert, nil, "")
	c.ClientCertificatePath, c.ClientCertificatePassword, c.ClientCertificate = "", "", base64.StdEncoding.EncodeToString(opfx)
	if err := readARM(t, c); err == nil || !strings.Contains(err.Error(), "AADSTS") {
		t.Errorf("unknown certificate: %v", err)
	}
}

// federatedApp trusts the test issuer's tokens for a Terraform Cloud workspace's apply phase.
func federatedApp(t *testing.T) (armtest.App, string) {
	t.Helper()
	const subject = "organization:acme:project:default:workspace:windows-nodes:run_phase:apply"
	app := server.RegisterApp(armtest.App{Federated: []armtest.FederatedCredential{{Issuer: server.Issuer().URL(), Subject: subject}}})
	return app, subject
}

// What an HCP Terraform run with Azure dynamic credentials has in its environment is enough:
// ARM_CLIENT_ID, ARM_OIDC_TOKEN, ARM_USE_OIDC (injected), ARM_SUBSCRIPTION_ID and ARM_TENANT_ID
// (workspace variables); and the generic TFC_WORKLOAD_IDENTITY_TOKEN works too.
func TestOIDCFromTerraformCloud(t *testing.T) {
	app, subject := federatedApp(t)
	token, err := server.Issuer().Mint(subject, tokenExchangeAudience, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, env := range [][]string{
		{"ARM_CLIENT_ID=" + app.ClientID, "ARM_OIDC_TOKEN=" + token, "ARM_USE_OIDC=true"},
		{"ARM_CLIENT_ID=" + app.ClientID, "TFC_WORKLOAD_IDENTITY_TOKEN=" + token},
	} {
		for _, kv := range append(env, "ARM_SUBSCRIPTION_ID="+server.SubscriptionID(), "ARM_TENANT_ID="+server.TenantID(),
			"ARM_METADATA_HOSTNAME="+server.MetadataHost()) {
			k, v, _ := strings.Cut(kv, "=")
			t.Setenv(k, v)
		}
		c, err := ConfigFrom(nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := readARM(t, c); err != nil {
			t.Fatalf("%v: %v", env, err)
		}
		for _, k := range []string{"ARM_OIDC_TOKEN", "ARM_USE_OIDC", "TFC_WORKLOAD_IDENTITY_TOKEN"} {
			if err := os.Unsetenv(k); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A token for another audience: Entra's error text reaches the user.
	wrong, _ := server.Issuer().Mint(subject, "api://something-else", 10*time.Minute)
	c := base()
	c.ClientID, c.UseOIDC, c.OIDCToken = app.ClientID, true, wrong
	if err := readARM(t, c); err == nil || !strings.Contains(err.Error(), "AADSTS700212") {
		t.Errorf("wrong audience: %v", err)
	}
	// Another workspace (subject).
	other, _ := server.Issuer().Mint("organization:acme:project:default:workspace:other:run_phase:apply", tokenExchangeAudience, 10*time.Minute)
	c.OIDCToken = other
	if err := readARM(t, c); err == nil || !strings.Contains(err.Error(), "AADSTS700213") {
		t.Errorf("wrong subject: %v", err)
	}
}

// A token file is read again at every exchange (platforms refresh it); a CI system's token is
// requested from its URL with its request token.
func TestOIDCFileAndRequest(t *testing.T) {
	app, subject := federatedApp(t)
	token, _ := server.Issuer().Mint(subject, tokenExchangeAudience, 10*time.Minute)
	c := base()
	c.ClientID, c.UseOIDC, c.OIDCTokenFilePath = app.ClientID, true, writeFile(t, token+"\n")
	if err := readARM(t, c); err != nil {
		t.Fatal(err)
	}
	var asked string
	ci := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = r.URL.Query().Get("audience")
		if r.Header.Get("Authorization") != "Bearer ci-request-token" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"value": token})
	}))
	defer ci.Close()
	c = base()
	c.ClientID, c.UseOIDC, c.OIDCRequestURL, c.OIDCRequestToken = app.ClientID, true, ci.URL+"/token?api-version=2.0", "ci-request-token"
	if err := readARM(t, c); err != nil {
		t.Fatal(err)
	}
	if asked != tokenExchangeAudience {
		t.Errorf("the CI system was asked for audience %q", asked)
	}
	c.OIDCRequestToken = "wrong"
	if err := readARM(t, c); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("wrong request token: %v", err)
	}
}

// With nothing configured and the CLI turned off, the error says what to set.
func TestNoCredential(t *testing.T) {
	c := base()
	_, err := c.Credential(azcore.ClientOptions{}, true)
	if err == nil || !strings.Contains(err.Error(), "no Azure credential is configured") {
		t.Errorf("error = %v", err)
	}
	c.UseCLI, c.ClientSecret = true, "x"
	if _, err := c.Credential(azcore.ClientOptions{}, true); err == nil || !strings.Contains(err.Error(), "needs tenant_id and client_id") {
		t.Errorf("secret without client ID: %v", err)
	}
}

// Throttling with Retry-After, server errors and conflicts with an operation in progress are
// retried; other errors are not.
func TestRetryPolicy(t *testing.T) {
	c := base()
	c.ClientID, c.ClientSecret = server.Credentials().ClientID, server.Credentials().ClientSecret
	client, err := New(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	get := func() error {
		_, err := client.network.NewRouteTablesClient().Get(context.Background(), "nowhere", "none", nil)
		if notFound(err) {
			return nil
		}
		return err
	}
	throttle := server.Throttle(armtest.Match{Method: "GET", Path: `/routeTables/none$`, Times: 2}, 100*time.Millisecond)
	start := time.Now()
	if err := get(); err != nil {
		t.Fatal(err)
	}
	if throttle.Hits() != 2 || time.Since(start) < 200*time.Millisecond {
		t.Errorf("throttled %d times in %s: Retry-After not honoured", throttle.Hits(), time.Since(start))
	}
	throttle.Remove()
	busy := server.FailRequests(armtest.Match{Method: "GET", Path: `/routeTables/none$`, Times: 1}, http.StatusConflict,
		"AnotherOperationInProgress", "Another operation on this or dependent resource is in progress.")
	if err := get(); err != nil || busy.Hits() != 1 {
		t.Errorf("conflict: %v, %d hits", err, busy.Hits())
	}
	busy.Remove()
	bad := server.FailRequests(armtest.Match{Method: "GET", Path: `/routeTables/none$`, Times: 1}, http.StatusBadRequest, "InvalidParameter", "no")
	if err := get(); err == nil || bad.Hits() != 1 {
		t.Errorf("a 400 was retried or swallowed: %v, %d hits", err, bad.Hits())
	}
}

// A throttling answer whose Retry-After is longer than the retry policy waits (a spent Compute
// budget answers with the rest of its window: minutes) is waited out when the call's deadline
// leaves time for it, and is the call's error at once when it does not.
func TestLongRetryAfter(t *testing.T) {
	saved := retryOptions
	retryOptions.MaxRetryDelay = 50 * time.Millisecond // stands for its 2 minutes
	t.Cleanup(func() { retryOptions = saved })
	c := base()
	c.ClientID, c.ClientSecret = server.Credentials().ClientID, server.Credentials().ClientSecret
	client, err := New(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	get := func(timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		_, err := client.network.NewRouteTablesClient().Get(ctx, "nowhere", "long", nil)
		if notFound(err) {
			return nil
		}
		return err
	}
	throttle := server.Throttle(armtest.Match{Method: "GET", Path: `/routeTables/long$`, Times: 1}, 500*time.Millisecond)
	start := time.Now()
	if err := get(10 * time.Second); err != nil || time.Since(start) < 500*time.Millisecond || throttle.Hits() != 1 {
		t.Errorf("Retry-After within the deadline: %v after %s, %d hits", err, time.Since(start), throttle.Hits())
	}
	throttle = server.Throttle(armtest.Match{Method: "GET", Path: `/routeTables/long$`, Times: 1}, 5*time.Second)
	start = time.Now()
	err = get(time.Second)
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.StatusCode != http.StatusTooManyRequests || time.Since(start) > 500*time.Millisecond {
		t.Errorf("Retry-After past the deadline: %v after %s, want the 429 at once", err, time.Since(start))
	}
	throttle.Remove()
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// setEnv sets environment variables for a test ("K=V" each).
func setEnv(t *testing.T, kvs ...string) {
	t.Helper()
	for _, kv := range kvs {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

// An Azure DevOps pipeline's service connection, from what the pipeline's task environment holds
// (SYSTEM_OIDCREQUESTURI, SYSTEM_ACCESSTOKEN) and the connection's ID, under azurerm's variable and
// azapi's: the token is requested as Azure DevOps serves it and exchanged with Entra.
func TestADOServiceConnection(t *testing.T) {
	const connection, subject = "8f7c4c3a-2b51-4f0e-9d43-6c1a4f3e2b10", "sc://acme/windows/kubewin-prod"
	app := server.RegisterApp(armtest.App{Federated: []armtest.FederatedCredential{{Issuer: server.Issuer().URL(), Subject: subject}}})
	token, err := server.Issuer().Mint(subject, tokenExchangeAudience, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// Azure DevOps' OIDC token API as azidentity's AzurePipelinesCredential calls it.
	ado := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		switch {
		case r.Method != http.MethodPost || q.Get("api-version") != "7.1":
			http.Error(w, "bad request", http.StatusBadRequest)
		case r.Header.Get("Authorization") != "Bearer system-access-token":
			http.Error(w, "unauthorized", http.StatusUnauthorized)
		case q.Get("serviceConnectionId") != connection:
			http.Error(w, "No service connection found with identifier "+q.Get("serviceConnectionId"), http.StatusNotFound)
		default:
			_ = json.NewEncoder(w).Encode(map[string]string{"oidcToken": token})
		}
	}))
	defer ado.Close()
	setEnv(t, "ARM_SUBSCRIPTION_ID="+server.SubscriptionID(), "ARM_TENANT_ID="+server.TenantID(), "ARM_METADATA_HOSTNAME="+server.MetadataHost(),
		"ARM_CLIENT_ID="+app.ClientID, "ARM_USE_OIDC=true", "ARM_USE_CLI=false",
		"SYSTEM_OIDCREQUESTURI="+ado.URL+"/acme/_apis/distributedtask/hubs/build/plans/1/jobs/2/oidctoken", "SYSTEM_ACCESSTOKEN=system-access-token")
	for _, name := range []string{"ARM_ADO_PIPELINE_SERVICE_CONNECTION_ID", "ARM_OIDC_AZURE_SERVICE_CONNECTION_ID"} {
		t.Setenv(name, connection)
		c, err := ConfigFrom(nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := readARM(t, c); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		t.Setenv(name, "")
	}
	// Another connection: Azure DevOps' error; none: the request is GitHub's, which Azure DevOps refuses.
	for conn, want := range map[string]string{"0b9e7e55-0000-4000-8000-000000000000": "404", "": "400"} {
		t.Setenv("ARM_ADO_PIPELINE_SERVICE_CONNECTION_ID", conn)
		c, _ := ConfigFrom(nil)
		if err := readARM(t, c); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("service connection %q: %v, want %s", conn, err, want)
		}
	}
}

// AKS workload identity: with use_aks_workload_identity, the client ID, tenant ID and token file
// the webhook injects (AZURE_CLIENT_ID, AZURE_TENANT_ID, AZURE_FEDERATED_TOKEN_FILE) are enough.
func TestAKSWorkloadIdentity(t *testing.T) {
	const subject = "system:serviceaccount:kube-system:kubewin"
	app := server.RegisterApp(armtest.App{Federated: []armtest.FederatedCredential{{Issuer: server.Issuer().URL(), Subject: subject}}})
	token, err := server.Issuer().Mint(subject, tokenExchangeAudience, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	setEnv(t, "ARM_SUBSCRIPTION_ID="+server.SubscriptionID(), "ARM_METADATA_HOSTNAME="+server.MetadataHost(), "ARM_USE_AKS_WORKLOAD_IDENTITY=true",
		"ARM_USE_CLI=false", "AZURE_CLIENT_ID="+app.ClientID, "AZURE_TENANT_ID="+server.TenantID(), "AZURE_FEDERATED_TOKEN_FILE="+writeFile(t, token))
	c, err := ConfigFrom(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := readARM(t, c); err != nil {
		t.Fatal(err)
	}
	// Without use_aks_workload_identity the injected variables are not read.
	t.Setenv("ARM_USE_AKS_WORKLOAD_IDENTITY", "")
	c, _ = ConfigFrom(nil)
	if err := readARM(t, c); err == nil || !strings.Contains(err.Error(), "no Azure credential is configured") {
		t.Errorf("without use_aks_workload_identity: %v", err)
	}
}

// A CI system's token is requested for the audience Entra expects in the configured cloud; Entra
// refuses a token for another cloud's audience.
func TestOIDCAudiencePerCloud(t *testing.T) {
	for env, want := range map[string]string{"": "api://AzureADTokenExchange", "public": "api://AzureADTokenExchange",
		"usgovernment": "api://AzureADTokenExchangeUSGov", "china": "api://AzureADTokenExchangeChina"} {
		if got := (Config{Environment: env}).TokenExchangeAudience(); got != want {
			t.Errorf("environment %q: audience %q, want %q", env, got, want)
		}
	}
	const subject = "repo:acme/nodes:environment:china"
	app := server.RegisterApp(armtest.App{Federated: []armtest.FederatedCredential{
		{Issuer: server.Issuer().URL(), Subject: subject, Audiences: []string{"api://AzureADTokenExchangeChina"}},
	}})
	ci := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, err := server.Issuer().Mint(subject, r.URL.Query().Get("audience"), 10*time.Minute)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"value": token})
	}))
	defer ci.Close()
	c := base()
	c.ClientID, c.UseOIDC, c.OIDCRequestURL, c.OIDCRequestToken, c.Environment = app.ClientID, true, ci.URL+"/token", "ci-request-token", "china"
	if err := readARM(t, c); err != nil {
		t.Fatal(err)
	}
	c.Environment = ""
	if err := readARM(t, c); err == nil || !strings.Contains(err.Error(), "AADSTS700212") {
		t.Errorf("public audience for a China credential: %v", err)
	}
}

// A managed identity endpoint other than IMDS (ARM_MSI_ENDPOINT), asked as IMDS is.
func TestMSIEndpoint(t *testing.T) {
	id := server.AddManagedIdentity()
	setEnv(t, "ARM_SUBSCRIPTION_ID="+server.SubscriptionID(), "ARM_METADATA_HOSTNAME="+server.MetadataHost(), "ARM_USE_MSI=true",
		"ARM_USE_CLI=false", "ARM_CLIENT_ID="+id, "ARM_MSI_ENDPOINT="+server.URL()+armtest.ManagedIdentityPath)
	c, err := ConfigFrom(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := readARM(t, c); err != nil {
		t.Fatal(err)
	}
	c.ClientID = "00000000-0000-0000-0000-000000000001"
	if err := readARM(t, c); err == nil || !strings.Contains(err.Error(), "Identity not found") {
		t.Errorf("unknown identity: %v", err)
	}
	c.MSIEndpoint = "169.254.169.254"
	if err := readARM(t, c); err == nil || !strings.Contains(err.Error(), "msi_endpoint") {
		t.Errorf("not a URL: %v", err)
	}
}

// ARM_AUXILIARY_TENANT_IDS is a list separated by semicolons, as azurerm reads it, of at most 3.
func TestAuxiliaryTenants(t *testing.T) {
	t.Setenv("ARM_AUXILIARY_TENANT_IDS", "a; b;c")
	c, err := ConfigFrom(nil)
	if err != nil || strings.Join(c.AuxiliaryTenantIDs, ",") != "a,b,c" {
		t.Errorf("auxiliary tenants %v, %v", c.AuxiliaryTenantIDs, err)
	}
	t.Setenv("ARM_AUXILIARY_TENANT_IDS", "a;b;c;d")
	if _, err := ConfigFrom(nil); err == nil || !strings.Contains(err.Error(), "at most 3") {
		t.Errorf("4 auxiliary tenants: %v", err)
	}
}

// The Azure CLI gives the tokens of the auxiliary tenants too: azidentity refuses a token request
// for a tenant other than the credential's unless the tenant is additionally allowed
// (azidentity's resolveTenant), and ARM requests ask for one per auxiliary tenant
// (x-ms-authorization-auxiliary). A stand-in az on PATH answers as
// `az account get-access-token -o json` does and records the tenant it was asked for.
func TestAzureCLIAuxiliaryTenants(t *testing.T) {
	dir := t.TempDir()
	script := "#!/bin/sh\nfor a; do [ \"$prev\" = --tenant ] && tenant=$a; prev=$a; done\n" +
		"printf '{\"accessToken\":\"token-of-%s\",\"expires_on\":4070908800}' \"$tenant\"\n"
	if err := os.WriteFile(filepath.Join(dir, "az"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	c := base()
	c.UseCLI, c.AuxiliaryTenantIDs = true, []string{"22222222-2222-2222-2222-222222222222"}
	cred, err := c.Credential(azcore.ClientOptions{}, true)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := cred.GetToken(context.Background(), policy.TokenRequestOptions{Scopes: []string{"https://management.azure.com/.default"},
		TenantID: c.AuxiliaryTenantIDs[0]})
	if err != nil || tok.Token != "token-of-"+c.AuxiliaryTenantIDs[0] {
		t.Errorf("the auxiliary tenant's token from the Azure CLI: %q, %v", tok.Token, err)
	}
	if _, err := cred.GetToken(context.Background(), policy.TokenRequestOptions{Scopes: []string{"https://management.azure.com/.default"},
		TenantID: "33333333-3333-3333-3333-333333333333"}); err == nil {
		t.Error("a tenant neither the credential's nor an auxiliary one was given a token")
	}
}
