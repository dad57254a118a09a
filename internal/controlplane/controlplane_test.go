package controlplane_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate/csr"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"k8s.io/cluster-bootstrap/token/jws"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"

	"github.com/kubewin/kubewin/internal/controlplane"
	"github.com/kubewin/kubewin/internal/testkit/testenv"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &cp)) }

func adminClient(t *testing.T) *kubernetes.Clientset {
	t.Helper()
	cfg, err := cp.AdminRESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	return kubernetes.NewForConfigOrDie(cfg)
}

// A bootstrap token made with client-go, the way kubeadm stores it, joins a node.
func TestJoinWithClientGoToken(t *testing.T) {
	ctx := context.Background()
	token, err := bootstraputil.GenerateBootstrapToken()
	if err != nil {
		t.Fatal(err)
	}
	id, secret, _ := strings.Cut(token, ".")
	_, err = adminClient(t).CoreV1().Secrets(metav1.NamespaceSystem).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: bootstraputil.BootstrapTokenSecretName(id)},
		Type:       bootstrapapi.SecretTypeBootstrapToken,
		StringData: map[string]string{
			bootstrapapi.BootstrapTokenIDKey:               id,
			bootstrapapi.BootstrapTokenSecretKey:           secret,
			bootstrapapi.BootstrapTokenExpirationKey:       time.Now().Add(10 * time.Minute).UTC().Format(time.RFC3339),
			bootstrapapi.BootstrapTokenUsageAuthentication: "true",
			bootstrapapi.BootstrapTokenUsageSigningKey:     "true",
			bootstrapapi.BootstrapTokenExtraGroupsKey:      "system:bootstrappers:kubeadm:default-node-token",
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	join(t, token, "probe-clientgo")
}

// A token from the real `kubeadm token create` works the same way.
func TestJoinWithKubeadmToken(t *testing.T) {
	out, err := exec.Command(testenv.MustBinary(t, "kubeadm"), "token", "create", "--ttl=10m", "--kubeconfig", cp.AdminKubeconfig()).Output()
	if err != nil {
		t.Fatalf("kubeadm token create: %v", err)
	}
	token := strings.TrimSpace(string(out))
	if !bootstraputil.IsValidBootstrapToken(token) {
		t.Fatalf("kubeadm printed %q, not a bootstrap token", token)
	}
	join(t, token, "probe-kubeadm")
}

// join does what a kubeadm-style join does and checks each step against the real control plane.
func join(t *testing.T, token, nodeName string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, secret, _ := strings.Cut(token, ".")

	// Discovery: cluster-info read anonymously without trusting the server yet, its JWS checked
	// for the token, the CA pinned, then the same object re-read over verified TLS.
	insecure := kubernetes.NewForConfigOrDie(&rest.Config{Host: cp.Endpoint(), TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	var cm *corev1.ConfigMap
	if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var err error
		cm, err = insecure.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, bootstrapapi.ConfigMapClusterInfo, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, signed := cm.Data[bootstrapapi.JWSSignatureKeyPrefix+id]
		return signed, nil
	}); err != nil {
		t.Fatalf("cluster-info was not signed for token %s: %v", id, err)
	}
	kubeconfig := cm.Data[bootstrapapi.KubeConfigKey]
	if !jws.DetachedTokenIsValid(cm.Data[bootstrapapi.JWSSignatureKeyPrefix+id], kubeconfig, id, secret) {
		t.Fatal("cluster-info's JWS signature does not verify with the token")
	}
	if jws.DetachedTokenIsValid(cm.Data[bootstrapapi.JWSSignatureKeyPrefix+id], kubeconfig, id, "0123456789abcdef") {
		t.Fatal("cluster-info's JWS signature verifies with a wrong secret")
	}
	kc, err := clientcmd.Load([]byte(kubeconfig))
	if err != nil {
		t.Fatal(err)
	}
	var caPEM []byte
	for _, c := range kc.Clusters {
		caPEM = c.CertificateAuthorityData
	}
	wantCA, _ := cp.CACert()
	if pin(t, caPEM) != pin(t, wantCA) {
		t.Fatalf("cluster-info carries a CA whose pin %s differs from the cluster's %s", pin(t, caPEM), pin(t, wantCA))
	}
	verified := kubernetes.NewForConfigOrDie(&rest.Config{Host: cp.Endpoint(), TLSClientConfig: rest.TLSClientConfig{CAData: caPEM}})
	cm2, err := verified.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, bootstrapapi.ConfigMapClusterInfo, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("verified re-fetch: %v", err)
	}
	if cm2.Data[bootstrapapi.KubeConfigKey] != kubeconfig {
		t.Fatal("cluster-info differs between the unverified and the verified fetch")
	}

	// TLS bootstrap: a kubelet client CSR authenticated by the token, approved and signed by
	// kube-controller-manager.
	boot := kubernetes.NewForConfigOrDie(&rest.Config{Host: cp.Endpoint(), BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: caPEM}})
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	csrPEM, err := certutil.MakeCSR(key, &pkix.Name{CommonName: "system:node:" + nodeName, Organization: []string{"system:nodes"}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	reqName, reqUID, err := csr.RequestCertificateWithContext(ctx, boot, csrPEM, "", certificatesv1.KubeAPIServerClientKubeletSignerName, nil,
		[]certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}, key)
	if err != nil {
		t.Fatalf("submit CSR with the bootstrap token: %v", err)
	}
	certPEM, err := csr.WaitForCertificate(ctx, boot, reqName, reqUID)
	if err != nil {
		t.Fatalf("CSR %s was not approved and signed: %v", reqName, err)
	}
	block, _ := pem.Decode(certPEM)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != "system:node:"+nodeName {
		t.Fatalf("signed certificate is for %q", cert.Subject.CommonName)
	}

	// The node's own credentials create its Node object; node IPAM gives it a pod CIDR.
	keyDER, _ := x509.MarshalECPrivateKey(key)
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	nodeClient := kubernetes.NewForConfigOrDie(&rest.Config{Host: cp.Endpoint(), TLSClientConfig: rest.TLSClientConfig{CAData: caPEM, CertData: certPEM,
		KeyData: keyPEM}})
	if _, err := nodeClient.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}},
		metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Node as the node: %v", err)
	}
	if _, err := nodeClient.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName + "-other"}},
		metav1.CreateOptions{}); err == nil {
		t.Fatal("NodeRestriction let a node create another node")
	}
	var podCIDR string
	if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		n, err := nodeClient.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		podCIDR = n.Spec.PodCIDR
		return podCIDR != "", nil
	}); err != nil {
		t.Fatalf("node %s got no pod CIDR from node IPAM: %v", nodeName, err)
	}
	if !strings.HasPrefix(podCIDR, "10.244.") || !strings.HasSuffix(podCIDR, "/24") {
		t.Errorf("pod CIDR %s is not a /24 of the cluster CIDR 10.244.0.0/16", podCIDR)
	}
	t.Logf("node %s joined with CSR %s and got pod CIDR %s", nodeName, reqName, podCIDR)
}

