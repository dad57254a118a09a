package join

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/util/certificate"
)

// TestKubeletCertificateStoreRotates drives the kubelet's own certificate store (client-go's
// util/certificate file store, which the kubelet rotates its client certificate with) over the
// files the join wrote: it must load the node's credential and accept a rotated one. The store
// refuses to update a kubelet-client-current.pem that is a regular file.
func TestKubeletCertificateStoreRotates(t *testing.T) {
	n := newNode(t, nodeOpts{})
	if err := n.Join(context.Background()); err != nil {
		t.Fatalf("join: %v\n%s", err, n.Out)
	}
	dir := n.Platform.Path(n.Paths.KubeletCertDir)
	store, err := certificate.NewFileStore("kubelet-client", dir, dir, "", "")
	if err != nil {
		t.Fatal(err)
	}
	cur, err := store.Current()
	if err != nil {
		t.Fatalf("the certificate store cannot load what the join wrote: %v", err)
	}
	if want := "system:node:" + n.Name; cur.Leaf.Subject.CommonName != want {
		t.Errorf("current certificate is for %q, want %q", cur.Leaf.Subject.CommonName, want)
	}

	certPEM, keyPEM := selfSigned(t, "system:node:"+n.Name)
	if _, err := store.Update(certPEM, keyPEM); err != nil {
		t.Fatalf("the certificate store cannot rotate the kubelet's client certificate: %v", err)
	}
	rotated, err := store.Current()
	if err != nil {
		t.Fatal(err)
	}
	if rotated.Leaf.SerialNumber.Cmp(cur.Leaf.SerialNumber) == 0 {
		t.Error("after the update the store still serves the join's certificate")
	}
	// The node's own client reads the rotated credential through the same link.
	if _, err := os.ReadFile(n.Platform.Path(n.currentPEM())); err != nil {
		t.Error(err)
	}
	if _, err := reopen(t, n).NodeRESTConfig(); err != nil {
		t.Error(err)
	}
}

// selfSigned returns a certificate and its key, PEM-encoded.
func selfSigned(t *testing.T, cn string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	k, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: k})
}

// TestTLSBootstrapFiles checks that the TLS bootstrap leaves in the kubelet's certificate
// directory what the kubelet's own bootstrap does (pkg/kubelet/certificate/bootstrap): the key
// it made before the request, and the signed pair in the certificate store (a timestamped file
// and the "current" link), with no certificate file of its own; and that the phase run again
// finds that credential and neither asks for another nor writes the store again.
func TestTLSBootstrapFiles(t *testing.T) {
	ctx := context.Background()
	n, dir := bootstrapped(t)
	list := func() []string {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return names
	}
	files := list()
	if len(files) != 3 || !strings.HasPrefix(files[0], "kubelet-client-20") ||
		files[1] != "kubelet-client-bootstrap.key" || files[2] != "kubelet-client-current.pem" {
		t.Errorf("the kubelet's certificate directory holds %q, want the bootstrap key, kubelet-client-<time>.pem and kubelet-client-current.pem", files)
	}
	time.Sleep(time.Second) // a store written again would have a file of another second
	if err := n.RunPhase(ctx, PhaseTLSBootstrap); err != nil {
		t.Fatal(err)
	}
	if again := list(); !slices.Equal(again, files) {
		t.Errorf("the phase run again left %q, before %q", again, files)
	}
	if csrs := csrsFor(t, n.Name); len(csrs) != 1 {
		t.Errorf("%d CSRs, want 1: %v", len(csrs), csrs)
	}
}

// TestTLSBootstrapKeepsRotatedCredential checks that the TLS bootstrap run again after the
// kubelet rotated its client certificate (through its certificate store, as the kubelet does)
// finds the rotated pair and keeps it: it neither asks for a certificate of the bootstrap key
// again nor points the store back at the bootstrap pair.
func TestTLSBootstrapKeepsRotatedCredential(t *testing.T) {
	ctx := context.Background()
	n, dir := bootstrapped(t)
	store, err := certificate.NewFileStore("kubelet-client", dir, dir, "", "")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM := selfSigned(t, "system:node:"+n.Name)
	rotated, err := store.Update(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.RunPhase(ctx, PhaseTLSBootstrap); err != nil {
		t.Fatal(err)
	}
	cur, err := store.Current()
	if err != nil {
		t.Fatal(err)
	}
	if cur.Leaf.SerialNumber.Cmp(rotated.Leaf.SerialNumber) != 0 {
		t.Errorf("after the phase ran again the store serves certificate %s, not the rotated %s", cur.Leaf.SerialNumber, rotated.Leaf.SerialNumber)
	}
}

// bootstrapped is a node that has run the TLS bootstrap, and its kubelet's certificate directory.
func bootstrapped(t *testing.T) (*Node, string) {
	t.Helper()
	n := newNode(t, nodeOpts{})
	if err := n.RunPhase(context.Background(), PhaseTLSBootstrap); err != nil {
		t.Fatal(err)
	}
	return n, n.Platform.Path(n.Paths.KubeletCertDir)
}
