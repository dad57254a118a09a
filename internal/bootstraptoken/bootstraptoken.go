// Package bootstraptoken mints and removes the short-lived, pool-scoped bootstrap tokens nodes
// join with. A token is a kubeadm-format Secret in kube-system: it authenticates as
// system:bootstrap:<id> in kubeadm's default node group (so kubeadm's RBAC lets it request and
// auto-approve a kubelet certificate) and in the pool's own group (which may write the pool's
// join reports), and it signs cluster-info for discovery.
package bootstraptoken

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"

	"github.com/kubewin/kubewin/internal/nodeaccess"
)

// DefaultNodeGroup is kubeadm's group for node bootstrap tokens; kubeadm binds the node
// bootstrapper role and CSR auto-approval to it.
const DefaultNodeGroup = "system:bootstrappers:kubeadm:default-node-token"

// Create mints a token for pool that expires after ttl and returns it ("id.secret").
func Create(ctx context.Context, c kubernetes.Interface, pool string, ttl time.Duration) (string, error) {
	token, err := bootstraputil.GenerateBootstrapToken()
	if err != nil {
		return "", err
	}
	id, secret, _ := strings.Cut(token, ".")
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      bootstraputil.BootstrapTokenSecretName(id),
			Namespace: metav1.NamespaceSystem,
			Labels:    map[string]string{nodeaccess.PoolLabel: pool},
		},
		Type: bootstrapapi.SecretTypeBootstrapToken,
		StringData: map[string]string{
			bootstrapapi.BootstrapTokenIDKey:               id,
			bootstrapapi.BootstrapTokenSecretKey:           secret,
			bootstrapapi.BootstrapTokenDescriptionKey:      "kubewin node pool " + pool,
			bootstrapapi.BootstrapTokenExpirationKey:       time.Now().Add(ttl).UTC().Format(time.RFC3339),
			bootstrapapi.BootstrapTokenUsageAuthentication: "true",
			bootstrapapi.BootstrapTokenUsageSigningKey:     "true",
			bootstrapapi.BootstrapTokenExtraGroupsKey:      DefaultNodeGroup + "," + nodeaccess.PoolGroup(pool),
		},
	}
	if _, err := c.CoreV1().Secrets(metav1.NamespaceSystem).Create(ctx, s, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("create bootstrap token for pool %s: %w", pool, err)
	}
	return token, nil
}

// ID returns the public part of a token.
func ID(token string) string {
	id, _, _ := strings.Cut(token, ".")
	return id
}

// Delete removes a token; a token already gone is not an error.
func Delete(ctx context.Context, c kubernetes.Interface, token string) error {
	err := c.CoreV1().Secrets(metav1.NamespaceSystem).Delete(ctx, bootstraputil.BootstrapTokenSecretName(ID(token)), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete bootstrap token %s: %w", ID(token), err)
	}
	return nil
}

// DeletePool removes every token of a pool.
func DeletePool(ctx context.Context, c kubernetes.Interface, pool string) error {
	err := c.CoreV1().Secrets(metav1.NamespaceSystem).DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: nodeaccess.PoolLabel + "=" + pool, FieldSelector: "type=" + string(bootstrapapi.SecretTypeBootstrapToken)})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete bootstrap tokens of pool %s: %w", pool, err)
	}
	return nil
}

// Live reports whether pool has a token that has not expired at now, which machines created
// with it can still join with. The token cleaner removes expired tokens
// (kube-controller-manager's tokencleaner), and the authenticator refuses them before that.
func Live(ctx context.Context, c kubernetes.Interface, pool string, now time.Time) (bool, error) {
	list, err := c.CoreV1().Secrets(metav1.NamespaceSystem).List(ctx,
		metav1.ListOptions{LabelSelector: nodeaccess.PoolLabel + "=" + pool, FieldSelector: "type=" + string(bootstrapapi.SecretTypeBootstrapToken)})
	if err != nil {
		return false, fmt.Errorf("list bootstrap tokens of pool %s: %w", pool, err)
	}
	for _, s := range list.Items {
		if s.DeletionTimestamp != nil {
			continue
		}
		raw, ok := s.Data[bootstrapapi.BootstrapTokenExpirationKey]
		if !ok {
			raw = []byte(s.StringData[bootstrapapi.BootstrapTokenExpirationKey]) // as written, before the API server merges it
		}
		if exp, ok := expiration(raw); !ok || exp.After(now) { // no (readable) expiration: a token that does not expire
			return true, nil
		}
	}
	return false, nil
}

// expiration parses a token's expiration (RFC 3339, as kubeadm writes it).
func expiration(raw []byte) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339, string(raw))
	return t, err == nil
}
