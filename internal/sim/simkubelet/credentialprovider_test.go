package simkubelet

import (
	"os"
	"strings"
	"testing"

	"github.com/kubewin/kubewin/internal/testkit/testenv"
)

const acrProviders = `apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
- name: acr-credential-provider
  apiVersion: credentialprovider.kubelet.k8s.io/v1
  defaultCacheDuration: 10m0s
  matchImages:
  - '*.azurecr.io'
  args:
  - C:\k\azure.json
`

// The simulated kubelet refuses the credential provider configurations the kubelet's own loader
// refuses (kubernetes pkg/credentialprovider/plugin, built by make testenv), and starts with the
// ones it loads: each case goes to both, with Windows' paths and Linux's.
func TestCredentialProvidersAsTheKubelet(t *testing.T) {
	layouts := []struct{ goos, cfgPath, binDir, program string }{
		{"windows", `C:\k\credential-provider-config.yaml`, `C:\var\lib\kubelet\credential-provider`,
			`C:\var\lib\kubelet\credential-provider\acr-credential-provider.exe`},
		{"linux", "/var/lib/kubelet/credential-provider-config.yaml", "/var/lib/kubelet/credential-provider",
			"/var/lib/kubelet/credential-provider/acr-credential-provider"},
	}
	for _, tc := range []struct {
		name    string
		config  string
		program bool
	}{
		{"loads", acrProviders, true},
		{"no program", acrProviders, false},
		{"no cache duration", strings.Replace(acrProviders, "  defaultCacheDuration: 10m0s\n", "", 1), true},
		{"no images", strings.Replace(acrProviders, "  matchImages:\n  - '*.azurecr.io'\n", "", 1), true},
		{"exec API unknown", strings.Replace(acrProviders, "credentialprovider.kubelet.k8s.io/v1\n", "credentialprovider.kubelet.k8s.io/v2\n", 1), true},
		{"no providers", "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders: []\n", true},
		{"unknown field", strings.Replace(acrProviders, "  args:", "  argz:", 1), true},
		{"not the kind", strings.Replace(acrProviders, "kind: CredentialProviderConfig", "kind: KubeletConfiguration", 1), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var program []string
			if tc.program {
				program = []string{"acr-credential-provider"}
			}
			realErr := testenv.KubeletLoadsCredentialProviders(t, []byte(tc.config), program...)
			for _, l := range layouts {
				files := map[string][]byte{l.cfgPath: []byte(tc.config)}
				if tc.program {
					files[l.program] = []byte("program")
				}
				read := func(p string) ([]byte, error) {
					if b, ok := files[p]; ok {
						return b, nil
					}
					return nil, os.ErrNotExist
				}
				simErr := CheckCredentialProviders(l.goos, l.cfgPath, l.binDir, read)
				if (simErr == nil) != (realErr == nil) {
					t.Errorf("%s: the simulated kubelet says %v; the kubelet's loader says %v", l.goos, simErr, realErr)
				}
			}
		})
	}
	// Only one of the two flags: the kubelet's loader fails on the empty one.
	for _, l := range layouts {
		if err := CheckCredentialProviders(l.goos, l.cfgPath, "", func(string) ([]byte, error) { return []byte(acrProviders), nil }); err == nil {
			t.Errorf("%s: a configuration without a bin dir was accepted", l.goos)
		}
	}
}
