package azurecsi

import (
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kubewin/kubewin/provider/internal/azureccm"
	"github.com/kubewin/kubewin/provider/internal/kubeobjects"
)

// Images are the drivers' images by component (the drivers, the Windows drivers, the sidecars)
// for the drivers that are on.
func Images(c Config) map[string]string {
	on, _ := c.drivers()
	out := map[string]string{}
	for _, d := range on {
		out[d.short] = d.image()
		out[d.short+"-windows"] = d.windowsImage()
		out["csi-provisioner"], out["csi-resizer"] = sidecar("csi-provisioner"), sidecar("csi-resizer")
		out["livenessprobe"], out["csi-node-driver-registrar"] = sidecar("livenessprobe"), sidecar("csi-node-driver-registrar")
		if d.attach {
			out["csi-attacher"] = sidecar("csi-attacher")
		}
	}
	return out
}

func (d driver) image() string { return Registry + "/" + d.short + "-csi:" + d.version }

// windowsImage is the driver's HostProcess image: the tag's -windows-hp variant (the drivers'
// templates/csi-azure{disk,file}-node-windows-hostprocess.yaml).
func (d driver) windowsImage() string { return d.image() + "-windows-hp" }

func sidecar(name string) string { return Registry + "/" + name + ":" + sidecars[name] }

const (
	socketDir = "/csi"
	socket    = "unix://" + socketDir + "/csi.sock"
	// cloudConfig is the control planes' cloud configuration, which the controllers read
	// (AZURE_CREDENTIAL_FILE; the drivers read it from there when no Secret
	// kube-system/azure-cloud-provider exists: pkg/azureutils GetCloudProviderFromClient in the
	// Azure Disk driver, pkg/azurefile getCloudProvider in the Azure File driver).
	cloudConfig = azureccm.CloudConfigPath
)

var socketMount = corev1.VolumeMount{Name: "socket-dir", MountPath: socketDir}

// probe is a liveness probe of a health endpoint on the host's loopback.
func probe(port int, delay int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "localhost", Path: "/healthz", Port: intstr.FromInt(port)}},
		InitialDelaySeconds: delay, TimeoutSeconds: 10, PeriodSeconds: 30, FailureThreshold: 5,
	}
}

// livenessProbe is the livenessprobe sidecar serving the driver's health on port.
func livenessProbe(port int) corev1.Container {
	return corev1.Container{
		Name: "liveness-probe", Image: sidecar("livenessprobe"),
		Args:         []string{"--csi-address=/csi/csi.sock", "--probe-timeout=3s", "--http-endpoint=localhost:" + strconv.Itoa(port), "--v=2"},
		VolumeMounts: []corev1.VolumeMount{socketMount},
		Resources:    corev1.ResourceRequirements{Requests: kubeobjects.Resources("10m", "20Mi")},
	}
}

// controllerSidecar is one of the controller's sidecars, electing a leader in kube-system.
func controllerSidecar(name string, args ...string) corev1.Container {
	return corev1.Container{
		Name: name, Image: sidecar(name),
		Args: append([]string{"--csi-address=/csi/csi.sock", "--v=2", "--leader-election",
			"--leader-election-namespace=" + kubeobjects.Namespace}, args...),
		VolumeMounts:    []corev1.VolumeMount{socketMount},
		Resources:       corev1.ResourceRequirements{Requests: kubeobjects.Resources("10m", "20Mi")},
		SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
	}
}

