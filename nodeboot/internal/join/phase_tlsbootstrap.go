package join

import (
	"context"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/nodecmd"
	"github.com/kubewin/kubewin/internal/nodestatus"
	"github.com/kubewin/kubewin/internal/tlsbootstrap"
	"github.com/kubewin/kubewin/nodeboot/internal/platform"
)

// tlsBootstrapData is what the TLS bootstrap phase reads and sets.
type tlsBootstrapData interface {
	config() *v1alpha1.NodeConfig
	nodeName() string
	machine() platform.Platform
	paths() nodecmd.Paths
	timeouts() Timeouts
	learned() *Learned
	trusted() (string, []byte, error)
	tokenClient() kubernetes.Interface
	bootstrapKeyFile() string
	currentPEM() string
}

// runTLSBootstrap requests the kubelet's client certificate with the bootstrap token, unless the
// kubelet's certificate store holds a valid one of the bootstrap key, and writes the kubelet's
// kubeconfig. As the kubelet's own TLS bootstrap does (pkg/kubelet/certificate/bootstrap,
// LoadClientCert), the key is written before the request and the signed pair straight into the
// certificate store: no certificate file of its own. The request goes over the connection of the
// node's client with the token, which its reports use too.
func runTLSBootstrap(ctx context.Context, d tlsBootstrapData) error {
	server, ca, err := d.trusted()
	if err != nil {
		return err
	}
	p := d.machine()
	res, err := tlsbootstrap.Run(ctx, tlsbootstrap.Options{
		Server: server, CACert: ca, Token: d.config().Cluster.BootstrapToken, NodeName: d.nodeName(),
		KeyFile: d.bootstrapKeyFile(), CertFile: d.currentPEM(), Timeout: d.timeouts().CSR,
		ReadFile:  func(win string) ([]byte, error) { return os.ReadFile(p.Path(win)) },
		WriteFile: p.WriteSecret,
		Dial:      p.Dialer(),
		Client:    d.tokenClient(),
		Store:     func(certPEM, keyPEM []byte) error { return writeClientPair(d, certPEM, keyPEM, time.Now()) },
	})
	if err != nil {
		return err
	}
	if res.CSRName != "" {
		d.learned().CSR = res.CSRName
	}
	if err := writeKubeletKubeconfig(d, server, ca); err != nil {
		return nodestatus.Errorf(nodestatus.CodeInternal, "write the kubelet kubeconfig: %w", err)
	}
	return nil
}

// writeKubeletKubeconfig writes the kubelet's kubeconfig, which names its certificate store's
// current file.
func writeKubeletKubeconfig(d tlsBootstrapData, server string, ca []byte) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["default"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	kc.AuthInfos["default"] = &clientcmdapi.AuthInfo{ClientCertificate: d.currentPEM(), ClientKey: d.currentPEM()}
	kc.Contexts["default"] = &clientcmdapi.Context{Cluster: "default", AuthInfo: "default"}
	kc.CurrentContext = "default"
	b, err := clientcmd.Write(*kc)
	if err != nil {
		return err
	}
	return d.machine().WriteSecret(d.paths().KubeletKubeconfig, b)
}

// writeClientPair writes the kubelet's client certificate and key the way the kubelet's own
// certificate store does (client-go util/certificate/certificate_store.go, Update, which the
// kubelet's TLS bootstrap calls in pkg/kubelet/certificate/bootstrap): the pair in one file
// kubelet-client-<timestamp>.pem, and kubelet-client-current.pem a symbolic link to it. The
// store rotates the certificate only when "current" is a link (updateSymlink refuses a regular
// file), so a regular file would stop the kubelet's client certificate rotation at expiry.
func writeClientPair(d tlsBootstrapData, certPEM, keyPEM []byte, now time.Time) error {
	name := "kubelet-client-" + now.UTC().Format(certificateStoreTimeFormat) + ".pem"
	if err := d.machine().WriteSecret(d.paths().KubeletCertDir+`\`+name, append(append([]byte{}, certPEM...), keyPEM...)); err != nil {
		return err
	}
	return d.machine().Symlink(d.currentPEM(), name)
}

// certificateStoreTimeFormat is the time stamp in the names of the certificate store's files
// (client-go util/certificate/certificate_store.go, Update).
const certificateStoreTimeFormat = "2006-01-02-15-04-05"
