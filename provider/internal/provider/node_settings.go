package provider

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/drain"
	"github.com/kubewin/kubewin/internal/kubeversion"
	"github.com/kubewin/kubewin/internal/nodecmd"
)

// nodeSettings are what a node reads when it joins, the same for a pool's nodes and a single
// server's node.
type nodeSettings struct {
	NetworkMode      types.String
	Labels           types.Map
	Taints           []taintModel
	MaxPods          types.Int64
	KubeletExtraArgs types.Map
	Memory           memorySettings
}

// memorySettings override the kubelet's memory reservations and eviction threshold, which
// nodeboot otherwise sizes from the machine's memory as AKS does (nodecmd/reserved.go).
type memorySettings struct {
	SystemReserved types.String `tfsdk:"system_reserved_memory"`
	KubeReserved   types.String `tfsdk:"kube_reserved_memory"`
	EvictionHard   types.String `tfsdk:"eviction_hard_memory"`
}

// nodeSettingsPaths are the attributes of the node settings.
var nodeSettingsPaths = []path.Path{
	path.Root("network_mode"),
	path.Root("labels"),
	path.Root("taints"),
	path.Root("max_pods"),
	path.Root("kubelet_extra_args"),
	path.Root("system_reserved_memory"),
	path.Root("kube_reserved_memory"),
	path.Root("eviction_hard_memory"),
}

// nodeAttributes are the schema of the node settings, the bootstrap token's lifetime and the
// drain. tokens says which joins mint a token.
func nodeAttributes(tokens string) map[string]schema.Attribute {
	modes := make([]string, len(v1alpha1.NetworkModes))
	for i, m := range v1alpha1.NetworkModes {
		modes[i] = string(m)
	}
	return map[string]schema.Attribute{
		"network_mode": schema.StringAttribute{
			Optional:    true,
			Computed:    true,
			Default:     stringdefault.StaticString(string(v1alpha1.NetworkModeL2Bridge)),
			Validators:  []validator.String{stringvalidator.OneOf(modes...)},
			Description: "Pod network topology: `" + strings.Join(modes, "`, `") + "`. Default `" + string(v1alpha1.NetworkModeL2Bridge) + "`.",
		},
		"labels": schema.MapAttribute{
			Optional:    true,
			ElementType: types.StringType,
			Description: "Node labels, set at registration. Labels in the kubernetes.io and k8s.io namespaces are limited to those a kubelet may set.",
		},
		"taints": schema.ListNestedAttribute{
			Optional:    true,
			Description: "Node taints, set at registration, e.g. `os=windows:NoSchedule`.",
			NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{"key": schema.StringAttribute{
				Required:    true,
				Description: "Taint key.",
			}, "value": schema.StringAttribute{
				Optional:    true,
				Description: "Taint value.",
			}, "effect": schema.StringAttribute{
				Required:    true,
				Validators:  []validator.String{stringvalidator.OneOf(v1alpha1.TaintEffects...)},
				Description: "`NoSchedule`, `PreferNoSchedule` or `NoExecute`.",
			}}},
		},
		"max_pods": schema.Int64Attribute{
			Optional:    true,
			Computed:    true,
			Default:     int64default.StaticInt64(v1alpha1.DefaultMaxPods),
			Validators:  []validator.Int64{int64validator.Between(1, 250)},
			Description: fmt.Sprintf("The kubelet's pod limit, 1 to 250. Default `%d`.", v1alpha1.DefaultMaxPods),
		},
		"kubelet_extra_args": schema.MapAttribute{
			Optional:    true,
			ElementType: types.StringType,
			Description: "Extra kubelet flags (`name = value`, without dashes). Flags kubewin sets itself, and flags the image's Kubernetes version " +
				"removed, are rejected at plan time. In a cluster that runs the Azure cloud provider's node manager for Windows nodes " +
				"(the DaemonSet `kube-system/cloud-node-manager-windows`: kubewin's azure clusters with `azure.cloud_provider`, or the " +
				"cloud-provider-azure Helm chart), an azure pool's containerd nodes get `cloud-provider = \"external\"` unless this sets " +
				"`cloud-provider`: they register with the uninitialized taint, count as Ready once the node manager has removed it, and get " +
				"their provider ID from it. Docker nodes (the node manager is a HostProcess container, which needs containerd), the local " +
				"backend's and `kubewin_windows_node`'s do not.",
		},
		"system_reserved_memory": memoryAttribute("Memory reserved for Windows itself (the kubelet's `--system-reserved` memory). " +
			"Default `2Gi`, as AKS reserves on Windows nodes."),
		"kube_reserved_memory": memoryAttribute("Memory reserved for the kubelet, kube-proxy and the container runtime (`--kube-reserved` " +
			"memory). Default: sized from the machine's memory as AKS does, 25% of the first 4 GiB, 20% of the next 4, 10% of the next 8, " +
			"6% of the next 112 and 2% of the rest."),
		"eviction_hard_memory": memoryAttribute("The kubelet's hard eviction threshold on `memory.available`: under it the kubelet evicts " +
			"pods (`--eviction-hard`). Default `750Mi`, as AKS."),
		"token_ttl": schema.StringAttribute{
			Optional:   true,
			Computed:   true,
			Default:    stringdefault.StaticString("30m"),
			Validators: []validator.String{durationValidator{}},
			Description: "Lifetime of the bootstrap token minted for a join (" + tokens + "); it is deleted as soon as the joining nodes are " +
				"Ready. Default `30m`.",
		},
		"drain": schema.SingleNestedAttribute{
			Optional: true,
			Computed: true,
			Default: objectdefault.StaticValue(types.ObjectValueMust(drainAttrTypes, map[string]attr.Value{
				"timeout":              types.StringValue("5m"),
				"ignore_daemonsets":    types.BoolValue(true),
				"delete_emptydir_data": types.BoolValue(false),
			})),
			Description: "How a node is cordoned and drained (through the Eviction API, so PodDisruptionBudgets hold) before it is removed.",
			Attributes: map[string]schema.Attribute{"timeout": schema.StringAttribute{
				Optional:    true,
				Computed:    true,
				Default:     stringdefault.StaticString("5m"),
				Validators:  []validator.String{durationValidator{}},
				Description: "Longest a drain may take, PodDisruptionBudgets included. Default `5m`.",
			}, "ignore_daemonsets": schema.BoolAttribute{
				Optional:    true,
				Computed:    true,
				Default:     booldefault.StaticBool(true),
				Description: "Leave DaemonSet pods in place. Default `true`.",
			}, "delete_emptydir_data": schema.BoolAttribute{
				Optional:    true,
				Computed:    true,
				Default:     booldefault.StaticBool(false),
				Description: "Evict pods with emptyDir volumes, losing their data. Default `false`.",
			}},
		},
	}
}

