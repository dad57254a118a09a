package nodecmd

import (
	"fmt"

	"github.com/kubewin/kubewin/internal/acrcredential"
	"github.com/kubewin/kubewin/internal/api/v1alpha1"
)

// credentialProvider renders the kubelet's image credential provider for Azure Container
// Registry: its CredentialProviderConfig, the Azure configuration it reads, and the two flags
// that turn it on. The image must carry the provider.
func credentialProvider(a *v1alpha1.AzureContainerRegistry, m *v1alpha1.ImageManifest, paths Paths) (files map[string][]byte, args []string,
	err error) {
	if m.ACRCredentialProvider == "" {
		return nil, nil, fmt.Errorf("kubelet.azureContainerRegistry: the image carries no acr-credential-provider, which the kubelet pulls from " +
			"Azure Container Registry with: bake the image with the kubewin-release data source's acr_credential_provider_version")
	}
	conf, azure, err := acrcredential.Files(a, paths.AzureConfig)
	if err != nil {
		return nil, nil, err
	}
	files = map[string][]byte{paths.CredentialProviderConfig: conf, paths.AzureConfig: azure}
	args = acrcredential.KubeletArgs(paths.CredentialProviderConfig, paths.CredentialProviderBinDir)
	return files, args, nil
}
