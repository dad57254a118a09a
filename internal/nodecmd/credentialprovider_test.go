package nodecmd

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	kubeletv1 "k8s.io/kubelet/config/v1"
	"sigs.k8s.io/cloud-provider-azure/pkg/azclient"
	"sigs.k8s.io/yaml"

	"github.com/kubewin/kubewin/internal/acrcredential"
	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/kubeversion"
	"github.com/kubewin/kubewin/internal/testkit/testenv"
)

func acrInput(t *testing.T, minor int) Input {
	t.Helper()
	in := testInput(t, minor, v1alpha1.RuntimeContainerd)
	in.Config.Kubelet.AzureContainerRegistry = &v1alpha1.AzureContainerRegistry{Cloud: "AzurePublicCloud",
		TenantID: "99999999-0000-0000-0000-000000000000", IdentityClientID: "11111111-2222-3333-4444-555555555555"}
	if errs := in.Config.Validate(); len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	in.Manifest.ACRCredentialProvider = "v1.34.2"
	return in
}

// A node pulling from Azure Container Registry by identity: the kubelet's own loader accepts
// the credential provider configuration with the image's provider in the bin dir (and refuses
// it without), the Azure configuration is read strictly by cloud-provider-azure's types and
// makes a managed identity credential of the machine's identity, with no secret, and the flags
// name the files and the directory the image carries the provider in.
func TestKubeletCredentialProvider(t *testing.T) {
	for minor := kubeversion.OldestMinor; minor <= kubeversion.NewestMinor; minor++ {
		in := acrInput(t, minor)
		k, err := Kubelet(in)
		if err != nil {
			t.Fatal(err)
		}
		args := strings.Join(k.Args, " ")
		for _, want := range []string{"--image-credential-provider-config=" + in.Paths.CredentialProviderConfig,
			"--image-credential-provider-bin-dir=" + in.Paths.CredentialProviderBinDir} {
			if !strings.Contains(args, want) {
				t.Errorf("1.%d: no %s in %s", minor, want, args)
			}
		}
		conf := k.Files[in.Paths.CredentialProviderConfig]
		if err := testenv.KubeletLoadsCredentialProviders(t, conf, acrcredential.ProviderName); err != nil {
			t.Errorf("1.%d: the kubelet refuses the configuration: %v\n%s", minor, err, conf)
		}
		if err := testenv.KubeletLoadsCredentialProviders(t, conf); err == nil {
			t.Errorf("1.%d: the kubelet's loader accepted a bin dir without the provider", minor)
		}
		var cfg kubeletv1.CredentialProviderConfig
		err = yaml.UnmarshalStrict(conf, &cfg)
		if err != nil || len(cfg.Providers) != 1 || !slices.Equal(cfg.Providers[0].Args, []string{in.Paths.AzureConfig}) {
			t.Errorf("1.%d: the provider is not given %s (%v):\n%s", minor, in.Paths.AzureConfig, err, conf)
		}

		var u struct {
			azclient.ARMClientConfig
			azclient.AzureAuthConfig
		}
		d := json.NewDecoder(bytes.NewReader(k.Files[in.Paths.AzureConfig]))
		d.DisallowUnknownFields()
		if err := d.Decode(&u); err != nil {
			t.Fatalf("cloud-provider-azure's types do not read the Azure configuration: %v\n%s", err, k.Files[in.Paths.AzureConfig])
		}
		a := in.Config.Kubelet.AzureContainerRegistry
		if u.Cloud != a.Cloud || u.TenantID != a.TenantID || !u.UseManagedIdentityExtension || u.UserAssignedIdentityID != a.IdentityClientID ||
			u.AADClientSecret != "" {
			t.Errorf("Azure configuration %+v", u)
		}
		auth, err := azclient.NewAuthProvider(&u.ARMClientConfig, &u.AzureAuthConfig)
		if err != nil {
			t.Fatalf("azclient refuses the configuration: %v", err)
		}
		if _, ok := auth.GetAzIdentity().(*azidentity.ManagedIdentityCredential); !ok {
			t.Errorf("azclient made a %T of the configuration, not a managed identity credential", auth.GetAzIdentity())
		}
	}
	// The image carries the provider in the bin dir, under the name the configuration gives.
	p := DefaultPaths()
	if got, want := p.Payload(v1alpha1.ACRCredentialProviderPath), p.CredentialProviderBinDir+`\`+acrcredential.ProviderName+".exe"; got != want {
		t.Errorf("the image carries the provider at %s; the kubelet looks for %s", got, want)
	}
}

// The loader the test relies on refuses what the kubelet refuses: a provider without a cache
// duration.
func TestKubeletLoaderRefuses(t *testing.T) {
	k, err := Kubelet(acrInput(t, kubeversion.NewestMinor))
	if err != nil {
		t.Fatal(err)
	}
	var cfg kubeletv1.CredentialProviderConfig
	if err := yaml.UnmarshalStrict(k.Files[DefaultPaths().CredentialProviderConfig], &cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Providers[0].DefaultCacheDuration = nil
	broken, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = testenv.KubeletLoadsCredentialProviders(t, broken, acrcredential.ProviderName)
	if err == nil || !strings.Contains(err.Error(), "defaultCacheDuration") {
		t.Errorf("the loader accepted a provider without defaultCacheDuration: %v", err)
	}
}

// An image without the provider is refused with the setting that bakes it in.
func TestKubeletCredentialProviderNeedsImage(t *testing.T) {
	in := acrInput(t, kubeversion.NewestMinor)
	in.Manifest.ACRCredentialProvider = ""
	if _, err := Kubelet(in); err == nil || !strings.Contains(err.Error(), "acr_credential_provider_version") {
		t.Errorf("an image without the credential provider: %v", err)
	}
}
