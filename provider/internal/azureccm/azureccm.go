// Package azureccm is the out-of-tree Azure cloud provider as an azure cluster runs it:
// cloud-controller-manager on the control planes and cloud-node-manager on Linux and Windows
// nodes (Windows as a HostProcess DaemonSet), their RBAC, and their versions per Kubernetes
// minor. The objects follow cloud-provider-azure's deployment
// (https://kubernetes-sigs.github.io/cloud-provider-azure/install/azure-ccm/) and its example
// manifests (examples/out-of-tree/cloud-controller-manager.yaml, cloud-node-manager.yaml).
package azureccm

import (
	"context"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubewin/kubewin/internal/nodecmd"
	"github.com/kubewin/kubewin/provider/internal/kubeobjects"
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
	Namespace              = kubeobjects.Namespace
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
	return append([]runtime.Object{
		kubeobjects.ServiceAccount(CloudControllerManager), kubeobjects.ServiceAccount(CloudNodeManager),
		kubeobjects.ClusterRole("system:"+CloudControllerManager, controllerManagerRules),
		kubeobjects.ClusterRole("system:"+CloudNodeManager, nodeManagerRules),
		kubeobjects.ClusterRoleBinding("system:"+CloudControllerManager, "system:"+CloudControllerManager, CloudControllerManager),
		kubeobjects.ClusterRoleBinding("system:"+CloudNodeManager, "system:"+CloudNodeManager, CloudNodeManager),
		// cloud-controller-manager reads the API server's request-header authentication
		// configuration from kube-system/extension-apiserver-authentication.
		&rbacv1.RoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
			ObjectMeta: kubeobjects.Meta(CloudControllerManager + ":apiserver-authentication-reader"),
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "extension-apiserver-authentication-reader"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: CloudControllerManager, Namespace: Namespace}},
		},
		controllerManager(c), linuxNodeManager(c), kubeconfig, windowsNodeManager(c),
	}, servicePolicyObjects()...), nil
}

// controllerManagerRules are what cloud-controller-manager's controllers (service, route,
// node-lifecycle) and its leader election need; its cloud-node controller is off (--controllers),
// as cloud-node-manager initializes nodes. No serviceaccounts/token: minting tokens is for
// --use-service-account-credentials, which it does not run with, and cloud-provider-azure's Helm
// chart grants none (helm/cloud-provider-azure/templates/cloud-provider-azure.yaml).
var controllerManagerRules = []rbacv1.PolicyRule{
	kubeobjects.Rule("", []string{"events"}, "create", "patch", "update"),
	kubeobjects.Rule("", []string{"nodes"}, "get", "list", "watch", "update", "patch", "delete"),
	kubeobjects.Rule("", []string{"nodes/status"}, "patch"),
	kubeobjects.Rule("", []string{"services"}, "get", "list", "watch", "patch", "update"),
	kubeobjects.Rule("", []string{"services/status"}, "patch", "update"),
	kubeobjects.Rule("", []string{"serviceaccounts"}, "create", "get", "list", "watch", "update"),
	kubeobjects.Rule("", []string{"configmaps"}, "get", "list", "watch"),
	kubeobjects.Rule("discovery.k8s.io", []string{"endpointslices"}, "get", "list", "watch"),
	kubeobjects.Rule("coordination.k8s.io", []string{"leases"}, "get", "create", "update"),
}

// nodeManagerRules are what cloud-node-manager needs to initialize its node: provider ID,
// addresses, zone and instance-type labels, and the removal of the uninitialized taint.
var nodeManagerRules = []rbacv1.PolicyRule{
	kubeobjects.Rule("", []string{"nodes"}, "get", "list", "watch", "update", "patch"),
	kubeobjects.Rule("", []string{"nodes/status"}, "patch"),
	kubeobjects.Rule("", []string{"events"}, "create", "patch", "update"),
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
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}, ObjectMeta: kubeobjects.Meta(CloudControllerManager),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: kubeobjects.ReplaceInPlace(),
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
						Resources: corev1.ResourceRequirements{Requests: kubeobjects.Resources("100m", "128Mi")},
						VolumeMounts: []corev1.VolumeMount{
							{Name: "cloud-config", MountPath: CloudConfigPath, ReadOnly: true},
							{Name: "ssl", MountPath: "/etc/ssl", ReadOnly: true},
						},
					}},
					Volumes: []corev1.Volume{
						kubeobjects.HostPath("cloud-config", CloudConfigPath, corev1.HostPathFile),
						kubeobjects.HostPath("ssl", "/etc/ssl", corev1.HostPathDirectory),
					},
				},
			},
		},
	}
}

// nodeManagerPod is cloud-node-manager's pod on one operating system: one per node, with the
// host's network, tolerating every taint (it removes the uninitialized one), reading its node's
// instance metadata (--use-instance-metadata is its default).
func nodeManagerPod(os string, c corev1.Container) corev1.PodTemplateSpec {
	labels := map[string]string{"component": CloudNodeManager, "kubernetes.io/os": os}
	c.Env = []corev1.EnvVar{kubeobjects.NodeNameEnv("NODE_NAME")}
	c.Resources = corev1.ResourceRequirements{Requests: kubeobjects.Resources("50m", "50Mi")}
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
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"}, ObjectMeta: kubeobjects.Meta(name),
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

// windowsKubeconfig is the Windows cloud-node-manager's kubeconfig: cloud-provider-azure's
// chart rewrites kube-proxy's kubeconfig for it, whose server is the control-plane endpoint,
// which for an internal API server is a name only the Linux machines resolve; this one names the
// server the Windows nodes reach (kubeobjects.HostProcessKubeconfig).
func windowsKubeconfig(c Config) (*corev1.ConfigMap, error) {
	return kubeobjects.HostProcessKubeconfig(WindowsKubeconfig, CloudNodeManager, c.WindowsServer, c.CACert)
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
	kubeobjects.HostProcess(spec)
	spec.Volumes = []corev1.Volume{kubeobjects.KubeconfigVolume("kubeconfig", WindowsKubeconfig)}
	return d
}

// Images are the components' image references by component.
func Images(v Versions) map[string]string {
	return map[string]string{
		CloudControllerManager: Registry + "/azure-cloud-controller-manager:" + v.CloudControllerManager,
		CloudNodeManager:       Registry + "/azure-cloud-node-manager:" + v.CloudNodeManager,
	}
}

// Apply applies the objects server-side (kubeobjects.Apply).
func Apply(ctx context.Context, cs kubernetes.Interface, objs []runtime.Object) error {
	return kubeobjects.Apply(ctx, cs, "the Azure cloud provider", objs)
}
