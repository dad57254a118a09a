package join

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509/pkix"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate/csr"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"k8s.io/cluster-bootstrap/token/jws"

	"github.com/kubewin/kubewin/nodeboot/internal/platform"
)

// floorJoin is the least a correct kubeadm-style join does, for the bench to measure nodeboot's
// join against (kubeadm's cmd/kubeadm/app/discovery/token and the kubelet's TLS bootstrap):
// the anonymous, unverified read of kube-public/cluster-info, the token's JWS signature over
// it, the CA pin, the verified re-read, and a kubelet client certificate requested with the
// bootstrap token and waited for with a watch. It keeps nothing on disk and reports nothing.
// Its connections are dial's, the joining machine's own: kubeadm and the kubelet run on the
// machine that joins, so no two joins share a connection.
func floorJoin(ctx context.Context, endpoint, token, pin, nodeName string, dial platform.DialFunc) error {
	id, secret, ok := strings.Cut(token, ".")
	if !ok {
		return fmt.Errorf("token %q is not of the form id.secret", token)
	}
	server := "https://" + endpoint
	insecure, err := kubernetes.NewForConfig(&rest.Config{Host: server, TLSClientConfig: rest.TLSClientConfig{Insecure: true}, QPS: -1, Dial: dial})
	if err != nil {
		return err
	}
	info, err := insecure.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, bootstrapapi.ConfigMapClusterInfo, metav1.GetOptions{})
	if err != nil {
		return err
	}
	kubeconfig := info.Data[bootstrapapi.KubeConfigKey]
	if !jws.DetachedTokenIsValid(info.Data[bootstrapapi.JWSSignatureKeyPrefix+id], kubeconfig, id, secret) {
		return fmt.Errorf("cluster-info's signature does not verify")
	}
	cfg, err := clientcmd.Load([]byte(kubeconfig))
	if err != nil {
		return err
	}
	var ca []byte
	for _, c := range cfg.Clusters {
		ca = c.CertificateAuthorityData
	}
	certs, err := certutil.ParseCertsPEM(ca)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(certs[0].RawSubjectPublicKeyInfo)
	if "sha256:"+hex.EncodeToString(sum[:]) != pin {
		return fmt.Errorf("the cluster CA does not match the pin")
	}
	verified, err := kubernetes.NewForConfig(&rest.Config{Host: server, TLSClientConfig: rest.TLSClientConfig{CAData: ca}, QPS: -1, Dial: dial})
	if err != nil {
		return err
	}
	again, err := verified.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, bootstrapapi.ConfigMapClusterInfo, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if again.Data[bootstrapapi.KubeConfigKey] != kubeconfig {
		return fmt.Errorf("cluster-info changed between the reads")
	}
	bootstrap, err := kubernetes.NewForConfig(&rest.Config{Host: server, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: ca}, QPS: -1,
		Dial: dial})
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	request, err := certutil.MakeCSR(key, &pkix.Name{CommonName: "system:node:" + nodeName, Organization: []string{"system:nodes"}}, nil, nil)
	if err != nil {
		return err
	}
	name, uid, err := csr.RequestCertificateWithContext(ctx, bootstrap, request, "", certificatesv1.KubeAPIServerClientKubeletSignerName, nil,
		[]certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}, key)
	if err != nil {
		return err
	}
	_, err = csr.WaitForCertificate(ctx, bootstrap, name, uid)
	return err
}

// floorNode runs floorJoin with a node's token, pin, name and dialer.
func floorNode(ctx context.Context, n *Node) error {
	c := n.Config.Cluster
	return floorJoin(ctx, c.APIServerEndpoint, c.BootstrapToken, c.CACertHashes[0], n.Name, n.Platform.Dialer())
}

// percentile returns the p-th percentile (0–100) of sorted durations, in milliseconds.
func percentile(sorted []float64, p int) float64 {
	return sorted[min(len(sorted)-1, len(sorted)*p/100)]
}

// sortedMS sorts and returns the figures.
func sortedMS(v []float64) []float64 {
	slices.Sort(v)
	return v
}