// memoryAttribute is a memory quantity of the node settings. Windows has no cgroups to fence
// the node's own processes off from pods: a reservation only lowers the node's allocatable
// memory, which the scheduler places pods against
// (https://kubernetes.io/docs/concepts/configuration/windows-resource-management/).
func memoryAttribute(desc string) schema.StringAttribute {
	return schema.StringAttribute{
		Optional:   true,
		Validators: []validator.String{quantityValidator{}},
		Description: desc + " A quantity such as `1536Mi` or `2Gi`. Windows cannot fence the node's own processes off from pods: the " +
			"reservations lower the node's allocatable memory, which the scheduler places pods against.",
	}
}

// quantityValidator checks a memory quantity, as the NodeConfig's validation does.
type quantityValidator struct{}

func (quantityValidator) Description(context.Context) string {
	return `must be a non-negative memory quantity such as "1536Mi" or "2Gi"`
}

func (v quantityValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (quantityValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if !known(req.ConfigValue) {
		return
	}
	if q, err := k8sresource.ParseQuantity(req.ConfigValue.ValueString()); err != nil || q.Sign() < 0 {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid Memory Quantity", fmt.Sprintf("%s: %q is not a memory quantity. Set it to a "+
			"non-negative quantity such as \"1536Mi\" or \"2Gi\", or leave it unset for the default.", req.Path, req.ConfigValue.ValueString()))
	}
}