// pin is the CA pin kubeadm prints: sha256 of the certificate's SubjectPublicKeyInfo.
func pin(t *testing.T, caPEM []byte) string {
	t.Helper()
	block, _ := pem.Decode(caPEM)
	if block == nil {
		t.Fatal("no PEM certificate")
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(c.RawSubjectPublicKeyInfo)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func TestState(t *testing.T) {
	loaded, err := controlplane.Load(cp.Config.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if loaded.Endpoint() != cp.Endpoint() || loaded.PIDs[controlplane.KubeAPIServer] != cp.PIDs[controlplane.KubeAPIServer] {
		t.Errorf("reloaded state differs: %+v", loaded)
	}
	for c, up := range loaded.Running() {
		if !up {
			t.Errorf("%s is not running", c)
		}
	}
	if !strings.HasPrefix(cp.Version, "v1.") {
		t.Errorf("version %q", cp.Version)
	}
	// No bootstrap token is left behind by kubeadm's bootstrap-token phase: every token secret
	// was created by a test, after the control plane saved its state.
	secrets, err := adminClient(t).CoreV1().Secrets(metav1.NamespaceSystem).List(context.Background(),
		metav1.ListOptions{FieldSelector: "type=" + string(bootstrapapi.SecretTypeBootstrapToken)})
	if err != nil {
		t.Fatal(err)
	}
	ready := startedAt(t).Truncate(time.Second)
	for _, s := range secrets.Items {
		if s.CreationTimestamp.Time.Before(ready) {
			t.Errorf("token secret %s was created at %s, before the control plane was ready at %s", s.Name, s.CreationTimestamp, ready)
		}
	}
}

func startedAt(t *testing.T) time.Time {
	t.Helper()
	fi, err := os.Stat(filepath.Join(cp.Config.Dir, "controlplane.json"))
	if err != nil {
		t.Fatal(err)
	}
	return fi.ModTime()
}

// A stopped control plane resumes on the same ports with its data.
func TestResume(t *testing.T) {
	ctx := context.Background()
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	started, err := controlplane.Start(ctx, controlplane.Config{Dir: dir, BinDir: bin, ClusterName: "resumed"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		// The processes Resume started are in the state file, not in started.
		if cp, err := controlplane.Load(dir); err == nil {
			_ = cp.Destroy(ctx)
		}
	}()
	cfg, _ := started.AdminRESTConfig()
	c := kubernetes.NewForConfigOrDie(cfg)
	if _, err := c.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "survivor"}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := started.Stop(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	for comp, up := range started.Running() {
		if up {
			t.Fatalf("%s still running after Stop", comp)
		}
	}
	resumed, err := controlplane.Resume(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resumed.Endpoint() != started.Endpoint() {
		t.Errorf("endpoint moved from %s to %s", started.Endpoint(), resumed.Endpoint())
	}
	if _, err := c.CoreV1().ConfigMaps("default").Get(ctx, "survivor", metav1.GetOptions{}); err != nil {
		t.Errorf("data lost across the restart: %v", err)
	}
}
