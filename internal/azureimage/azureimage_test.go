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

func TestManifestErrors(t *testing.T) {
	for _, tt := range []struct {
		tags map[string]string
		want string
	}{
		{map[string]string{TagKubernetesVersion: "v1.36.2"}, "has no kubewin.io/windows-build, kubewin.io/runtime tag"},
		{map[string]string{TagWindowsBuild: "14393", TagKubernetesVersion: "v1.36.2", TagRuntime: "containerd"},
			`kubewin.io/windows-build="14393" is not a Windows Server build kubewin supports`},
		{map[string]string{TagWindowsBuild: "x", TagKubernetesVersion: "v1.36.2", TagRuntime: "containerd"}, "is not a Windows Server build"},
	} {
		if _, err := Manifest("img", tt.tags); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("tags %v: error %v, want %q", tt.tags, err, tt.want)
		}
	}
}
