package armtest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
)

// tfcSubject is the subject Terraform Cloud gives an apply run's token.
const tfcSubject = "organization:acme:project:default:workspace:windows-nodes:run_phase:apply"

// listScaleSets makes one ARM call with cred.
func (f *fixture) listScaleSets(ctx context.Context, cred azcore.TokenCredential) error {
	client, err := armcompute.NewVirtualMachineScaleSetsClient(f.s.SubscriptionID(), cred, f.opts)
	if err != nil {
		return err
	}
	_, err = client.NewListPager(testGroup, nil).NextPage(ctx)
	return err
}

func (f *fixture) assertionCredential(t *testing.T, clientID, token string) azcore.TokenCredential {
	t.Helper()
	cred, err := azidentity.NewClientAssertionCredential(f.s.TenantID(), clientID,
		func(context.Context) (string, error) { return token, nil },
		&azidentity.ClientAssertionCredentialOptions{ClientOptions: f.clientOptions(), DisableInstanceDiscovery: true})
	if err != nil {
		t.Fatal(err)
	}
	return cred
}

func TestFederatedCredential(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := testContext(t)
	issuer := f.s.Issuer()
	app := f.s.RegisterApp(App{Federated: []FederatedCredential{{Issuer: issuer.URL(), Subject: tfcSubject}}})

	good, err := issuer.Mint(tfcSubject, TokenExchangeAudience, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.listScaleSets(ctx, f.assertionCredential(t, app.ClientID, good)); err != nil {
		t.Fatalf("a token from a trusted issuer: %v", err)
	}

	wrong := func(subject, audience string, lifetime time.Duration) string {
		tok, err := issuer.Mint(subject, audience, lifetime)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	other := f.s.RegisterApp(App{Federated: []FederatedCredential{{Issuer: "https://app.terraform.io", Subject: tfcSubject}}})
	tampered := good[:strings.LastIndex(good, ".")+1] + "c2lnbmF0dXJl"
	for _, tt := range []struct {
		name, clientID, token, want string
	}{
		{"wrong audience", app.ClientID, wrong(tfcSubject, "api://SomethingElse", time.Minute),
			"AADSTS700212: No matching federated identity record found for presented assertion audience 'api://SomethingElse'"},
		{"wrong subject", app.ClientID, wrong(strings.Replace(tfcSubject, "apply", "plan", 1), TokenExchangeAudience, time.Minute),
			"AADSTS700213: No matching federated identity record found for presented assertion subject"},
		{"untrusted issuer", other.ClientID, good,
			"AADSTS700211: No matching federated identity record found for presented assertion issuer '" + issuer.URL() + "'"},
		{"expired", app.ClientID, wrong(tfcSubject, TokenExchangeAudience, -10*time.Minute),
			"AADSTS700024: Client assertion is not within its valid time range"},
		{"bad signature", app.ClientID, tampered, "AADSTS700027: Client assertion failed signature validation"},
		{"unknown app", "00000000-0000-0000-0000-000000000001", good, "AADSTS700016"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := f.listScaleSets(ctx, f.assertionCredential(t, tt.clientID, tt.token))
			var authErr *azidentity.AuthenticationFailedError
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
			if !errors.As(err, &authErr) {
				t.Fatalf("%T is not an azidentity.AuthenticationFailedError", err)
			}
		})
	}
}

// selfSignedCertificate returns an RSA certificate and key as azidentity.ParseCertificates reads
// them from a PEM file.
func selfSignedCertificate(t *testing.T) ([]*x509.Certificate, *rsa.PrivateKey) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubewin-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	pemData := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})...)
	certs, pk, err := azidentity.ParseCertificates(pemData, nil)
	if err != nil {
		t.Fatal(err)
	}
	rsaKey, ok := pk.(*rsa.PrivateKey)
	if !ok {
		t.Fatalf("ParseCertificates returned a %T key, not the RSA key it was given", pk)
	}
	return certs, rsaKey
}

func TestClientCertificateCredential(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := testContext(t)
	certs, key := selfSignedCertificate(t)
	app := f.s.RegisterApp(App{Certificates: certs})
	newCred := func(certs []*x509.Certificate, key *rsa.PrivateKey) azcore.TokenCredential {
		cred, err := azidentity.NewClientCertificateCredential(f.s.TenantID(), app.ClientID, certs, key,
			&azidentity.ClientCertificateCredentialOptions{ClientOptions: f.clientOptions(), DisableInstanceDiscovery: true})
		if err != nil {
			t.Fatal(err)
		}
		return cred
	}
	if err := f.listScaleSets(ctx, newCred(certs, key)); err != nil {
		t.Fatalf("registered certificate: %v", err)
	}
	otherCerts, otherKey := selfSignedCertificate(t)
	err := f.listScaleSets(ctx, newCred(otherCerts, otherKey))
	if err == nil || !strings.Contains(err.Error(),
		"AADSTS700027: The certificate with identifier used to sign the client assertion is not registered") {
		t.Fatalf("unregistered certificate: %v", err)
	}
}

