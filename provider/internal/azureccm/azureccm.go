// Package azureccm is the out-of-tree Azure cloud provider as an azure cluster runs it:
// cloud-controller-manager on the control planes and cloud-node-manager on Linux and Windows
// nodes (Windows as a HostProcess DaemonSet), their RBAC, and their versions per Kubernetes
// minor. The objects follow cloud-provider-azure's deployment
// (https://kubernetes-sigs.github.io/cloud-provider-azure/install/azure-ccm/) and its example
// manifests (examples/out-of-tree/cloud-controller-manager.yaml, cloud-node-manager.yaml).
package azureccm

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/kubewin/kubewin/internal/nodecmd"
)

// Registry is where cloud-provider-azure publishes its images for Kubernetes 1.32 and later
// (mcr.microsoft.com/oss/v2/kubernetes, cloud-provider-azure pull request #9792; the older
// /oss/kubernetes path stopped at v1.34.3).
const Registry = "mcr.microsoft.com/oss/v2/kubernetes"

// Versions are the cloud provider's components' versions.
type Versions struct {
	CloudControllerManager, CloudNodeManager string
}

// versions are the releases per Kubernetes minor: cloud-provider-azure's minor matches
// Kubernetes' (its README's version matrix: v1.y.x → v1.y.z, branch release-1.y); each is the
// newest patch release seen: v1.34.9 (its Helm chart's defaults, pull request #10341), v1.35.14,
// v1.36.11 and v1.37.5 (its releases list).
var versions = map[int]string{34: "v1.34.9", 35: "v1.35.14", 36: "v1.36.11", 37: "v1.37.5"}

// ForMinor returns the versions for a Kubernetes minor (1.minor).
func ForMinor(minor int) (Versions, error) {
	v, ok := versions[minor]
	if !ok {
		return Versions{}, fmt.Errorf("kubewin pins no Azure cloud provider release for Kubernetes 1.%d", minor)
	}
	return Versions{CloudControllerManager: v, CloudNodeManager: v}, nil
}

// Names of the objects, in kube-system.
const (
	Namespace              = "kube-system"
	CloudControllerManager = "cloud-controller-manager"
	CloudNodeManager       = "cloud-node-manager"
	CloudNodeManagerWin    = "cloud-node-manager-windows"
	// CloudConfigPath is the control planes' cloud configuration file, mounted into
	// cloud-controller-manager at the same path.
	CloudConfigPath = "/etc/kubernetes/azure.json"
)

// Config is what the objects depend on.
type Config struct {
	Versions Versions
	// ClusterName names the cluster's cloud resources (--cluster-name): the load balancer of
	// LoadBalancer Services and their rules.
	ClusterName string
	// ClusterCIDR is the pods' CIDR, whose routes the route controller keeps (--cluster-cidr).
	ClusterCIDR string
	// CloudRoutes turns the route controller on: it keeps a route per node (its pod CIDR to its
	// address) in the cluster's route table, and cloud-node-manager keeps a node's network
	// unavailable until its route exists (--wait-routes).
	CloudRoutes bool
	// WindowsServer is the API server's URL as the Windows nodes reach it, and CACert its CA
	// certificate (PEM): the Windows cloud-node-manager's kubeconfig.
	WindowsServer string
	CACert        []byte
}

// Objects are the cloud provider's objects, in the order they are applied.
func Objects(c Config) ([]runtime.Object, error) {
	kubeconfig, err := windowsKubeconfig(c)
	if err != nil {
		return nil, err
	}
	return []runtime.Object{
		serviceAccount(CloudControllerManager), serviceAccount(CloudNodeManager),
		clusterRole("system:"+CloudControllerManager, controllerManagerRules),
		clusterRole("system:"+CloudNodeManager, nodeManagerRules),
		clusterRoleBinding("system:"+CloudControllerManager, CloudControllerManager),
		clusterRoleBinding("system:"+CloudNodeManager, CloudNodeManager),
		// cloud-controller-manager reads the API server's request-header authentication
		// configuration from kube-system/extension-apiserver-authentication.
		&rbacv1.RoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
			ObjectMeta: meta(CloudControllerManager + ":apiserver-authentication-reader"),
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "extension-apiserver-authentication-reader"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: CloudControllerManager, Namespace: Namespace}},
		},
		controllerManager(c), linuxNodeManager(c), kubeconfig, windowsNodeManager(c),
	}, nil
}

