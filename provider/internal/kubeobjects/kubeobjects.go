// Package kubeobjects builds and applies the Kubernetes objects of the components kubewin runs
// on an azure cluster (the Azure cloud provider, the Azure CSI drivers): the pieces their
// manifests share, server-side apply with kubewin as field manager, and their removal.
package kubeobjects

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

// Namespace is where the components run.
const Namespace = "kube-system"

// ManagedByLabel is kubewin on every object it applies (ManagedBy).
const ManagedByLabel = "app.kubernetes.io/managed-by"

// ManagedBy labels every object kubewin applies.
var ManagedBy = map[string]string{ManagedByLabel: "kubewin"}

// Meta is the metadata of a namespaced object in kube-system.
func Meta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: Namespace, Labels: ManagedBy}
}

// ClusterMeta is the metadata of a cluster-scoped object.
func ClusterMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Labels: ManagedBy}
}

// ServiceAccount is a service account in kube-system.
func ServiceAccount(name string) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: Meta(name)}
}

// Rule is a policy rule of the core group or of group.
func Rule(group string, resources []string, verbs ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: resources, Verbs: verbs}
}

// ClusterRole is a cluster role of rules.
func ClusterRole(name string, rules []rbacv1.PolicyRule) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		ObjectMeta: ClusterMeta(name), Rules: rules}
}

// ClusterRoleBinding binds cluster role role to service account account of kube-system.
func ClusterRoleBinding(name, role, account string) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
		ObjectMeta: ClusterMeta(name),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: account, Namespace: Namespace}},
	}
}

// HostPath is a volume of a host path.
func HostPath(name, path string, typ corev1.HostPathType) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: &typ}}}
}

// Resources is a container's CPU and memory.
func Resources(cpu, memory string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
}

// NodeNameEnv is the environment variable name set to the pod's node.
func NodeNameEnv(name string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}
}

// ReplaceInPlace is the update strategy of a Deployment whose pods use the host's network and
// ports on a fixed set of nodes (the control planes): the default rolling update adds a new pod
// before it removes an old one, and with a pod on every eligible node the new one has nowhere
// to go (its host port is taken), so the rollout would never progress. Replacing one pod at a
// time, old first, lets it.
func ReplaceInPlace() appsv1.DeploymentStrategy {
	zero, one := intstr.FromInt32(0), intstr.FromInt32(1)
	return appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &zero, MaxUnavailable: &one}}
}

// HostProcess makes a pod a Windows HostProcess pod, which runs on the host as SYSTEM with the
// host's network (https://kubernetes.io/docs/tasks/configure-pod-container/create-hostprocess-pod/).
func HostProcess(spec *corev1.PodSpec) {
	spec.HostNetwork = true
	spec.SecurityContext = &corev1.PodSecurityContext{WindowsOptions: &corev1.WindowsSecurityContextOptions{
		HostProcess: ptr.To(true), RunAsUserName: ptr.To(`NT AUTHORITY\SYSTEM`),
	}}
}

// HostProcessKubeconfig is the ConfigMap name of a HostProcess pod's kubeconfig, which its pod
// mounts at dir (a path under the container's root, such as /var/lib/cnm). A HostProcess
// container's programs find the service account token under %CONTAINER_SANDBOX_MOUNT_POINT%, not
// at /var/run/secrets, where client-go's in-cluster configuration looks (kubernetes/kubernetes#104562),
// and the cluster's service address is not one the Windows hosts are known to reach: the
// kubeconfig names the server the Windows nodes reach and the token by a path relative to the
// kubeconfig's own directory, which client-go resolves against it — for dir two levels deep,
// <sandbox>/var/lib/x/../../run/secrets/... is <sandbox>/var/run/secrets/..., where HostProcess
// containers have their service account token
// (https://kubernetes.io/docs/tasks/configure-pod-container/create-hostprocess-pod/#volume-mounts).
func HostProcessKubeconfig(name, user, server string, caCert []byte) (*corev1.ConfigMap, error) {
	cfg := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"cluster": {Server: server, CertificateAuthorityData: caCert}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{user: {TokenFile: "../../run/secrets/kubernetes.io/serviceaccount/token"}},
		Contexts:       map[string]*clientcmdapi.Context{"default": {Cluster: "cluster", AuthInfo: user}},
		CurrentContext: "default",
	}
	data, err := clientcmd.Write(cfg)
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig of %s: %w", user, err)
	}
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: Meta(name),
		Data: map[string]string{"kubeconfig": string(data)},
	}, nil
}

