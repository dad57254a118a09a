package nodecmd

import (
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1 "k8s.io/kubelet/config/v1"
	"sigs.k8s.io/yaml"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
)

// acrProviderName is the ACR credential provider's name in the kubelet's configuration: the
// kubelet runs <bin dir>\<name>, finding the .exe on Windows (kubernetes
// pkg/credentialprovider/plugin/plugin.go, exec.LookPath).
const acrProviderName = "acr-credential-provider"

// acrRegistries are the registry suffixes of Azure Container Registry in Azure's public,
// German, China and government clouds, which the kubelet asks the provider for (AKS's Windows
// CSE Config-CredentialProvider; cloud-provider-azure's credential provider page).
var acrRegistries = []string{"*.azurecr.io", "*.azurecr.cn", "*.azurecr.de", "*.azurecr.us"}

// acrConfig is the Azure configuration the ACR credential provider reads (its only argument):
// the cloud, the tenant and the machine's user-assigned identity, in the members of
// cloud-provider-azure's configuration file (azclient's ARMClientConfig and AzureAuthConfig).
// It holds no secret: the identity's token comes from the instance metadata service.
type acrConfig struct {
	Cloud                       string `json:"cloud"`
	ResourceManagerEndpoint     string `json:"resourceManagerEndpoint,omitempty"`
	TenantID                    string `json:"tenantId"`
	UseManagedIdentityExtension bool   `json:"useManagedIdentityExtension"`
	UserAssignedIdentityID      string `json:"userAssignedIdentityID"`
}

// credentialProvider renders the kubelet's image credential provider for Azure Container
// Registry: its CredentialProviderConfig, the Azure configuration it reads, and the two flags
// that turn it on. The image must carry the provider.
func credentialProvider(a *v1alpha1.AzureContainerRegistry, m *v1alpha1.ImageManifest, paths Paths) (files map[string][]byte, args []string,
	err error) {
	if m.ACRCredentialProvider == "" {
		return nil, nil, fmt.Errorf("kubelet.azureContainerRegistry: the image carries no acr-credential-provider, which the kubelet pulls from " +
			"Azure Container Registry with: bake the image with the kubewin-release data source's acr_credential_provider_version")
	}
	cfg := kubeletv1.CredentialProviderConfig{
		TypeMeta: metav1.TypeMeta{APIVersion: kubeletv1.SchemeGroupVersion.String(), Kind: "CredentialProviderConfig"},
		Providers: []kubeletv1.CredentialProvider{{
			Name: acrProviderName, MatchImages: acrRegistries,
			DefaultCacheDuration: &metav1.Duration{Duration: 10 * time.Minute},
			APIVersion:           "credentialprovider.kubelet.k8s.io/v1",
			Args:                 []string{paths.AzureConfig},
		}},
	}
	conf, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("encode the credential provider configuration: %w", err)
	}
	azure, err := json.MarshalIndent(acrConfig{
		Cloud: a.Cloud, ResourceManagerEndpoint: a.ResourceManagerEndpoint, TenantID: a.TenantID,
		UseManagedIdentityExtension: true, UserAssignedIdentityID: a.IdentityClientID,
	}, "", "  ")
	if err != nil {
		return nil, nil, err
	}
	files = map[string][]byte{paths.CredentialProviderConfig: conf, paths.AzureConfig: append(azure, '\n')}
	args = []string{"--image-credential-provider-config=" + paths.CredentialProviderConfig,
		"--image-credential-provider-bin-dir=" + paths.CredentialProviderBinDir}
	return files, args, nil
}
