package simkubelet

import (
	"fmt"
	"slices"
	"strings"

	kubeletv1 "k8s.io/kubelet/config/v1"
	"sigs.k8s.io/yaml"
)

// credentialProviderAPIVersions are the exec plugin API versions the kubelet 1.37 talks
// (kubernetes pkg/credentialprovider/plugin/config.go apiVersions).
var credentialProviderAPIVersions = []string{
	"credentialprovider.kubelet.k8s.io/v1", "credentialprovider.kubelet.k8s.io/v1beta1", "credentialprovider.kubelet.k8s.io/v1alpha1",
}

// CheckCredentialProviders refuses what the kubelet refuses at start when either of
// --image-credential-provider-config and --image-credential-provider-bin-dir is set: it loads
// the configuration and exits when that fails (kubernetes pkg/kubelet/kuberuntime/
// kuberuntime_manager.go, plugin.RegisterCredentialProviderPlugins). The configuration must be
// a CredentialProviderConfig, decoded strictly (an unknown field fails, as the kubelet's decoder
// fails it); each provider needs a name usable as a file name, an exec API
// version the kubelet speaks, at least one image pattern and a default cache duration, and its
// program in the bin dir, where the Windows kubelet finds <name>.exe (exec.LookPath) and a
// Linux one <name>. This checks only kubelet.config.k8s.io/v1, the version kubewin writes.
// goos is the machine's: "windows" or "linux".
func CheckCredentialProviders(goos, config, binDir string, read func(string) ([]byte, error)) error {
	if config == "" || binDir == "" {
		return fmt.Errorf("--image-credential-provider-config=%q and --image-credential-provider-bin-dir=%q: the kubelet needs both", config, binDir)
	}
	raw, err := read(config)
	if err != nil {
		return fmt.Errorf("read the credential provider configuration: %w", err)
	}
	var cfg kubeletv1.CredentialProviderConfig
	if err := yaml.UnmarshalStrict(raw, &cfg); err != nil {
		return fmt.Errorf("credential provider configuration %s: %w", config, err)
	}
	if cfg.Kind != "CredentialProviderConfig" || cfg.APIVersion != kubeletv1.SchemeGroupVersion.String() {
		return fmt.Errorf("credential provider configuration %s is a %s %s, not a CredentialProviderConfig %s", config, cfg.APIVersion, cfg.Kind,
			kubeletv1.SchemeGroupVersion)
	}
	if len(cfg.Providers) == 0 {
		return fmt.Errorf("credential provider configuration %s: providers: at least one is required", config)
	}
	for _, p := range cfg.Providers {
		var problems []string
		if p.Name == "" || p.Name == "." || p.Name == ".." || strings.ContainsAny(p.Name, "/ ") {
			problems = append(problems, fmt.Sprintf("name %q is not a file name", p.Name))
		}
		if !slices.Contains(credentialProviderAPIVersions, p.APIVersion) {
			problems = append(problems, fmt.Sprintf("apiVersion %q is not one of %v", p.APIVersion, credentialProviderAPIVersions))
		}
		if len(p.MatchImages) == 0 {
			problems = append(problems, "matchImages: at least one is required")
		}
		if p.DefaultCacheDuration == nil || p.DefaultCacheDuration.Duration < 0 {
			problems = append(problems, "defaultCacheDuration is required and may not be negative")
		}
		if len(problems) > 0 {
			return fmt.Errorf("credential provider configuration %s, provider %q: %s", config, p.Name, strings.Join(problems, "; "))
		}
		program := strings.TrimSuffix(binDir, "/") + "/" + p.Name
		if goos == "windows" {
			program = strings.TrimSuffix(binDir, `\`) + `\` + p.Name + ".exe"
		}
		if _, err := read(program); err != nil {
			return fmt.Errorf("credential provider %s: no %s in %s: %w", p.Name, program, binDir, err)
		}
	}
	return nil
}