// KubeconfigVolume is the volume of a HostProcessKubeconfig ConfigMap.
func KubeconfigVolume(volume, configMap string) corev1.Volume {
	return corev1.Volume{Name: volume, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: configMap},
	}}}
}

// Apply applies the objects server-side in order, with field manager kubewin, taking over fields
// others changed (drift is repaired); what names the objects in errors.
func Apply(ctx context.Context, cs kubernetes.Interface, what string, objs []runtime.Object) error {
	for _, o := range objs {
		req, err := request(cs, o, func(c rest.Interface) *rest.Request { return c.Patch(types.ApplyPatchType) })
		if err != nil {
			return err
		}
		data, err := json.Marshal(o)
		if err != nil {
			return err
		}
		if err := req.Param("fieldManager", "kubewin").Param("force", "true").Body(data).Do(ctx).Error(); err != nil {
			return fmt.Errorf("apply %s's %s %s: %w", what, o.GetObjectKind().GroupVersionKind().Kind, name(o), err)
		}
	}
	return nil
}

// Delete deletes the objects in reverse order, their dependents in the background; one that is
// gone is left.
func Delete(ctx context.Context, cs kubernetes.Interface, what string, objs []runtime.Object) error {
	for _, o := range slices.Backward(objs) {
		req, err := request(cs, o, func(c rest.Interface) *rest.Request { return c.Delete() })
		if err != nil {
			return err
		}
		opts := metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}
		if err := req.Body(&opts).Do(ctx).Error(); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete %s's %s %s: %w", what, o.GetObjectKind().GroupVersionKind().Kind, name(o), err)
		}
	}
	return nil
}

// request is verb's request for object o: its API group's REST client, its resource and, for a
// namespaced one, its namespace.
func request(cs kubernetes.Interface, o runtime.Object, verb func(rest.Interface) *rest.Request) (*rest.Request, error) {
	var c rest.Interface
	var resource string
	switch o.(type) {
	case *corev1.ServiceAccount:
		c, resource = cs.CoreV1().RESTClient(), "serviceaccounts"
	case *corev1.ConfigMap:
		c, resource = cs.CoreV1().RESTClient(), "configmaps"
	case *rbacv1.ClusterRole:
		c, resource = cs.RbacV1().RESTClient(), "clusterroles"
	case *rbacv1.ClusterRoleBinding:
		c, resource = cs.RbacV1().RESTClient(), "clusterrolebindings"
	case *rbacv1.RoleBinding:
		c, resource = cs.RbacV1().RESTClient(), "rolebindings"
	case *appsv1.Deployment:
		c, resource = cs.AppsV1().RESTClient(), "deployments"
	case *appsv1.DaemonSet:
		c, resource = cs.AppsV1().RESTClient(), "daemonsets"
	case *storagev1.CSIDriver:
		c, resource = cs.StorageV1().RESTClient(), "csidrivers"
	case *storagev1.StorageClass:
		c, resource = cs.StorageV1().RESTClient(), "storageclasses"
	case *admissionregistrationv1.ValidatingAdmissionPolicy:
		c, resource = cs.AdmissionregistrationV1().RESTClient(), "validatingadmissionpolicies"
	case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
		c, resource = cs.AdmissionregistrationV1().RESTClient(), "validatingadmissionpolicybindings"
	default:
		return nil, fmt.Errorf("kubeobjects: no resource for %T", o)
	}
	req := verb(c)
	if m, ok := o.(metav1.Object); ok && m.GetNamespace() != "" {
		req = req.Namespace(m.GetNamespace())
	}
	return req.Resource(resource).Name(name(o)), nil
}

func name(o runtime.Object) string {
	if m, ok := o.(metav1.Object); ok {
		return m.GetName()
	}
	return ""
}
