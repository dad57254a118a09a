// Command credential-provider-check loads a kubelet image credential provider configuration
// (CredentialProviderConfig, kubelet.config.k8s.io/v1) with the kubelet's own loader,
// k8s.io/kubernetes/pkg/credentialprovider/plugin.RegisterCredentialProviderPlugins, as the
// kubelet does at start for --image-credential-provider-config and
// --image-credential-provider-bin-dir: the bin dir must exist, the file is decoded strictly
// (unknown fields are errors) and validated, and every provider's executable must be in the bin
// dir. kubewin's tests run it (make testenv builds it into .testbin) to check the configurations
// they render; it never runs a provider.
//
// Usage: credential-provider-check -config FILE -bin-dir DIR
//
// It exits 0 and prints nothing when the kubelet would accept the configuration; otherwise it
// prints the kubelet's error on stderr and exits 1 (2 for bad usage).
package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/kubernetes/pkg/credentialprovider/plugin"
)

func main() {
	config := flag.String("config", "", "the CredentialProviderConfig file (or directory), as the kubelet's --image-credential-provider-config")
	binDir := flag.String("bin-dir", "", "the providers' directory, as the kubelet's --image-credential-provider-bin-dir")
	flag.Parse()
	if *config == "" || *binDir == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: credential-provider-check -config FILE -bin-dir DIR")
		os.Exit(2)
	}
	// The service account functions are called only when the kubelet asks a provider for
	// credentials (for providers with tokenAttributes), never while registering.
	if err := plugin.RegisterCredentialProviderPlugins(*config, *binDir, nil, nil); err != nil {
		fmt.Fprintln(os.Stderr, "credential-provider-check:", err)
		os.Exit(1)
	}
}