func meta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: Namespace, Labels: map[string]string{"app.kubernetes.io/managed-by": "kubewin"}}
}

func serviceAccount(name string) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: meta(name)}
}

// rule is a policy rule of the core group or of group.
func rule(group string, resources []string, verbs ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: resources, Verbs: verbs}
}

// controllerManagerRules are what cloud-controller-manager's controllers (service, route,
// node-lifecycle) and its leader election need; its cloud-node controller is off (--controllers),
// as cloud-node-manager initializes nodes. No serviceaccounts/token: minting tokens is for
// --use-service-account-credentials, which it does not run with, and cloud-provider-azure's Helm
// chart grants none (helm/cloud-provider-azure/templates/cloud-provider-azure.yaml).
var controllerManagerRules = []rbacv1.PolicyRule{
	rule("", []string{"events"}, "create", "patch", "update"),
	rule("", []string{"nodes"}, "get", "list", "watch", "update", "patch", "delete"),
	rule("", []string{"nodes/status"}, "patch"),
	rule("", []string{"services"}, "get", "list", "watch", "patch", "update"),
	rule("", []string{"services/status"}, "patch", "update"),
	rule("", []string{"serviceaccounts"}, "create", "get", "list", "watch", "update"),
	rule("", []string{"configmaps"}, "get", "list", "watch"),
	rule("discovery.k8s.io", []string{"endpointslices"}, "get", "list", "watch"),
	rule("coordination.k8s.io", []string{"leases"}, "get", "create", "update"),
}

// nodeManagerRules are what cloud-node-manager needs to initialize its node: provider ID,
// addresses, zone and instance-type labels, and the removal of the uninitialized taint.
var nodeManagerRules = []rbacv1.PolicyRule{
	rule("", []string{"nodes"}, "get", "list", "watch", "update", "patch"),
	rule("", []string{"nodes/status"}, "patch"),
	rule("", []string{"events"}, "create", "patch", "update"),
}

func clusterRole(name string, rules []rbacv1.PolicyRule) *rbacv1.ClusterRole {
	m := meta(name)
	m.Namespace = ""
	return &rbacv1.ClusterRole{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"}, ObjectMeta: m, Rules: rules}
}

func clusterRoleBinding(name, account string) *rbacv1.ClusterRoleBinding {
	m := meta(name)
	m.Namespace = ""
	return &rbacv1.ClusterRoleBinding{
		TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"}, ObjectMeta: m,
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: account, Namespace: Namespace}},
	}
}

// UninitializedTaint is the taint kubelet --cloud-provider=external puts on a node until the
// cloud provider has initialized it.
const UninitializedTaint = nodecmd.TaintExternalCloudProvider

// controllerManager is cloud-controller-manager: on the control planes, with the host's network
// (it runs before any pod network), reading the cloud configuration from the host and
// authenticating as the control planes' user-assigned identity through the instance metadata
// service. Node CIDRs stay kube-controller-manager's (kubeadm's podSubnet): cloud-provider-azure
// starts its node IPAM controller only with --allocate-node-cidrs, and its route controller on
// --configure-cloud-routes alone, with --cluster-cidr (cmd/cloud-controller-manager/app/core.go,
// startRouteController and startNodeIpamController); the reconciliation period is its Helm
// chart's default.
func controllerManager(c Config) *appsv1.Deployment {
	labels := map[string]string{"component": CloudControllerManager}
	return &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}, ObjectMeta: meta(CloudControllerManager),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: CloudControllerManager, PriorityClassName: "system-node-critical", HostNetwork: true,
					NodeSelector: map[string]string{"node-role.kubernetes.io/control-plane": ""},
					Tolerations: []corev1.Toleration{
						{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
						{Key: UninitializedTaint, Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule},
						{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
					},
					Containers: []corev1.Container{{
						Name: CloudControllerManager, Image: Images(c.Versions)[CloudControllerManager],
						Command: []string{"cloud-controller-manager"},
						Args: []string{
							"--cloud-provider=azure", "--cloud-config=" + CloudConfigPath, "--cluster-name=" + c.ClusterName,
							"--controllers=*,-cloud-node", "--configure-cloud-routes=" + strconv.FormatBool(c.CloudRoutes),
							"--cluster-cidr=" + c.ClusterCIDR, "--route-reconciliation-period=10s", "--allocate-node-cidrs=false",
							"--leader-elect=true", "--bind-address=127.0.0.1", "--secure-port=10268", "--v=2",
						},
						Resources: corev1.ResourceRequirements{Requests: resources("100m", "128Mi")},
						VolumeMounts: []corev1.VolumeMount{
							{Name: "cloud-config", MountPath: CloudConfigPath, ReadOnly: true},
							{Name: "ssl", MountPath: "/etc/ssl", ReadOnly: true},
						},
					}},
					Volumes: []corev1.Volume{
						hostPath("cloud-config", CloudConfigPath, corev1.HostPathFile),
						hostPath("ssl", "/etc/ssl", corev1.HostPathDirectory),
					},
				},
			},
		},
	}
}