// controller is the driver's controller: on the control planes, with the host's network, where
// it authenticates as the cloud provider's identity through the instance metadata service and
// reads the cloud configuration (upstream runs it anywhere unless controller.runOnControlPlane;
// elsewhere the identity is not found: kubernetes-sigs/azuredisk-csi-driver#3118). One replica
// per control plane, two at most (the drivers' replicas: 2); the sidecars elect a leader.
func (d driver) controller(c Config) *appsv1.Deployment {
	name := "csi-" + d.short + "-controller"
	labels := map[string]string{"app": name}
	replicas := int32(min(c.ControlPlanes, 2))
	containers := []corev1.Container{
		{
			Name: d.short, Image: d.image(),
			Args: append([]string{"--v=5", "--endpoint=$(CSI_ENDPOINT)", "--drivername=" + d.name,
				"--metrics-address=0.0.0.0:" + strconv.Itoa(d.controllerMetrics), "--user-agent-suffix=kubewin"}, d.controllerArgs...),
			Env: []corev1.EnvVar{{Name: "AZURE_CREDENTIAL_FILE", Value: cloudConfig}, {Name: "CSI_ENDPOINT", Value: socket}},
			Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: int32(d.controllerMetrics), HostPort: int32(d.controllerMetrics),
				Protocol: corev1.ProtocolTCP}},
			LivenessProbe:   probe(d.controllerHealth, 30),
			VolumeMounts:    []corev1.VolumeMount{socketMount, {Name: "cloud-config", MountPath: cloudConfig, ReadOnly: true}},
			Resources:       corev1.ResourceRequirements{Requests: kubeobjects.Resources("10m", "20Mi")},
			SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
		},
		controllerSidecar("csi-provisioner", "--timeout=1200s", "--extra-create-metadata=true", "--feature-gates=Topology=true",
			"--strict-topology=true", "--retry-interval-max=30m"),
	}
	if d.attach {
		containers = append(containers, controllerSidecar("csi-attacher", "--timeout=600s", "--worker-threads=1000"))
	}
	containers = append(containers, controllerSidecar("csi-resizer", "--handle-volume-inuse-error=false", "--timeout=240s",
		"--retry-interval-max=30m"), livenessProbe(d.controllerHealth))
	return &appsv1.Deployment{
		TypeMeta: metaType("Deployment"), ObjectMeta: kubeobjects.Meta(name),
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: labelSelector(labels),
			Strategy: kubeobjects.ReplaceInPlace(),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: objectMeta(labels),
				Spec: corev1.PodSpec{
					ServiceAccountName: d.controllerAccount(), PriorityClassName: "system-cluster-critical", HostNetwork: true,
					NodeSelector: map[string]string{"kubernetes.io/os": "linux", "node-role.kubernetes.io/control-plane": ""},
					Tolerations: []corev1.Toleration{
						{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
						{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists},
					},
					Containers: containers,
					Volumes: []corev1.Volume{
						{Name: "socket-dir", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
						kubeobjects.HostPath("cloud-config", cloudConfig, corev1.HostPathFile),
					},
				},
			},
		},
	}
}

// registrar is the node-driver-registrar sidecar, which registers the driver's socket with the
// kubelet.
func (d driver) registrar(args []string, env []corev1.EnvVar) corev1.Container {
	return corev1.Container{
		Name: "node-driver-registrar", Image: sidecar("csi-node-driver-registrar"),
		Args:      append([]string{"--csi-address=$(ADDRESS)", "--kubelet-registration-path=$(DRIVER_REG_SOCK_PATH)", "--v=2"}, args...),
		Env:       env,
		Resources: corev1.ResourceRequirements{Requests: kubeobjects.Resources("10m", "20Mi")},
	}
}

