// Package floor is the least a correct node does to join a cluster and go Ready, for the
// benchmarks to measure kubewin against on the same control plane: Join is a kubeadm-style join
// up to the kubelet's client certificate, Register what a kubelet does after it until its Node
// is Ready. Neither keeps anything on disk or reports anything.
package floor

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate/csr"
	"k8s.io/client-go/util/keyutil"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"k8s.io/cluster-bootstrap/token/jws"
	"k8s.io/utils/ptr"

	"github.com/kubewin/kubewin/internal/capin"
)

// Credential is what a join ends with: the trusted server and CA, and the kubelet's client
// certificate and key.
type Credential struct {
	Server          string
	CA              []byte
	CertPEM, KeyPEM []byte
}

// Join is kubeadm's token discovery (cmd/kubeadm/app/discovery/token) and the kubelet's TLS
// bootstrap: the anonymous, unverified read of kube-public/cluster-info, the token's JWS
// signature over it, the CA pin, the verified re-read, and a kubelet client certificate
// requested with the bootstrap token and waited for with a watch.
//
// dial opens the joining machine's connections, its own: kubeadm and the kubelet run on the
// machine that joins, so no two joins share a connection. Within one process, client-go shares a
// transport between clients of equal configuration unless they dial for themselves
// (k8s.io/client-go/transport/cache.go).
func Join(ctx context.Context, endpoint, token, pin, nodeName string, dial func(ctx context.Context, network, address string) (net.Conn, error)) (
	*Credential, error) {
	id, secret, ok := strings.Cut(token, ".")
	if !ok {
		return nil, fmt.Errorf("token %q is not of the form id.secret", token)
	}
	server := "https://" + endpoint
	insecure, err := kubernetes.NewForConfig(&rest.Config{Host: server, TLSClientConfig: rest.TLSClientConfig{Insecure: true}, QPS: -1, Dial: dial})
	if err != nil {
		return nil, err
	}
	info, err := insecure.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, bootstrapapi.ConfigMapClusterInfo, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	kubeconfig := info.Data[bootstrapapi.KubeConfigKey]
	if !jws.DetachedTokenIsValid(info.Data[bootstrapapi.JWSSignatureKeyPrefix+id], kubeconfig, id, secret) {
		return nil, fmt.Errorf("cluster-info's signature does not verify")
	}
	cfg, err := clientcmd.Load([]byte(kubeconfig))
	if err != nil {
		return nil, err
	}
	var ca []byte
	for _, c := range cfg.Clusters {
		ca = c.CertificateAuthorityData
	}
	certs, err := capin.ParseCertificates(ca)
	if err != nil {
		return nil, err
	}
	if err := capin.Verify([]string{pin}, certs); err != nil {
		return nil, err
	}
	verified, err := kubernetes.NewForConfig(&rest.Config{Host: server, TLSClientConfig: rest.TLSClientConfig{CAData: ca}, QPS: -1, Dial: dial})
	if err != nil {
		return nil, err
	}
	again, err := verified.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, bootstrapapi.ConfigMapClusterInfo, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if again.Data[bootstrapapi.KubeConfigKey] != kubeconfig {
		return nil, fmt.Errorf("cluster-info changed between the reads")
	}
	bootstrap, err := kubernetes.NewForConfig(&rest.Config{Host: server, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: ca}, QPS: -1,
		Dial: dial})
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	request, err := certutil.MakeCSR(key, &pkix.Name{CommonName: "system:node:" + nodeName, Organization: []string{"system:nodes"}}, nil, nil)
	if err != nil {
		return nil, err
	}
	name, uid, err := csr.RequestCertificateWithContext(ctx, bootstrap, request, "", certificatesv1.KubeAPIServerClientKubeletSignerName, nil,
		[]certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}, key)
	if err != nil {
		return nil, err
	}
	certPEM, err := csr.WaitForCertificate(ctx, bootstrap, name, uid)
	if err != nil {
		return nil, err
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return nil, err
	}
	return &Credential{Server: server, CA: ca, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

// Register is what a kubelet does with its credential until its Node is Ready
// (kubernetes pkg/kubelet/kubelet_node_status.go registerWithAPIServer and updateNodeStatus,
// k8s.io/component-helpers/apimachinery/lease): it creates its Node, patches the Node's status
// with its address, capacity and a Ready condition, and creates its Lease, owned by the Node.
// The client speaks protobuf, as the kubelet's does by default.
func Register(ctx context.Context, c *Credential, nodeName string, address net.IP,
	dial func(ctx context.Context, network, address string) (net.Conn, error)) error {
	client, err := kubernetes.NewForConfig(&rest.Config{
		Host: c.Server, TLSClientConfig: rest.TLSClientConfig{CAData: c.CA, CertData: c.CertPEM, KeyData: c.KeyPEM}, QPS: -1, Dial: dial,
		ContentConfig: rest.ContentConfig{ContentType: "application/vnd.kubernetes.protobuf"},
	})
	if err != nil {
		return err
	}
	node, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: map[string]string{
		corev1.LabelHostname: nodeName, corev1.LabelOSStable: "windows", corev1.LabelArchStable: "amd64",
	}}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("register node %s: %w", nodeName, err)
	}
	now := metav1.Now()
	capacity := corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110")}
	status := corev1.NodeStatus{
		Capacity: capacity, Allocatable: capacity,
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: now,
			LastTransitionTime: now}},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: address.String()}, {Type: corev1.NodeHostName, Address: nodeName}},
	}
	patch, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return err
	}
	if _, err := client.CoreV1().Nodes().PatchStatus(ctx, nodeName, patch); err != nil {
		return fmt.Errorf("report node %s Ready: %w", nodeName, err)
	}
	_, err = client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName, Namespace: corev1.NamespaceNodeLease, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID,
		}}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(nodeName), LeaseDurationSeconds: ptr.To(int32(40)),
			RenewTime: ptr.To(metav1.NewMicroTime(now.Time))},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create the lease of node %s: %w", nodeName, err)
	}
	return nil
}

// WaitSigned waits until cluster-info carries the token's signature: the controller manager's
// bootstrap signer adds it shortly after the token is made.
func WaitSigned(ctx context.Context, admin kubernetes.Interface, token string) error {
	id, _, _ := strings.Cut(token, ".")
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		info, err := admin.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, bootstrapapi.ConfigMapClusterInfo, metav1.GetOptions{})
		return err == nil && info.Data[bootstrapapi.JWSSignatureKeyPrefix+id] != "", nil
	})
	if err != nil {
		return fmt.Errorf("cluster-info has no signature for token %s: %w", id, err)
	}
	return nil
}
