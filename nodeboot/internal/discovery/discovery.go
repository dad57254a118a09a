// Package discovery finds and authenticates a cluster the way kubeadm's token discovery does:
// it reads the cluster-info ConfigMap anonymously, checks its JWS signature for the bootstrap
// token, pins the CA it carries, then reads it again over TLS verified with that CA. The token
// itself is never sent before the CA is trusted.
package discovery

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"k8s.io/cluster-bootstrap/token/jws"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"

	"github.com/kubewin/kubewin/internal/capin"
	"github.com/kubewin/kubewin/internal/nodestatus"
)

// Options say which cluster to find and how to trust it.
type Options struct {
	// Endpoint is the API server as host:port.
	Endpoint string
	// Token is the bootstrap token ("id.secret").
	Token string
	// CACertHashes pin the cluster CA; at least one unless UnsafeSkipCAVerification.
	CACertHashes             []string
	UnsafeSkipCAVerification bool
	// Timeout bounds retries of unreachable endpoints and of a signature not yet present (the
	// bootstrap signer adds it shortly after a token is created). Default: 2 minutes.
	Timeout time.Duration
	// Interval between retries. Default: 500 ms.
	Interval time.Duration
	// Now is the machine's clock, compared with the server's. Default: time.Now.
	Now func() time.Time
	// Dial opens the connections (rest.Config.Dial). Default: client-go's.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
}

// MaxClockSkew is how far the machine's clock may be from the API server's.
const MaxClockSkew = 5 * time.Minute

// Result is a discovered, trusted cluster.
type Result struct {
	// Server is the API server URL.
	Server string
	// CACert is the cluster CA bundle (PEM), pinned.
	CACert []byte
}

// Discover finds and authenticates the cluster. Errors carry a nodestatus code.
func Discover(ctx context.Context, o Options) (*Result, error) {
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Minute
	}
	if o.Interval == 0 {
		o.Interval = 500 * time.Millisecond
	}
	id, secret, ok := splitToken(o.Token)
	if !ok {
		return nil, nodestatus.Errorf(nodestatus.CodeConfigInvalid, "the bootstrap token is not of the form [a-z0-9]{6}.[a-z0-9]{16}")
	}
	if len(o.CACertHashes) == 0 && !o.UnsafeSkipCAVerification {
		return nil, nodestatus.Errorf(nodestatus.CodeConfigInvalid,
			"no CA pin: set cluster.caCertHashes (or, on a throw-away cluster, unsafeSkipCAVerification)")
	}
	server := (&url.URL{Scheme: "https", Host: o.Endpoint}).String()
	// No client-side rate limit: the poll interval paces the requests.
	insecure, err := kubernetes.NewForConfig(&rest.Config{Host: server, TLSClientConfig: rest.TLSClientConfig{Insecure: true}, Timeout: 10 * time.Second,
		QPS: -1, Dial: o.Dial})
	if err != nil {
		return nil, nodestatus.Errorf(nodestatus.CodeConfigInvalid, "API server endpoint %q: %w", o.Endpoint, err)
	}

	// 1. Unverified read, retried while the endpoint is unreachable or the token's signature has
	// not appeared yet.
	var cm *corev1.ConfigMap
	var lastErr error
	pollCtx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	_ = wait.PollUntilContextCancel(pollCtx, o.Interval, true, func(ctx context.Context) (bool, error) {
		got, err := fetch(ctx, insecure)
		if err != nil && (ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded)) && lastErr != nil {
			return false, ctx.Err() // keep the last real answer, not the deadline's
		}
		cm, lastErr = got, err
		if err != nil {
			return nodestatus.CodeOf(err) != nodestatus.CodeAPIServerUnreachable, nil
		}
		if _, signed := cm.Data[bootstrapapi.JWSSignatureKeyPrefix+id]; !signed {
			lastErr = nodestatus.Errorf(nodestatus.CodeTokenNotFound,
				"cluster-info at %s carries no signature for token %s: the token expired, was deleted or belongs to another cluster", o.Endpoint, id)
			return false, nil
		}
		return true, nil
	})
	if lastErr != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, lastErr
	}

	// 2. The signature proves that whoever signed cluster-info knows the token's secret.
	kubeconfig := cm.Data[bootstrapapi.KubeConfigKey]
	if !jws.DetachedTokenIsValid(cm.Data[bootstrapapi.JWSSignatureKeyPrefix+id], kubeconfig, id, secret) {
		return nil, nodestatus.Errorf(nodestatus.CodeTokenInvalid, "cluster-info's signature for token %s does not verify with the token's secret", id)
	}
	ca, err := caFromKubeconfig(kubeconfig)
	if err != nil {
		return nil, err
	}

	// 3. The CA pin proves it is the intended cluster.
	certs, err := capin.ParseCertificates(ca)
	if err != nil {
		return nil, nodestatus.Errorf(nodestatus.CodeClusterInfoInvalid, "cluster-info: %w", err)
	}
	if !o.UnsafeSkipCAVerification {
		if err := capin.Verify(o.CACertHashes, certs); err != nil {
			return nil, nodestatus.Errorf(nodestatus.CodeCAPinMismatch, "%w", err)
		}
	}

	// 4. Re-read over TLS verified with the pinned CA: the server must hold the CA's key. The
	// answer's Date header is the trusted server's clock.
	date := &dateRecorder{}
	verified, err := kubernetes.NewForConfig(&rest.Config{Host: server, TLSClientConfig: rest.TLSClientConfig{CAData: ca}, Timeout: 10 * time.Second,
		WrapTransport: date.wrap, Dial: o.Dial})
	if err != nil {
		return nil, nodestatus.Errorf(nodestatus.CodeInternal, "%w", err)
	}
	again, err := fetch(ctx, verified)
	if err != nil {
		if nodestatus.CodeOf(err) == nodestatus.CodeAPIServerUnreachable && isTLSError(err) {
			return nil, nodestatus.Errorf(nodestatus.CodeCAPinMismatch, "the API server's certificate is not signed by the pinned CA: %w", err)
		}
		return nil, err
	}
	if again.Data[bootstrapapi.KubeConfigKey] != kubeconfig {
		return nil, nodestatus.Errorf(nodestatus.CodeClusterInfoInvalid, "cluster-info changed between the unverified and the verified read")
	}
	if err := checkClock(date.last(), o.Now); err != nil {
		return nil, err
	}
	return &Result{Server: server, CACert: ca}, nil
}