func hostPath(name, path string, typ corev1.HostPathType) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: &typ}}}
}

// nodeManagerPod is cloud-node-manager's pod on one operating system: one per node, with the
// host's network, tolerating every taint (it removes the uninitialized one), reading its node's
// instance metadata (--use-instance-metadata is its default).
func nodeManagerPod(os string, c corev1.Container) corev1.PodTemplateSpec {
	labels := map[string]string{"component": CloudNodeManager, "kubernetes.io/os": os}
	c.Env = []corev1.EnvVar{{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}}
	c.Resources = corev1.ResourceRequirements{Requests: resources("50m", "50Mi")}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{
			ServiceAccountName: CloudNodeManager, PriorityClassName: "system-node-critical", HostNetwork: true,
			NodeSelector: map[string]string{"kubernetes.io/os": os},
			Tolerations:  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers:   []corev1.Container{c},
		},
	}
}

func nodeManagerDaemonSet(name, os string, c corev1.Container) *appsv1.DaemonSet {
	pod := nodeManagerPod(os, c)
	return &appsv1.DaemonSet{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"}, ObjectMeta: meta(name),
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: pod.Labels}, Template: pod},
	}
}

// waitRoutes is cloud-node-manager's --wait-routes: with the route controller on, a node's
// network stays unavailable until its route exists (pkg/nodemanager/nodemanager.go).
func waitRoutes(c Config) string { return "--wait-routes=" + strconv.FormatBool(c.CloudRoutes) }

func linuxNodeManager(c Config) *appsv1.DaemonSet {
	return nodeManagerDaemonSet(CloudNodeManager, "linux", corev1.Container{
		Name: CloudNodeManager, Image: Images(c.Versions)[CloudNodeManager],
		Command: []string{"cloud-node-manager", "--node-name=$(NODE_NAME)", waitRoutes(c)},
	})
}

// WindowsKubeconfig is the ConfigMap of the Windows cloud-node-manager's kubeconfig, and
// windowsKubeconfigDir where its pod mounts it.
const (
	WindowsKubeconfig    = "cloud-node-manager-windows-kubeconfig"
	windowsKubeconfigDir = "/var/lib/cnm"
)

// windowsKubeconfig is the Windows cloud-node-manager's kubeconfig. A HostProcess container's
// programs find the service account token under %CONTAINER_SANDBOX_MOUNT_POINT%, not at
// /var/run/secrets, where client-go's in-cluster configuration looks
// (kubernetes/kubernetes#104562): cloud-provider-azure's chart rewrites kube-proxy's kubeconfig
// for it, whose server is the control-plane endpoint, which for an internal API server is a
// name only the Linux machines resolve. This kubeconfig names the server the Windows nodes reach
// and the token by a path relative to the kubeconfig's own directory, which client-go resolves
// against it: <sandbox>/var/lib/cnm/../../run/secrets/... is <sandbox>/var/run/secrets/..., where
// HostProcess containers have their service account token
// (https://kubernetes.io/docs/tasks/configure-pod-container/create-hostprocess-pod/#volume-mounts).
func windowsKubeconfig(c Config) (*corev1.ConfigMap, error) {
	cfg := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"cluster": {Server: c.WindowsServer, CertificateAuthorityData: c.CACert}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{CloudNodeManager: {TokenFile: "../../run/secrets/kubernetes.io/serviceaccount/token"}},
		Contexts:       map[string]*clientcmdapi.Context{"default": {Cluster: "cluster", AuthInfo: CloudNodeManager}},
		CurrentContext: "default",
	}
	data, err := clientcmd.Write(cfg)
	if err != nil {
		return nil, fmt.Errorf("the Windows cloud-node-manager's kubeconfig: %w", err)
	}
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: meta(WindowsKubeconfig),
		Data: map[string]string{"kubeconfig": string(data)},
	}, nil
}

