package join

import (
	"testing"

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