// dateRecorder keeps the Date header of the last answer it carried.
type dateRecorder struct {
	mu   sync.Mutex
	rt   http.RoundTripper
	date string
}

func (d *dateRecorder) wrap(rt http.RoundTripper) http.RoundTripper {
	d.rt = rt
	return d
}

func (d *dateRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := d.rt.RoundTrip(req)
	if err == nil {
		d.mu.Lock()
		d.date = resp.Header.Get("Date")
		d.mu.Unlock()
	}
	return resp, err
}

func (d *dateRecorder) last() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.date
}

// checkClock compares the machine's clock with the trusted server's, from the Date header of
// its answer (RFC 9110 section 6.6.1; Go's net/http server, which the API server is, sends it).
func checkClock(date string, now func() time.Time) error {
	if now == nil {
		now = time.Now
	}
	serverTime, err := http.ParseTime(date)
	if err != nil {
		return nil //nolint:nilerr // no Date header (or none that parses): nothing to compare, deliberately not an error
	}
	if skew := now().Sub(serverTime); skew > MaxClockSkew || skew < -MaxClockSkew {
		return nodestatus.Errorf(nodestatus.CodeClockSkew, "the machine's clock is %s off the API server's (%s): certificates and tokens would be rejected",
			skew.Round(time.Second), serverTime.UTC().Format(time.RFC3339))
	}
	return nil
}

func fetch(ctx context.Context, c kubernetes.Interface) (*corev1.ConfigMap, error) {
	cm, err := c.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, bootstrapapi.ConfigMapClusterInfo, metav1.GetOptions{})
	switch {
	case err == nil:
		return cm, nil
	case apierrors.IsNotFound(err), apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return nil, nodestatus.Errorf(nodestatus.CodeClusterInfoInvalid, "read %s/%s: %w", metav1.NamespacePublic, bootstrapapi.ConfigMapClusterInfo, err)
	case apierrors.IsInternalError(err), apierrors.IsServerTimeout(err), apierrors.IsTooManyRequests(err), apierrors.IsServiceUnavailable(err):
		return nil, nodestatus.Errorf(nodestatus.CodeAPIServerUnreachable, "read cluster-info: %w", err)
	}
	var netErr net.Error
	var urlErr *url.Error
	if errors.As(err, &netErr) || errors.As(err, &urlErr) {
		return nil, nodestatus.Errorf(nodestatus.CodeAPIServerUnreachable, "reach the API server: %w", err)
	}
	return nil, nodestatus.Errorf(nodestatus.CodeAPIServerUnreachable, "read cluster-info: %w", err)
}

// isTLSError reports whether err comes from verifying the server's certificate.
func isTLSError(err error) bool {
	var verr *tls.CertificateVerificationError
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	return errors.As(err, &verr) || errors.As(err, &unknownAuthority) || errors.As(err, &hostname) || errors.As(err, &invalid)
}

func caFromKubeconfig(kubeconfig string) ([]byte, error) {
	kc, err := clientcmd.Load([]byte(kubeconfig))
	if err != nil {
		return nil, nodestatus.Errorf(nodestatus.CodeClusterInfoInvalid, "cluster-info's kubeconfig: %w", err)
	}
	for _, c := range kc.Clusters {
		if len(c.CertificateAuthorityData) > 0 {
			return c.CertificateAuthorityData, nil
		}
	}
	return nil, nodestatus.Errorf(nodestatus.CodeClusterInfoInvalid, "cluster-info's kubeconfig has no CA certificate")
}

func splitToken(t string) (id, secret string, ok bool) {
	if !bootstraputil.IsValidBootstrapToken(t) {
		return "", "", false
	}
	id, secret, _ = strings.Cut(t, ".")
	return id, secret, true
}
