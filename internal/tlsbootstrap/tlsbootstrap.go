// Package tlsbootstrap obtains a node's kubelet client certificate with a bootstrap token: a CSR
// for system:node:<name> with the kube-apiserver-client-kubelet signer, approved and signed by
// the control plane. It is resumable without duplicates: the private key is written before the
// CSR is submitted and the CSR's name is derived from the key, so a restarted join finds its own
// request instead of making another.
package tlsbootstrap

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base32"
	"encoding/pem"
	"errors"
	"net"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate/csr"
	"k8s.io/client-go/util/keyutil"

	"github.com/kubewin/kubewin/internal/nodestatus"
)

// Options say whom to ask for which certificate and where to keep it.
type Options struct {
	Server string // API server URL
	// ServerName, when set, is the name the API server's certificate is verified for instead of
	// Server's host.
	ServerName string
	CACert     []byte // pinned cluster CA (PEM)
	Token      string
	NodeName   string
	// KeyFile and CertFile hold the kubelet client key and certificate, as paths ReadFile and
	// WriteFile understand. The key is written before the request is made, so that a restart
	// reuses it; the certificate once it is signed, unless Store keeps the pair.
	KeyFile, CertFile string
	// Store, when set, keeps the signed certificate and its key instead of CertFile being
	// written; CertFile is then only read, for a credential still valid. The kubelet's
	// certificate store keeps both in one file (client-go util/certificate), which CertFile may
	// name: a certificate file may hold the key as well.
	Store func(certPEM, keyPEM []byte) error
	// Timeout bounds the wait for approval and signing. Default: 5 minutes.
	Timeout time.Duration
	// ReadFile reads a file; WriteFile writes one readable by its owner only.
	ReadFile  func(path string) ([]byte, error)
	WriteFile func(path string, data []byte) error
	// Dial opens the connections (rest.Config.Dial). Default: client-go's.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// Client, when set, is the caller's client with Token, trusting CACert, over whose
	// connection the request is made and waited for; otherwise one is made from Server, CACert,
	// Token, ServerName and Dial.
	Client kubernetes.Interface
}

// Result is the node's credential. KeyPEM is the certificate store's combined file when the
// credential was found there.
type Result struct {
	CertPEM, KeyPEM []byte
	// CSRName is the request that produced the certificate ("" when one already existed).
	CSRName string
}

// Run returns the node's kubelet client credential, requesting it when there is no valid one.
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Minute
	}
	if r, ok := existing(o); ok {
		return r, nil
	}
	key, keyPEM, err := loadOrCreateKey(o)
	if err != nil {
		return nil, nodestatus.Errorf(nodestatus.CodeInternal, "kubelet client key: %w", err)
	}
	client := o.Client
	if client == nil {
		if client, err = kubernetes.NewForConfig(&rest.Config{Host: o.Server, BearerToken: o.Token, TLSClientConfig: rest.TLSClientConfig{CAData: o.CACert,
			ServerName: o.ServerName}, Timeout: 30 * time.Second, Dial: o.Dial}); err != nil {
			return nil, nodestatus.Errorf(nodestatus.CodeInternal, "%w", err)
		}
	}
	csrPEM, err := certutil.MakeCSR(key, &pkix.Name{CommonName: "system:node:" + o.NodeName, Organization: []string{"system:nodes"}}, nil, nil)
	if err != nil {
		return nil, nodestatus.Errorf(nodestatus.CodeInternal, "make CSR: %w", err)
	}
	name, err := csrName(key)
	if err != nil {
		return nil, nodestatus.Errorf(nodestatus.CodeInternal, "%w", err)
	}
	// RequestCertificate returns the existing request when one of this name matches ours.
	reqName, reqUID, err := csr.RequestCertificateWithContext(ctx, client, csrPEM, name, certificatesv1.KubeAPIServerClientKubeletSignerName, nil,
		[]certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}, key)
	if err != nil {
		return nil, classify(err, "submit certificate signing request")
	}
	waitCtx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	certPEM, err := csr.WaitForCertificate(waitCtx, client, reqName, reqUID)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if strings.Contains(err.Error(), "denied") || strings.Contains(err.Error(), "failed") {
			return nil, nodestatus.Errorf(nodestatus.CodeCSRDenied, "certificate signing request %s: %w", reqName, err)
		}
		if waitCtx.Err() != nil {
			return nil, nodestatus.Errorf(nodestatus.CodeCSRTimeout, "certificate signing request %s was not signed within %s", reqName, o.Timeout)
		}
		return nil, classify(err, "wait for certificate signing request "+reqName)
	}
	store := o.Store
	if store == nil {
		store = func(certPEM, _ []byte) error { return o.WriteFile(o.CertFile, certPEM) }
	}
	if err := store(certPEM, keyPEM); err != nil {
		return nil, nodestatus.Errorf(nodestatus.CodeInternal, "write kubelet client certificate: %w", err)
	}
	return &Result{CertPEM: certPEM, KeyPEM: keyPEM, CSRName: reqName}, nil
}

// existing returns the credential on disk when its certificate is valid for a while yet and
// belongs to its key: the key CertFile holds with it (the certificate store's combined file,
// whose pair the kubelet rotates: a rotated pair is the credential, not the bootstrap key's),
// or else KeyFile's.
func existing(o Options) (*Result, bool) {
	certPEM, err := o.ReadFile(o.CertFile)
	if err != nil {
		return nil, false
	}
	keyPEM := certPEM
	if _, err := keyutil.ParsePrivateKeyPEM(certPEM); err != nil {
		if keyPEM, err = o.ReadFile(o.KeyFile); err != nil {
			return nil, false
		}
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, false
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil || time.Until(leaf.NotAfter) < time.Hour || leaf.Subject.CommonName != "system:node:"+o.NodeName {
		return nil, false
	}
	return &Result{CertPEM: certPEM, KeyPEM: keyPEM}, true
}

func loadOrCreateKey(o Options) (crypto.Signer, []byte, error) {
	if b, err := o.ReadFile(o.KeyFile); err == nil {
		k, err := keyutil.ParsePrivateKeyPEM(b)
		if err == nil {
			if s, ok := k.(crypto.Signer); ok {
				return s, b, nil
			}
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: keyutil.ECPrivateKeyBlockType, Bytes: der})
	// The key is on disk before the request exists, so a restart reuses both.
	if err := o.WriteFile(o.KeyFile, keyPEM); err != nil {
		return nil, nil, err
	}
	return key, keyPEM, nil
}

// csrName derives the request's name from the public key.
func csrName(key crypto.Signer) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(der)
	return "node-csr-" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:20])), nil
}

func classify(err error, what string) error {
	switch {
	case apierrors.IsUnauthorized(err):
		return nodestatus.Errorf(nodestatus.CodeTLSBootstrapUnauthorized, "%s: the bootstrap token was rejected: %w", what, err)
	case apierrors.IsForbidden(err):
		return nodestatus.Errorf(nodestatus.CodeTLSBootstrapForbidden, "%s: %w", what, err)
	}
	var netErr interface{ Timeout() bool }
	if errors.As(err, &netErr) {
		return nodestatus.Errorf(nodestatus.CodeAPIServerUnreachable, "%s: %w", what, err)
	}
	return nodestatus.Errorf(nodestatus.CodeInternal, "%s: %w", what, err)
}