// linuxNode is the driver's node plugin on every Linux node: privileged, with the host's network
// and the kubelet's directory mounted with bidirectional propagation (the drivers'
// csi-azure{disk,file}-node.yaml); tolerating every taint, as node plugins run on every node.
func (d driver) linuxNode() *appsv1.DaemonSet {
	name := "csi-" + d.short + "-node"
	plugin := "/var/lib/kubelet/plugins/" + d.name
	bidirectional := corev1.MountPropagationBidirectional
	registrar := d.registrar([]string{"--http-endpoint=localhost:" + strconv.Itoa(d.registrarHealth)},
		[]corev1.EnvVar{{Name: "ADDRESS", Value: "/csi/csi.sock"}, {Name: "DRIVER_REG_SOCK_PATH", Value: plugin + "/csi.sock"}})
	registrar.VolumeMounts = []corev1.VolumeMount{socketMount, {Name: "registration-dir", MountPath: "/registration"}}
	registrar.LivenessProbe = probe(d.registrarHealth, 20)
	plug := corev1.Container{
		Name: d.short, Image: d.image(), Lifecycle: d.lifecycle("/" + d.short + "plugin"),
		Args: append([]string{"--v=5", "--endpoint=$(CSI_ENDPOINT)", "--nodeid=$(KUBE_NODE_NAME)", "--drivername=" + d.name,
			"--metrics-address=0.0.0.0:" + strconv.Itoa(d.nodeMetrics), "--user-agent-suffix=kubewin"}, d.nodeArgs...),
		Env:             []corev1.EnvVar{{Name: "CSI_ENDPOINT", Value: socket}, kubeobjects.NodeNameEnv("KUBE_NODE_NAME")},
		LivenessProbe:   probe(d.nodeHealth, 30),
		SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
		VolumeMounts: append([]corev1.VolumeMount{socketMount,
			{Name: "mountpoint-dir", MountPath: "/var/lib/kubelet/", MountPropagation: &bidirectional}}, d.linuxMounts...),
		Resources: corev1.ResourceRequirements{Requests: kubeobjects.Resources("10m", "20Mi")},
	}
	return d.nodeDaemonSet(name, "linux", corev1.PodSpec{
		ServiceAccountName: d.nodeAccount(), DNSPolicy: corev1.DNSDefault,
		Containers: []corev1.Container{livenessProbe(d.nodeHealth), registrar, plug},
		Volumes: append([]corev1.Volume{
			kubeobjects.HostPath("socket-dir", plugin, corev1.HostPathDirectoryOrCreate),
			kubeobjects.HostPath("mountpoint-dir", "/var/lib/kubelet/", corev1.HostPathDirectoryOrCreate),
			kubeobjects.HostPath("registration-dir", "/var/lib/kubelet/plugins_registry/", corev1.HostPathDirectoryOrCreate),
		}, d.linuxVolumes...),
	})
}

// windowsKubeconfigDir is where the Windows node plugin's pod mounts its kubeconfig.
func (d driver) windowsKubeconfigDir() string { return "/var/lib/csi-" + d.short }

