// Package nodeaccess grants a node pool exactly what its nodes need beyond the Node authorizer:
// the pool's bootstrap tokens and each node may read and update that node's join report (and
// nothing else there), and each node may run kube-proxy (and host-gateway route
// reconciliation) with its own credential through the system:node-proxier role, which lets it
// watch Services, EndpointSlices and Nodes.
package nodeaccess

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubewin/kubewin/internal/nodestatus"
)

// PoolGroup is the extra group of a pool's bootstrap tokens.
func PoolGroup(pool string) string { return "system:bootstrappers:kubewin:" + pool }

// PoolLabel marks the objects that belong to a pool.
const PoolLabel = "kubewin.io/pool"

func roleName(pool string) string { return "kubewin:nodeboot-report:" + pool }

func proxierBindingName(pool string) string { return "kubewin:node-proxier:" + pool }

// NodeProxierRole is the upstream role kube-proxy runs with.
const NodeProxierRole = "system:node-proxier"

// Prepare makes the report objects of a pool's nodes and grants the pool's access. It is
// idempotent; nodes no longer in the list lose their object and access.
func Prepare(ctx context.Context, c kubernetes.Interface, pool string, nodes []string) error {
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nodestatus.Namespace}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", nodestatus.Namespace, err)
	}
	// The pool's objects as they are: one read, rather than a create refused for each node that
	// has its object already.
	list, err := c.CoreV1().ConfigMaps(nodestatus.Namespace).List(ctx, metav1.ListOptions{LabelSelector: PoolLabel + "=" + pool})
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, cm := range list.Items {
		have[cm.Name] = true
	}
	names := make([]string, 0, len(nodes))
	subjects := []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: PoolGroup(pool)}}
	for _, n := range nodes {
		names = append(names, nodestatus.ObjectName(n))
		subjects = append(subjects, rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "system:node:" + n})
		if have[nodestatus.ObjectName(n)] {
			continue
		}
		if _, err := c.CoreV1().ConfigMaps(nodestatus.Namespace).Create(ctx, nodestatus.ReportObject(PoolLabel, pool, n),
			metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create report object for node %s: %w", n, err)
		}
	}
	slices.Sort(names)
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: roleName(pool), Namespace: nodestatus.Namespace, Labels: map[string]string{PoolLabel: pool}},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""}, Resources: []string{"configmaps"},
			Verbs: []string{"get", "update", "patch"}, ResourceNames: names,
		}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: roleName(pool), Namespace: nodestatus.Namespace, Labels: map[string]string{PoolLabel: pool}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: roleName(pool)},
		Subjects:   subjects,
	}
	if len(names) == 0 {
		return Cleanup(ctx, c, pool)
	}
	proxier := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: proxierBindingName(pool), Labels: map[string]string{PoolLabel: pool}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: NodeProxierRole},
		Subjects:   subjects[1:],
	}
	if err := apply(ctx, c.RbacV1().ClusterRoleBindings().Create, c.RbacV1().ClusterRoleBindings().Update, proxier); err != nil {
		return fmt.Errorf("grant %s to pool %s: %w", NodeProxierRole, pool, err)
	}
	if err := apply(ctx, c.RbacV1().Roles(nodestatus.Namespace).Create, c.RbacV1().Roles(nodestatus.Namespace).Update, role); err != nil {
		return fmt.Errorf("grant report access for pool %s: %w", pool, err)
	}
	if err := apply(ctx, c.RbacV1().RoleBindings(nodestatus.Namespace).Create, c.RbacV1().RoleBindings(nodestatus.Namespace).Update,
		binding); err != nil {
		return fmt.Errorf("grant report access for pool %s: %w", pool, err)
	}
	// Remove the objects of nodes that left the pool.
	for _, cm := range list.Items {
		if !slices.Contains(names, cm.Name) {
			if err := c.CoreV1().ConfigMaps(nodestatus.Namespace).Delete(ctx, cm.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	return nil
}

// Cleanup removes a pool's report objects and RBAC.
func Cleanup(ctx context.Context, c kubernetes.Interface, pool string) error {
	var errs []error
	sel := metav1.ListOptions{LabelSelector: PoolLabel + "=" + pool}
	errs = append(errs, ignoreNotFound(c.CoreV1().ConfigMaps(nodestatus.Namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, sel)))
	errs = append(errs, ignoreNotFound(c.RbacV1().RoleBindings(nodestatus.Namespace).Delete(ctx, roleName(pool), metav1.DeleteOptions{})))
	errs = append(errs, ignoreNotFound(c.RbacV1().Roles(nodestatus.Namespace).Delete(ctx, roleName(pool), metav1.DeleteOptions{})))
	errs = append(errs, ignoreNotFound(c.RbacV1().ClusterRoleBindings().Delete(ctx, proxierBindingName(pool), metav1.DeleteOptions{})))
	return errors.Join(errs...)
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// apply creates obj, or updates it when it exists.
func apply[T interface{ GetName() string }](ctx context.Context,
	create func(context.Context, T, metav1.CreateOptions) (T, error),
	update func(context.Context, T, metav1.UpdateOptions) (T, error), obj T) error {
	if _, err := create(ctx, obj, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		return err
	}
	_, err := update(ctx, obj, metav1.UpdateOptions{})
	return err
}
