package diagnose

import (
	"bytes"
	"encoding/base64"
	"regexp"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
)

// RedactKubeconfig removes a kubeconfig's credentials: client key and certificate data,
// tokens, passwords (client-go's RedactSecrets), and the exec plugin's arguments and
// environment and the auth provider's configuration, which may carry them. Paths (the kubelet's
// client-certificate and client-key files) are kept: they say where the kubelet reads its
// credential, which the bundle leaves out.
func RedactKubeconfig(data []byte) ([]byte, error) {
	c, err := clientcmd.Load(data)
	if err != nil {
		return nil, err
	}
	if err := clientcmdapi.RedactSecrets(c); err != nil {
		return nil, err
	}
	for _, u := range c.AuthInfos {
		if u.Exec != nil {
			u.Exec.Env = nil
			u.Exec.Args = nil
		}
		if u.AuthProvider != nil {
			u.AuthProvider.Config = nil
		}
	}
	return clientcmd.Write(*c)
}

// tomlSecretKey matches the TOML keys of registry credentials in containerd's configuration
// (plugins."io.containerd.grpc.v1.cri".registry.configs.<host>.auth: username, password, auth,
// identitytoken; https://github.com/containerd/containerd/blob/main/docs/cri/registry.md).
var tomlSecretKey = regexp.MustCompile(`(?im)^(\s*(?:password|auth|identitytoken|identity_token|registrytoken)\s*=\s*).*$`)

// RedactTOML replaces the values of credential keys in a TOML file.
func RedactTOML(data []byte) ([]byte, error) {
	return tomlSecretKey.ReplaceAll(data, []byte(`${1}"`+v1alpha1.Redaction+`"`)), nil
}

// privateKey is a PEM private key block (PKCS #1, PKCS #8, SEC 1: "PRIVATE KEY" ends each
// label); a block cut off by a log's end is matched up to the end.
var privateKey = regexp.MustCompile(`-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----(?s:.*?)(?:-----END ([A-Z0-9 ]*)PRIVATE KEY-----|\z)`)

// encodedPEM is PEM data in base64, as a kubeconfig's client-key-data holds it: "LS0tLS1CRUdJTi"
// is "-----BEGIN" encoded.
var encodedPEM = regexp.MustCompile(`LS0tLS1CRUdJTi[A-Za-z0-9+/]*={0,2}`)

// bootstrapToken is a kubeadm bootstrap token, "[a-z0-9]{6}.[a-z0-9]{16}"
// (k8s.io/cluster-bootstrap/token/api: BootstrapTokenPattern).
var bootstrapToken = regexp.MustCompile(`\b[a-z0-9]{6}\.[a-z0-9]{16}\b`)

// Scrub removes what may be a secret from any file of the bundle: PEM private keys, in the
// clear or in base64, bootstrap tokens, and each of secrets (values known to be secret, as the
// NodeConfig's token).
func Scrub(data []byte, secrets ...string) []byte {
	data = privateKey.ReplaceAll(data, []byte("<redacted private key>"))
	data = encodedPEM.ReplaceAllFunc(data, func(m []byte) []byte {
		dec, err := base64.StdEncoding.DecodeString(string(m[:len(m)/4*4]))
		if err != nil || bytes.Contains(dec, []byte("PRIVATE KEY")) || len(dec) < len("-----BEGIN PRIVATE KEY-----") {
			return []byte("<redacted private key>")
		}
		return m
	})
	data = bootstrapToken.ReplaceAll(data, []byte(v1alpha1.Redaction))
	for _, s := range secrets {
		if s != "" {
			data = bytes.ReplaceAll(data, []byte(s), []byte(v1alpha1.Redaction))
		}
	}
	return data
}
