// Package acrcredential renders the kubelet's image credential provider for Azure Container
// Registry (cloud-provider-azure's acr-credential-provider): the CredentialProviderConfig the
// kubelet loads, the Azure configuration the provider reads, and the kubelet's flags. Windows
// nodes (nodeboot) and the Linux agents of an azure cluster (cloud-init) write the same files.
package acrcredential

import (
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1 "k8s.io/kubelet/config/v1"
	"sigs.k8s.io/yaml"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
)

// ProviderName is the provider's name in the kubelet's configuration: the kubelet runs
// <bin dir>/<name>, finding <name>.exe on Windows (kubernetes
// pkg/credentialprovider/plugin/plugin.go, exec.LookPath).
const ProviderName = "acr-credential-provider"

// Registries are the registry suffixes of Azure Container Registry in Azure's public, German,
// China and government clouds, which the kubelet asks the provider for (AKS's Windows CSE
// Config-CredentialProvider; cloud-provider-azure's credential provider page).
var Registries = []string{"*.azurecr.io", "*.azurecr.cn", "*.azurecr.de", "*.azurecr.us"}

// azureConfig is the Azure configuration the provider reads (its only argument): the cloud,
// the tenant and the machine's user-assigned identity, in the members of cloud-provider-azure's
// configuration file (azclient's ARMClientConfig and AzureAuthConfig). It holds no secret: the
// identity's token comes from the instance metadata service.
type azureConfig struct {
	Cloud                       string `json:"cloud"`
	ResourceManagerEndpoint     string `json:"resourceManagerEndpoint,omitempty"`
	TenantID                    string `json:"tenantId"`
	UseManagedIdentityExtension bool   `json:"useManagedIdentityExtension"`
	UserAssignedIdentityID      string `json:"userAssignedIdentityID"`
}

// Files are the provider's CredentialProviderConfig, which passes azureConfigPath to the
// provider, and the Azure configuration to write at azureConfigPath.
func Files(a *v1alpha1.AzureContainerRegistry, azureConfigPath string) (providerConfig, azure []byte, err error) {
	cfg := kubeletv1.CredentialProviderConfig{
		TypeMeta: metav1.TypeMeta{APIVersion: kubeletv1.SchemeGroupVersion.String(), Kind: "CredentialProviderConfig"},
		Providers: []kubeletv1.CredentialProvider{{
			Name: ProviderName, MatchImages: Registries,
			DefaultCacheDuration: &metav1.Duration{Duration: 10 * time.Minute},
			APIVersion:           "credentialprovider.kubelet.k8s.io/v1",
			Args:                 []string{azureConfigPath},
		}},
	}
	if providerConfig, err = yaml.Marshal(cfg); err != nil {
		return nil, nil, fmt.Errorf("encode the credential provider configuration: %w", err)
	}
	if azure, err = json.MarshalIndent(azureConfig{
		Cloud: a.Cloud, ResourceManagerEndpoint: a.ResourceManagerEndpoint, TenantID: a.TenantID,
		UseManagedIdentityExtension: true, UserAssignedIdentityID: a.IdentityClientID,
	}, "", "  "); err != nil {
		return nil, nil, err
	}
	return providerConfig, append(azure, '\n'), nil
}

// KubeletArgs are the kubelet's flags that turn the provider on.
func KubeletArgs(providerConfigPath, binDir string) []string {
	return []string{"--image-credential-provider-config=" + providerConfigPath, "--image-credential-provider-bin-dir=" + binDir}
}