// nodeConfig is a NodeConfig with these settings for a cluster and a runtime, without a node
// name or a bootstrap token.
func (s nodeSettings) nodeConfig(ctx context.Context, runtime v1alpha1.RuntimeName, c clusterFacts) (*v1alpha1.NodeConfig, diag.Diagnostics) {
	labels, diags := stringMapOf(ctx, s.Labels)
	extra, d := stringMapOf(ctx, s.KubeletExtraArgs)
	diags.Append(d...)
	// The Windows node manager is a HostProcess container, which containerd runs and cri-dockerd
	// does not (https://kubernetes.io/docs/tasks/configure-pod-container/create-hostprocess-pod/:
	// "containerd 1.6 or higher"): a Docker node would keep the uninitialized taint.
	if _, set := extra["cloud-provider"]; c.ExternalCloudProvider && runtime == v1alpha1.RuntimeContainerd && !set {
		if extra == nil {
			extra = map[string]string{}
		}
		extra["cloud-provider"] = "external"
	}
	cfg := &v1alpha1.NodeConfig{
		APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindNodeConfig,
		Cluster: v1alpha1.Cluster{
			APIServerEndpoint: c.Endpoint, CACertHashes: []string{c.CAHash},
			KubernetesVersion: c.Version, ClusterCIDR: c.ClusterCIDR, ServiceCIDR: c.ServiceCIDR,
		},
		Node:    v1alpha1.Node{Labels: labels, Taints: taintsOf(s.Taints), MaxPods: int32(s.MaxPods.ValueInt64())},
		Network: v1alpha1.Network{Mode: v1alpha1.NetworkMode(s.NetworkMode.ValueString())},
		Runtime: v1alpha1.Runtime{Name: runtime},
		Kubelet: v1alpha1.Kubelet{ExtraArgs: extra, SystemReservedMemory: s.Memory.SystemReserved.ValueString(),
			KubeReservedMemory: s.Memory.KubeReserved.ValueString(), EvictionHardMemory: s.Memory.EvictionHard.ValueString()},
	}
	cfg.Default()
	return cfg, diags
}

// checkNodeConfig checks a NodeConfig as nodeboot will, for an image, each problem against
// the attribute it comes from (attributeOf maps a NodeConfig field path to it).
func checkNodeConfig(cfg *v1alpha1.NodeConfig, manifest *v1alpha1.ImageManifest, attributeOf func(field string) path.Path) diag.Diagnostics {
	var diags diag.Diagnostics
	for _, e := range cfg.Validate() {
		diags.AddAttributeError(attributeOf(e.Field), "Invalid Node Setting", e.Error())
	}
	// The kubelet's flags, as the image's Kubernetes version takes them.
	if _, err := nodecmd.Kubelet(nodecmd.Input{
		Config:   cfg,
		Manifest: manifest,
		NodeName: "check",
		NodeIP:   netip.MustParseAddr("192.0.2.1"),
		Paths:    nodecmd.DefaultPaths(),
	}); err != nil {
		diags.AddAttributeError(path.Root("kubelet_extra_args"), "Invalid Kubelet Arguments", err.Error())
	}
	return diags
}

// checkSkew checks that an image's Kubernetes version may join a cluster's.
func checkSkew(m *v1alpha1.ImageManifest, clusterVersion string, at path.Path) diag.Diagnostics {
	var diags diag.Diagnostics
	node, err1 := kubeversion.Parse(m.KubernetesVersion)
	cluster, err2 := kubeversion.Parse(clusterVersion)
	if err1 == nil && err2 == nil {
		if err := kubeversion.CheckSkew(node, cluster); err != nil {
			diags.AddAttributeError(at, "Image Does Not Fit the Cluster", err.Error())
		}
	}
	return diags
}

// drainOptions reads the drain attribute.
func drainOptions(ctx context.Context, v types.Object) (drain.Options, diag.Diagnostics) {
	var dm drainModel
	diags := v.As(ctx, &dm, objectAsOptions)
	timeout, _ := time.ParseDuration(dm.Timeout.ValueString())
	return drain.Options{
		Timeout:            timeout,
		IgnoreDaemonSets:   dm.IgnoreDaemonSets.ValueBool(),
		DeleteEmptyDirData: dm.DeleteEmptyDirData.ValueBool(),
	}, diags
}

// optionalString is an optional attribute's value: null when empty.
func optionalString(s string) types.String {
	if s == "" {
		return types.StringNull()
	}
	return types.StringValue(s)
}
