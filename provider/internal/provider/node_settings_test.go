package provider

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/nodecmd"
)

// The memory attributes reach the NodeConfig, and from it the kubelet's flags; unset, nodeboot
// sizes them from the machine. A pool keeps them for import.
func TestMemoryReservations(t *testing.T) {
	ctx := context.Background()
	mem := memorySettings{SystemReserved: types.StringValue("3Gi"), KubeReserved: types.StringValue("1536Mi"), EvictionHard: types.StringValue("1Gi")}
	s := nodeSettings{NetworkMode: types.StringValue("l2bridge"), MaxPods: types.Int64Value(30), Labels: types.MapNull(types.StringType),
		KubeletExtraArgs: types.MapNull(types.StringType), Memory: mem}
	cfg, diags := s.nodeConfig(ctx, v1alpha1.RuntimeContainerd, clusterFacts{Endpoint: "10.0.0.1:6443", CAHash: "sha256:" + strings.Repeat("a", 64),
		Version: "v1.34.1", ClusterCIDR: "10.244.0.0/16", ServiceCIDR: "10.96.0.0/12"})
	if diags.HasError() {
		t.Fatal(diags)
	}
	if k := cfg.Kubelet; k.SystemReservedMemory != "3Gi" || k.KubeReservedMemory != "1536Mi" || k.EvictionHardMemory != "1Gi" {
		t.Errorf("NodeConfig kubelet %+v", k)
	}
	cfg.Cluster.BootstrapToken = placeholderToken
	manifest := &v1alpha1.ImageManifest{KubernetesVersion: "v1.34.1", Runtime: v1alpha1.RuntimeInfo{Name: v1alpha1.RuntimeContainerd}}
	paths := nodecmd.DefaultPaths()
	kubelet, err := nodecmd.Kubelet(nodecmd.Input{Config: cfg, Manifest: manifest, NodeName: "win", NodeIP: netip.MustParseAddr("10.240.0.4"),
		Memory: 16 << 30, Paths: paths})
	if err != nil {
		t.Fatal(err)
	}
	got := string(kubelet.Files[paths.KubeletConfig])
	if !strings.Contains(got, "memory: 3Gi") || !strings.Contains(got, "memory: 1536Mi") || !strings.Contains(got, "memory.available: 1Gi") {
		t.Errorf("kubelet configuration:\n%s", got)
	}

	m := nodePoolModel{memorySettings: mem, Labels: types.MapNull(types.StringType), KubeletExtraArgs: types.MapNull(types.StringType),
		Local: &localPoolModel{Image: types.StringValue("/images/win")}}
	saved, _ := settingsOf(ctx, &m)
	if back := saved.model().memorySettings; back != mem {
		t.Errorf("imported %+v, want %+v", back, mem)
	}
	if back := (poolSettings{}).model().memorySettings; !back.SystemReserved.IsNull() || !back.KubeReserved.IsNull() || !back.EvictionHard.IsNull() {
		t.Errorf("unset reservations import as %+v, want null", back)
	}
}

// A memory attribute that is not a quantity is refused at plan time, naming the attribute, the
// value and the fix.
func TestMemoryQuantityValidator(t *testing.T) {
	for value, ok := range map[string]bool{"2Gi": true, "1536Mi": true, "0": true, "2 GB": false, "-1Gi": false, "lots": false} {
		resp := &validator.StringResponse{}
		quantityValidator{}.ValidateString(context.Background(), validator.StringRequest{Path: path.Root("system_reserved_memory"),
			ConfigValue: types.StringValue(value)}, resp)
		if resp.Diagnostics.HasError() == ok {
			t.Errorf("%q: %v", value, resp.Diagnostics)
		}
		if !ok && !strings.Contains(resp.Diagnostics[0].Detail(), `system_reserved_memory: "`+value+`" is not a memory quantity. Set it to`) {
			t.Errorf("%q: %s", value, resp.Diagnostics[0].Detail())
		}
	}
}

// In a cluster running the Azure cloud provider's Windows node manager, a containerd node's
// kubelet runs with --cloud-provider=external; a Docker node's does not (the node manager is a
// HostProcess container, which only containerd runs), and kubelet_extra_args decides over both.
func TestExternalCloudProviderFlag(t *testing.T) {
	ctx := context.Background()
	facts := clusterFacts{Endpoint: "10.0.0.1:6443", CAHash: "sha256:" + strings.Repeat("a", 64), Version: "v1.34.1",
		ClusterCIDR: "10.244.0.0/16", ServiceCIDR: "10.96.0.0/12", ExternalCloudProvider: true}
	for _, tc := range []struct {
		name    string
		runtime v1alpha1.RuntimeName
		extra   types.Map
		want    string
	}{
		{"containerd", v1alpha1.RuntimeContainerd, types.MapNull(types.StringType), "external"},
		{"docker", v1alpha1.RuntimeDocker, types.MapNull(types.StringType), ""},
		{"set by the user", v1alpha1.RuntimeContainerd, types.MapValueMust(types.StringType,
			map[string]attr.Value{"cloud-provider": types.StringValue("")}), ""},
	} {
		s := nodeSettings{NetworkMode: types.StringValue("l2bridge"), MaxPods: types.Int64Value(30), Labels: types.MapNull(types.StringType),
			KubeletExtraArgs: tc.extra}
		cfg, diags := s.nodeConfig(ctx, tc.runtime, facts)
		if diags.HasError() {
			t.Fatal(diags)
		}
		if got := cfg.Kubelet.ExtraArgs["cloud-provider"]; got != tc.want {
			t.Errorf("%s: cloud-provider %q, want %q", tc.name, got, tc.want)
		}
	}
}