// windowsNode is the driver's node plugin on every Windows node as a HostProcess pod, which needs
// no csi-proxy (--enable-windows-host-process; the drivers' default on Windows since v1.31.0):
// the registrar and the plugin on the host, its plugin directory made first
// (csi-azure{disk,file}-node-windows-hostprocess.yaml). The plugin reads the API server through
// the kubeconfig of kubeobjects.HostProcessKubeconfig (both drivers take --kubeconfig).
func (d driver) windowsNode() *appsv1.DaemonSet {
	plugin := `C:\var\lib\kubelet\plugins\` + d.name + `\`
	endpoint := corev1.EnvVar{Name: "CSI_ENDPOINT", Value: "unix://" + plugin + "csi.sock"}
	registrar := d.registrar([]string{`--plugin-registration-path=$(PLUGIN_REG_DIR)`}, []corev1.EnvVar{
		{Name: "ADDRESS", Value: endpoint.Value}, {Name: "DRIVER_REG_SOCK_PATH", Value: plugin + "csi.sock"},
		{Name: "PLUGIN_REG_DIR", Value: `C:\var\lib\kubelet\plugins_registry\`}, kubeobjects.NodeNameEnv("KUBE_NODE_NAME"),
	})
	registrar.Command = []string{"csi-node-driver-registrar.exe"}
	plug := corev1.Container{
		Name: d.short, Image: d.windowsImage(), Command: []string{d.short + "plugin.exe"}, Lifecycle: d.lifecycle(d.short + "plugin.exe"),
		Args: append([]string{"--v=5", "--endpoint=$(CSI_ENDPOINT)", "--nodeid=$(KUBE_NODE_NAME)", "--drivername=" + d.name,
			"--metrics-address=0.0.0.0:" + strconv.Itoa(d.nodeMetrics), "--user-agent-suffix=kubewin", "--enable-windows-host-process=true",
			"--kubeconfig=%CONTAINER_SANDBOX_MOUNT_POINT%" + d.windowsKubeconfigDir() + "/kubeconfig"}, d.windowsArgs...),
		// No cloud configuration (a file that does not exist, which --allow-empty-cloud-config
		// allows): a HostProcess plugin sees the host's C:\k\azure.json, the driver's default
		// path, which a pool pulling from Azure Container Registry has for its credential
		// provider alone (no subscription, group or machine type); every Windows plugin reads
		// its node from the labels instead, as the Linux ones do.
		Env: []corev1.EnvVar{endpoint, kubeobjects.NodeNameEnv("KUBE_NODE_NAME"),
			{Name: "AZURE_CREDENTIAL_FILE", Value: plugin + "no-cloud-config.json"}},
		VolumeMounts: []corev1.VolumeMount{{Name: "kubeconfig", MountPath: d.windowsKubeconfigDir(), ReadOnly: true}},
		Resources:    corev1.ResourceRequirements{Requests: kubeobjects.Resources("10m", "40Mi")},
	}
	spec := corev1.PodSpec{
		ServiceAccountName: d.nodeAccount(),
		InitContainers: []corev1.Container{{Name: "init", Image: d.windowsImage(),
			Command: []string{"powershell.exe", "-c", fmt.Sprintf("New-Item -ItemType Directory -Path %s -Force", plugin)}}},
		Containers: []corev1.Container{registrar, plug},
		Volumes:    []corev1.Volume{kubeobjects.KubeconfigVolume("kubeconfig", d.kubeconfigName())},
	}
	kubeobjects.HostProcess(&spec)
	return d.nodeDaemonSet("csi-"+d.short+"-node-win", "windows", spec)
}

// lifecycle is the node plugin's preStop hook running program, if the driver has one.
func (d driver) lifecycle(program string) *corev1.Lifecycle {
	if d.preStop == "" {
		return nil
	}
	return &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{program, d.preStop}}}}
}

// nodeDaemonSet runs spec on every node of an operating system once cloud-node-manager has
// initialized it, one node at a time on update. The plugins read a node's zone and size from
// its labels once, when the kubelet registers them (NodeGetInfo), and the kubelet keeps what
// they said in CSINode and the node's topology label: a plugin that started before the labels
// would leave the node without a zone (zonal disks made elsewhere) until it restarts. The
// DaemonSet controller creates a pod only on a node its required affinity matches, so the
// plugin starts once cloud-node-manager set both labels (it sets a zone on every node: the
// fault domain where there are no zones).
func (d driver) nodeDaemonSet(name, os string, spec corev1.PodSpec) *appsv1.DaemonSet {
	labels := map[string]string{"app": name}
	spec.HostNetwork = true
	spec.PriorityClassName = "system-node-critical"
	spec.NodeSelector = map[string]string{"kubernetes.io/os": os}
	spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpExists},
				{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpExists},
			}}}}}}
	spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	maxUnavailable := intstr.FromInt(1)
	return &appsv1.DaemonSet{
		TypeMeta: metaType("DaemonSet"), ObjectMeta: kubeobjects.Meta(name),
		Spec: appsv1.DaemonSetSpec{
			Selector: labelSelector(labels),
			Template: corev1.PodTemplateSpec{ObjectMeta: objectMeta(labels), Spec: spec},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: &maxUnavailable}},
		},
	}
}

func metaType(kind string) metav1.TypeMeta { return metav1.TypeMeta{APIVersion: "apps/v1", Kind: kind} }

func labelSelector(labels map[string]string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: labels}
}

func objectMeta(labels map[string]string) metav1.ObjectMeta { return metav1.ObjectMeta{Labels: labels} }