// windowsNodeManager is cloud-node-manager on Windows nodes as a HostProcess container (as
// cloud-provider-azure documents for Windows), which runs on the host as SYSTEM and finds its
// program and volumes under %CONTAINER_SANDBOX_MOUNT_POINT%, which the container runtime expands
// in its command line (https://kubernetes.io/docs/tasks/configure-pod-container/create-hostprocess-pod/).
// It reads its node's instance metadata (--use-instance-metadata, as the chart's start.ps1 runs it).
func windowsNodeManager(c Config) *appsv1.DaemonSet {
	d := nodeManagerDaemonSet(CloudNodeManagerWin, "windows", corev1.Container{
		Name: CloudNodeManager, Image: Images(c.Versions)[CloudNodeManager],
		Command: []string{`%CONTAINER_SANDBOX_MOUNT_POINT%\cloud-node-manager.exe`, "--node-name=$(NODE_NAME)", waitRoutes(c),
			"--use-instance-metadata=true", "--kubeconfig=%CONTAINER_SANDBOX_MOUNT_POINT%" + windowsKubeconfigDir + "/kubeconfig"},
		VolumeMounts: []corev1.VolumeMount{{Name: "kubeconfig", MountPath: windowsKubeconfigDir, ReadOnly: true}},
	})
	spec := &d.Spec.Template.Spec
	spec.SecurityContext = &corev1.PodSecurityContext{WindowsOptions: &corev1.WindowsSecurityContextOptions{
		HostProcess: ptr.To(true), RunAsUserName: ptr.To(`NT AUTHORITY\SYSTEM`),
	}}
	spec.Volumes = []corev1.Volume{{Name: "kubeconfig", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: WindowsKubeconfig},
	}}}}
	return d
}

func resources(cpu, memory string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
}

// Images are the components' image references by component.
func Images(v Versions) map[string]string {
	return map[string]string{
		CloudControllerManager: Registry + "/azure-cloud-controller-manager:" + v.CloudControllerManager,
		CloudNodeManager:       Registry + "/azure-cloud-node-manager:" + v.CloudNodeManager,
	}
}

// Apply applies the objects server-side in order, with field manager kubewin, taking over fields
// others changed (drift is repaired).
func Apply(ctx context.Context, cs kubernetes.Interface, objs []runtime.Object) error {
	for _, o := range objs {
		name := ""
		if m, ok := o.(metav1.Object); ok {
			name = m.GetName()
		}
		data, err := json.Marshal(o)
		if err != nil {
			return err
		}
		opts := metav1.PatchOptions{FieldManager: "kubewin", Force: ptr.To(true)}
		switch o := o.(type) {
		case *corev1.ServiceAccount:
			_, err = cs.CoreV1().ServiceAccounts(o.Namespace).Patch(ctx, o.Name, types.ApplyPatchType, data, opts)
		case *corev1.ConfigMap:
			_, err = cs.CoreV1().ConfigMaps(o.Namespace).Patch(ctx, o.Name, types.ApplyPatchType, data, opts)
		case *rbacv1.ClusterRole:
			_, err = cs.RbacV1().ClusterRoles().Patch(ctx, o.Name, types.ApplyPatchType, data, opts)
		case *rbacv1.ClusterRoleBinding:
			_, err = cs.RbacV1().ClusterRoleBindings().Patch(ctx, o.Name, types.ApplyPatchType, data, opts)
		case *rbacv1.RoleBinding:
			_, err = cs.RbacV1().RoleBindings(o.Namespace).Patch(ctx, o.Name, types.ApplyPatchType, data, opts)
		case *appsv1.Deployment:
			_, err = cs.AppsV1().Deployments(o.Namespace).Patch(ctx, o.Name, types.ApplyPatchType, data, opts)
		case *appsv1.DaemonSet:
			_, err = cs.AppsV1().DaemonSets(o.Namespace).Patch(ctx, o.Name, types.ApplyPatchType, data, opts)
		default:
			return fmt.Errorf("azureccm: no apply for %T", o)
		}
		if err != nil {
			return fmt.Errorf("apply the Azure cloud provider's %s %s: %w", o.GetObjectKind().GroupVersionKind().Kind, name, err)
		}
	}
	return nil
}