func TestClientSecret(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := testContext(t)
	c := f.s.Credentials()
	cred, err := azidentity.NewClientSecretCredential(c.TenantID, c.ClientID, "wrong", &azidentity.ClientSecretCredentialOptions{
		ClientOptions: f.clientOptions(), DisableInstanceDiscovery: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	err = f.listScaleSets(ctx, cred)
	if err == nil || !strings.Contains(err.Error(), "AADSTS7000215: Invalid client secret provided") || strings.Contains(err.Error(), c.ClientSecret) {
		t.Fatalf("wrong secret: %v", err)
	}
	cred, err = azidentity.NewClientSecretCredential("other-tenant", c.ClientID, c.ClientSecret, &azidentity.ClientSecretCredentialOptions{
		ClientOptions: f.clientOptions(), DisableInstanceDiscovery: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.listScaleSets(ctx, cred); err == nil || !strings.Contains(err.Error(), "AADSTS90002: Tenant 'other-tenant' not found") {
		t.Fatalf("wrong tenant: %v", err)
	}
	// A token for another resource is refused by the token endpoint.
	_, err = f.cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{"https://vault.azure.net/.default"}})
	if err == nil || !strings.Contains(err.Error(), "AADSTS500011") {
		t.Fatalf("token for another resource: %v", err)
	}
}

func TestARMRequiresAValidToken(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := testContext(t)
	path := f.s.URL() + "/subscriptions/" + f.s.SubscriptionID() + "/resourceGroups/" + testGroup +
		"/providers/Microsoft.Compute/virtualMachineScaleSets?api-version=" + ComputeAPIVersion
	tok, err := f.cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{ManagementAudience + ".default"}})
	if err != nil {
		t.Fatal(err)
	}
	token := func(aud, tenant string, lifetime time.Duration) string {
		now := time.Now()
		tok, err := signJWT(f.s.tokenKey, tokenKeyID, claims{
			Audience: audience{aud}, TenantID: tenant, IssuedAt: numericDate(now.Add(-time.Hour).Unix()), Expiry: numericDate(now.Add(lifetime).Unix()),
		})
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + tok
	}
	for _, tt := range []struct{ auth, code string }{
		{"", "AuthenticationFailed"},
		{"Basic abc", "AuthenticationFailed"},
		{"Bearer " + tok.Token + "x", "InvalidAuthenticationToken"},
		{token(ManagementAudience, f.s.TenantID(), -time.Minute), "ExpiredAuthenticationToken"},
		{token("https://vault.azure.net", f.s.TenantID(), time.Hour), "InvalidAuthenticationTokenAudience"},
		{token(ManagementAudience, "another-tenant", time.Hour), "InvalidAuthenticationTokenTenant"},
	} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, path, nil)
		if tt.auth != "" {
			req.Header.Set("Authorization", tt.auth)
		}
		resp, err := f.s.HTTPClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusUnauthorized || body.Error.Code != tt.code || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("Authorization %.20q: %d %+v, want 401 %s with WWW-Authenticate", tt.auth, resp.StatusCode, body, tt.code)
		}
	}
}

func TestMetadataDocument(t *testing.T) {
	f := newFixture(t, Options{})
	resp, err := f.s.HTTPClient().Get("https://" + f.s.MetadataHost() + "/metadata/endpoints?api-version=2022-09-01")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var md map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&md); err != nil {
		t.Fatal(err)
	}
	auth, _ := md["authentication"].(map[string]any)
	// The members hashicorp/go-azure-sdk requires when it loads an environment from an endpoint.
	for _, k := range []string{"name", "resourceManager", "microsoftGraphResourceId"} {
		if v, _ := md[k].(string); v == "" {
			t.Errorf("metadata has no %s", k)
		}
	}
	if md["resourceManager"] != f.s.URL()+"/" || auth["loginEndpoint"] != f.s.URL() || auth["identityProvider"] != "AAD" {
		t.Fatalf("metadata %v", md)
	}
	// api-version=2019-05-01 answers a list of clouds, as ARM does.
	resp, err = f.s.HTTPClient().Get("https://" + f.s.MetadataHost() + "/metadata/endpoints?api-version=2019-05-01")
	if err != nil {
		t.Fatal(err)
	}
	var clouds []map[string]any
	err = json.NewDecoder(resp.Body).Decode(&clouds)
	_ = resp.Body.Close()
	if err != nil || len(clouds) != 1 || clouds[0]["name"] != "ArmTest" || clouds[0]["resourceManager"] != f.s.URL()+"/" {
		t.Fatalf("the list of clouds: %v (%v)", clouds, err)
	}
	resp, err = f.s.HTTPClient().Get("https://" + f.s.MetadataHost() + "/metadata/endpoints?api-version=1999-01-01")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("an unsupported metadata api-version: %d", resp.StatusCode)
	}
}

// TestCAFileThroughSSLCertFile runs this test binary again with SSL_CERT_FILE naming the server's
// CA file: Go's default HTTP client, which terraform and its providers use, then trusts the server.
func TestCAFileThroughSSLCertFile(t *testing.T) {
	if url := os.Getenv("ARMTEST_CHILD_GET"); url != "" {
		resp, err := http.Get(url)
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		_ = resp.Body.Close()
		fmt.Println(resp.Status)
		os.Exit(0)
	}
	f := newFixture(t, Options{})
	cmd := exec.Command(os.Args[0], "-test.run=^TestCAFileThroughSSLCertFile$")
	cmd.Env = append(os.Environ(), "SSL_CERT_FILE="+f.s.CAFile(),
		"ARMTEST_CHILD_GET=https://"+f.s.MetadataHost()+"/metadata/endpoints?api-version="+MetadataAPIVersion)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "200 OK") {
		t.Fatalf("GET with SSL_CERT_FILE=%s: %v\n%s", f.s.CAFile(), err, out)
	}
}
