package join

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	kubeletapis "k8s.io/kubelet/pkg/apis"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
)

// The Node nodeboot registers carries what the kubelet would set from the image: the Hyper-V
// label on an image baked with Hyper-V isolation only (a Node that exists is not relabelled by
// the kubelet, so the first registration must have it).
func TestNodeObjectHyperVLabel(t *testing.T) {
	c := &v1alpha1.NodeConfig{Node: v1alpha1.Node{Labels: map[string]string{"example.com/team": "windows"}}}
	m := &v1alpha1.ImageManifest{WindowsBuild: v1alpha1.WindowsServer2025}
	if got := NodeObject(c, m, "win0").Labels; got[v1alpha1.LabelHyperVIsolation] != "" || got["example.com/team"] != "windows" {
		t.Errorf("process-only image: labels %v", got)
	}
	m.Isolation = []v1alpha1.Isolation{v1alpha1.IsolationProcess, v1alpha1.IsolationHyperV}
	if got := NodeObject(c, m, "win0").Labels; got[v1alpha1.LabelHyperVIsolation] != "true" || got["example.com/team"] != "windows" {
		t.Errorf("Hyper-V image: labels %v", got)
	}
	if len(c.Node.Labels) != 1 {
		t.Errorf("the NodeConfig's labels were changed: %v", c.Node.Labels)
	}
}

// The Node carries the labels the kubelet's initialNode sets, the deprecated beta OS and
// architecture labels included (kubernetes pkg/kubelet/kubelet_node_status.go): kube-controller-
// manager would otherwise add them in a Node write of its own.
func TestNodeObjectKubeletLabels(t *testing.T) {
	c := &v1alpha1.NodeConfig{}
	m := &v1alpha1.ImageManifest{WindowsBuild: v1alpha1.WindowsServer2022}
	got := NodeObject(c, m, "win0").Labels
	for k, v := range map[string]string{
		corev1.LabelHostname: "win0", corev1.LabelOSStable: "windows", corev1.LabelArchStable: "amd64",
		kubeletapis.LabelOS: "windows", kubeletapis.LabelArch: "amd64",
	} {
		if got[k] != v {
			t.Errorf("label %s = %q, want %q (the kubelet's initialNode sets it)", k, got[k], v)
		}
	}
}
