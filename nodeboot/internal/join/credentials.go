package join

import (
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubewin/kubewin/internal/nodestatus"
)

// Credential files in the kubelet's certificate directory. The TLS bootstrap writes its key
// before it makes the request, so a restart reuses it, and the signed pair into the combined
// "current" file, which the kubelet reads and rotates, as with kubeadm.
func (n *Node) bootstrapKeyFile() string {
	return n.Paths.KubeletCertDir + `\kubelet-client-bootstrap.key`
}
func (n *Node) currentPEM() string { return n.Paths.KubeletCertDir + `\kubelet-client-current.pem` }

// NodeRESTConfig is a client configuration with the node's own credential. It speaks protobuf,
// as the kubelet does by default (--kube-api-content-type): the node's watch of every Node
// decodes each Node change of the cluster, several times cheaper than from JSON.
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
		Dial:            n.Platform.Dialer(),
		ContentConfig: rest.ContentConfig{
			AcceptContentTypes: runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON,
			ContentType:        runtime.ContentTypeProtobuf,
		},
	}, nil
}

// setBootstrapClient makes the client with the bootstrap token, with which the report is
// written until the node has its own credential.
func (n *Node) setBootstrapClient(server string, ca []byte) error {
	c, err := kubernetes.NewForConfig(&rest.Config{
		Host: server, BearerToken: n.Config.Cluster.BootstrapToken, TLSClientConfig: rest.TLSClientConfig{CAData: ca}, Timeout: 30 * time.Second,
		Dial: n.Platform.Dialer(),
	})
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.bootstrapClient = c
	n.mu.Unlock()
	return nil
}

// tokenClient is the client with the bootstrap token (nil before trusted made it, or with no
// token): the TLS bootstrap's request and the reports share its connection.
func (n *Node) tokenClient() kubernetes.Interface {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.bootstrapClient
}

// trusted returns the discovered server and CA, re-reading them after a restart.
func (n *Node) trusted() (string, []byte, error) {
	ca, err := os.ReadFile(n.Platform.Path(n.Paths.ClusterCA))
	server := n.state.Data.Server
	if err != nil || server == "" {
		return "", nil, nodestatus.Errorf(nodestatus.CodeInternal, "the cluster is not discovered yet: run the discovery phase")
	}
	n.mu.Lock()
	missing := n.bootstrapClient == nil
	n.mu.Unlock()
	if missing && n.Config.Cluster.BootstrapToken != "" {
		if err := n.setBootstrapClient(server, ca); err != nil {
			return "", nil, err
		}
	}
	return server, ca, nil
}

// NodeClient returns a client with the node's own credentials.
func (n *Node) NodeClient() (kubernetes.Interface, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.nodeClient != nil {
		return n.nodeClient, nil
	}
	cfg, err := n.NodeRESTConfig()
	if err != nil {
		return nil, err
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	n.nodeClient = c
	return c, nil
}
