package azureimage

import (
	"strings"
	"testing"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
)

func TestTagsRoundTrip(t *testing.T) {
	m := &v1alpha1.ImageManifest{WindowsBuild: v1alpha1.WindowsServer2025, KubernetesVersion: "v1.36.2",
		Runtime: v1alpha1.RuntimeInfo{Name: v1alpha1.RuntimeDocker, Version: "28.3.0"}}
	got, err := Manifest("img", Tags(m))
	if err != nil {
		t.Fatal(err)
	}
	if got.WindowsBuild != m.WindowsBuild || got.KubernetesVersion != m.KubernetesVersion || got.Runtime != m.Runtime {
		t.Errorf("round trip: %+v, want %+v", got, m)
	}
}

// An image baked with Hyper-V isolation says so in its tags, and the pool reads it back.
func TestTagsIsolation(t *testing.T) {
	m := &v1alpha1.ImageManifest{WindowsBuild: v1alpha1.WindowsServer2025, KubernetesVersion: "v1.36.2",
		Runtime:   v1alpha1.RuntimeInfo{Name: v1alpha1.RuntimeContainerd, Version: "2.1.4"},
		Isolation: []v1alpha1.Isolation{v1alpha1.IsolationProcess, v1alpha1.IsolationHyperV}}
	tags := Tags(m)
	if tags[TagIsolation] != "process,hyperv" {
		t.Errorf("tags %v", tags)
	}
	got, err := Manifest("img", tags)
	if err != nil || !got.HyperV() {
		t.Errorf("round trip: %+v, %v", got, err)
	}
	m.Isolation = nil
	if _, ok := Tags(m)[TagIsolation]; ok {
		t.Error("a process-only image has an isolation tag")
	}
}

func TestManifestErrors(t *testing.T) {
	for _, tt := range []struct {
		tags map[string]string
		want string
	}{
		{map[string]string{TagKubernetesVersion: "v1.36.2"}, "has no kubewin.io/windows-build, kubewin.io/runtime tag"},
		{map[string]string{TagWindowsBuild: "14393", TagKubernetesVersion: "v1.36.2", TagRuntime: "containerd"},
			`kubewin.io/windows-build="14393" is not a Windows Server build kubewin supports`},
		{map[string]string{TagWindowsBuild: "x", TagKubernetesVersion: "v1.36.2", TagRuntime: "containerd"}, "is not a Windows Server build"},
		{map[string]string{TagWindowsBuild: "20348", TagKubernetesVersion: "v1.36.2", TagRuntime: "docker", TagIsolation: "process,hyperv"},
			`tag kubewin.io/isolation="process,hyperv": isolation[1]: Invalid value: "hyperv": Hyper-V isolation is configured only with containerd`},
		{map[string]string{TagWindowsBuild: "20348", TagKubernetesVersion: "v1.36.2", TagRuntime: "containerd", TagIsolation: "hyper-v"},
			`isolation[0]: Unsupported value: "hyper-v"`},
	} {
		if _, err := Manifest("img", tt.tags); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("tags %v: error %v, want %q", tt.tags, err, tt.want)
		}
	}
}
