package nodecmd

import (
	"fmt"
	"slices"
	"strings"
)

// TaintExternalCloudProvider is the taint a kubelet run with --cloud-provider=external registers
// its Node with, and that a cloud-controller-manager's node controller removes once it has
// initialised the Node; it initialises only Nodes that carry it (k8s.io/cloud-provider
// api/well_known_taints.go, controllers/node/node_controller.go).
const TaintExternalCloudProvider = "node.cloudprovider.kubernetes.io/uninitialized"

// removedFlag is a kubelet flag that a Kubernetes minor dropped: a kubelet given it refuses to start.
type removedFlag struct {
	name      string
	removedIn int // first minor without the flag
	instead   string
}

// removedKubeletFlags lists the flags Windows setups used to pass and that upstream removed.
var removedKubeletFlags = []removedFlag{
	{"network-plugin", 24, "the runtime's CNI configuration (dockershim was removed)"},
	{"cni-bin-dir", 24, "the runtime's CNI configuration (dockershim was removed)"},
	{"cni-conf-dir", 24, "the runtime's CNI configuration (dockershim was removed)"},
	{"cni-cache-dir", 24, "the runtime's CNI configuration (dockershim was removed)"},
	{"network-plugin-mtu", 24, "the runtime's CNI configuration (dockershim was removed)"},
	{"docker-endpoint", 24, "runtime.name docker, which runs cri-dockerd"},
	{"image-pull-progress-deadline", 24, "the runtime's own pull settings"},
	{"experimental-dockershim-root-directory", 24, "runtime.name docker, which runs cri-dockerd"},
	{"log-dir", 26, "the service's log file, which nodeboot sets up"},
	{"log-file", 26, "the service's log file, which nodeboot sets up"},
	{"log-file-max-size", 26, "the service's log rotation, which nodeboot sets up"},
	{"logtostderr", 26, "nothing: the kubelet always logs to stderr"},
	{"alsologtostderr", 26, "nothing: the kubelet always logs to stderr"},
	{"one-output", 26, "nothing"},
	{"skip-headers", 26, "nothing"},
	{"skip-log-headers", 26, "nothing"},
	{"stderrthreshold", 26, "nothing"},
	{"container-runtime", 27, "nothing: every runtime is a remote CRI runtime"},
	{"pod-infra-container-image", 34, "the image's pause image, which the runtime's sandbox configuration pins"},
	{"cloud-config", 34, "an external cloud controller manager"},
}

// managedKubeletFlags are set by kubewin from NodeConfig fields; extra args may not override them.
var managedKubeletFlags = map[string]string{
	"config":                            "kubewin renders the kubelet configuration file itself",
	"kubeconfig":                        "nodeboot writes the kubelet kubeconfig after the TLS bootstrap",
	"bootstrap-kubeconfig":              "nodeboot performs the TLS bootstrap itself",
	"cert-dir":                          "nodeboot manages the kubelet certificates",
	"hostname-override":                 "set node.name instead",
	"node-ip":                           "set node.ip instead",
	"node-labels":                       "set node.labels instead",
	"register-with-taints":              "set node.taints instead",
	"windows-service":                   "kubewin runs the kubelet as a Windows service",
	"container-runtime-endpoint":        "set runtime.endpoint instead",
	"max-pods":                          "set node.maxPods instead",
	"image-credential-provider-config":  "set kubelet.azureContainerRegistry instead",
	"image-credential-provider-bin-dir": "set kubelet.azureContainerRegistry instead",
}

// checkExtraArgs returns an error for every extra arg that kubewin manages or that the kubelet
// minor no longer knows.
func checkExtraArgs(minor int, extra map[string]string) error {
	var problems []string
	for _, name := range sortedKeys(extra) {
		if why, ok := managedKubeletFlags[name]; ok {
			problems = append(problems, fmt.Sprintf("kubelet.extraArgs[%s]: kubewin sets --%s itself: %s", name, name, why))
			continue
		}
		i := slices.IndexFunc(removedKubeletFlags, func(f removedFlag) bool { return f.name == name })
		if i >= 0 && minor >= removedKubeletFlags[i].removedIn {
			f := removedKubeletFlags[i]
			problems = append(problems, fmt.Sprintf("kubelet.extraArgs[%s]: --%s was removed in Kubernetes 1.%d and the kubelet 1.%d would not start: remove "+
				"it and use %s", name, name, f.removedIn, minor, f.instead))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return nil
}

// checkNotRemoved guards the renderer itself: it fails if args hold a flag the minor removed.
func checkNotRemoved(minor int, args []string) error {
	for _, a := range args {
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		for _, f := range removedKubeletFlags {
			if f.name == name && minor >= f.removedIn {
				return fmt.Errorf("internal error: rendered --%s for Kubernetes 1.%d, which removed it in 1.%d", name, minor, f.removedIn)
			}
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
