package join

import (
	"context"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/nodecmd"
	"github.com/kubewin/kubewin/internal/nodestatus"
)

// registerData is what the register phase reads.
type registerData interface {
	config() *v1alpha1.NodeConfig
	manifest() *v1alpha1.ImageManifest
	nodeName() string
	NodeClient() (kubernetes.Interface, error)
}

// NodeObject is the Node a kubewin node registers: the NodeConfig's labels and taints, the
// image's labels (nodecmd.NodeLabels), and the labels and taints a Windows kubelet sets on
// itself, as the kubelet does when it registers (kubernetes pkg/kubelet/kubelet_node_status.go
// initialNode). The kubelet finds the Node registered and then changes only its default labels
// (updateDefaultLabels): any of them missing here, the beta OS and architecture labels for one,
// costs a Node write of its own, and a workload selecting them waits for it.
func NodeObject(c *v1alpha1.NodeConfig, m *v1alpha1.ImageManifest, name string) *corev1.Node {
	labels := nodecmd.KubeletLabels(m.WindowsBuild)
	labels[corev1.LabelHostname] = name
	labels["node.kubernetes.io/kubewin"] = "true"
	maps.Copy(labels, nodecmd.NodeLabels(c, m))
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	for _, t := range c.Node.Taints {
		node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
	}
	// initialNode adds this taint when the kubelet's cloud provider is external
	// (cloudprovider.IsExternal: the name "external").
	if c.Kubelet.ExtraArgs["cloud-provider"] == "external" &&
		!slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == nodecmd.TaintExternalCloudProvider }) {
		uninitialized := corev1.Taint{Key: nodecmd.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule}
		node.Spec.Taints = append(node.Spec.Taints, uninitialized)
	}
	if c.Node.PodCIDR != "" {
		node.Spec.PodCIDR, node.Spec.PodCIDRs = c.Node.PodCIDR, []string{c.Node.PodCIDR}
	}
	return node
}

// runRegister creates the node's Node object, or adopts one of its name that is not Ready.
func runRegister(ctx context.Context, d registerData) error {
	c, err := d.NodeClient()
	if err != nil {
		return nodestatus.Errorf(nodestatus.CodeRegisterFailed, "%w", err)
	}
	name := d.nodeName()
	_, err = c.CoreV1().Nodes().Create(ctx, NodeObject(d.config(), d.manifest(), name), metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return nodestatus.Errorf(nodestatus.CodeRegisterFailed, "create Node %s: %w", name, err)
		}
		return nil
	}
	// A Node of this name exists. One that is not Ready is this machine's own, registered before
	// a restart, or a dead machine's whose name this one inherits: it is adopted. A Ready one is
	// another live machine's: joining would take its name over, so the join stops, as kubeadm's
	// does.
	existing, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nodestatus.Errorf(nodestatus.CodeRegisterFailed, "read the existing Node %s: %w", name, err)
	}
	if nodeReady(existing) {
		return nodestatus.Errorf(nodestatus.CodeNodeNameTaken,
			"a Ready Node named %s already exists in the cluster: delete it (kubectl delete node %s) or give this machine another computer name", name, name)
	}
	return nil
}

// nodeReady reports whether a Node's Ready condition is True.
func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
