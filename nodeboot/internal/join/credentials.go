package join

import (
	"fmt"
	"os"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Credential files in the kubelet's certificate directory. The bootstrap pair is written by the
// TLS bootstrap (key first, so a restart reuses it); the kubelet reads and rotates the combined
// "current" file, as with kubeadm.
func (n *Node) bootstrapKeyFile() string {
	return n.Paths.KubeletCertDir + `\kubelet-client-bootstrap.key`
}
func (n *Node) bootstrapCertFile() string {
	return n.Paths.KubeletCertDir + `\kubelet-client-bootstrap.crt`
}
func (n *Node) currentPEM() string { return n.Paths.KubeletCertDir + `\kubelet-client-current.pem` }

// writeKubeletKubeconfig writes the kubelet's credential and kubeconfig.
func (n *Node) writeKubeletKubeconfig(server string, ca, certPEM, keyPEM []byte) error {
	if err := n.Platform.WriteSecret(n.currentPEM(), append(append([]byte{}, certPEM...), keyPEM...)); err != nil {
		return err
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["default"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	kc.AuthInfos["default"] = &clientcmdapi.AuthInfo{ClientCertificate: n.currentPEM(), ClientKey: n.currentPEM()}
	kc.Contexts["default"] = &clientcmdapi.Context{Cluster: "default", AuthInfo: "default"}
	kc.CurrentContext = "default"
	b, err := clientcmd.Write(*kc)
	if err != nil {
		return err
	}
	return n.Platform.WriteSecret(n.Paths.KubeletKubeconfig, b)
}

// NodeRESTConfig is a client configuration with the node's own credential.
func (n *Node) NodeRESTConfig() (*rest.Config, error) {
	server := n.state.Data.Server
	ca, err := os.ReadFile(n.Platform.Path(n.Paths.ClusterCA))
	if err != nil || server == "" {
		return nil, fmt.Errorf("the node has not discovered its cluster yet")
	}
	pem, err := os.ReadFile(n.Platform.Path(n.currentPEM()))
	if err != nil {
		return nil, fmt.Errorf("the node has no kubelet credential yet")
	}
	return &rest.Config{
		Host:            server,
		TLSClientConfig: rest.TLSClientConfig{CAData: ca, CertData: pem, KeyData: pem},
		Timeout:         30 * time.Second,
		QPS:             20,
		Burst:           40,
	}, nil
}
