package provider

import (
	"context"
	"fmt"
	"sort"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/function"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/kubewin/kubewin/provider/internal/acsmodel"
)

var _ function.Function = (*acsAPIModelFunction)(nil)

func newACSAPIModelFunction() function.Function { return &acsAPIModelFunction{} }

// acsAPIModelFunction is provider::kubewin::acs_apimodel.
type acsAPIModelFunction struct{}

var (
	listOfStrings = types.ListType{ElemType: types.StringType}
	mapOfStrings  = types.MapType{ElemType: types.StringType}
	machineTypes  = func(count string) map[string]attr.Type {
		return map[string]attr.Type{
			count:             types.Int64Type,
			"vm_size":         types.StringType,
			"image_id":        types.StringType,
			"zones":           listOfStrings,
			"os_disk_size_gb": types.Int64Type,
		}
	}
	acsClusterAzureTypes = map[string]attr.Type{
		"dns_prefix": types.StringType, "api_server_access": types.StringType, "api_server_authorized_ip_ranges": listOfStrings,
		"vnet_cidr": types.StringType, "master_subnet_id": types.StringType, "agent_subnet_id": types.StringType,
		"admin_username": types.StringType, "ssh_public_keys": listOfStrings, "tags": mapOfStrings,
		"masters": types.ObjectType{AttrTypes: machineTypes("count")}, "linux_pool": types.ObjectType{AttrTypes: machineTypes("node_count")},
	}
	acsClusterTypes = map[string]attr.Type{
		"name": types.StringType, "kubernetes_version": types.StringType, "orchestrator_version": types.StringType, "location": types.StringType,
		"cluster_cidr": types.StringType, "service_cidr": types.StringType, "azure": types.ObjectType{AttrTypes: acsClusterAzureTypes},
	}
	acsPoolAzureTypes = map[string]attr.Type{
		"vm_size": types.StringType, "image_id": types.StringType, "subnet_id": types.StringType, "zones": listOfStrings,
		"os_disk_size_gb": types.Int64Type, "os_disk_caching": types.StringType, "admin_username": types.StringType, "priority": types.StringType,
		"max_bid_price": types.Float64Type, "accelerated_networking_enabled": types.BoolType, "tags": mapOfStrings,
	}
	acsPoolTypes = map[string]attr.Type{
		"name": types.StringType, "node_name_prefix": types.StringType, "node_count": types.Int64Type, "max_pods": types.Int64Type,
		"labels": mapOfStrings, "kubelet_extra_args": mapOfStrings, "azure": types.ObjectType{AttrTypes: acsPoolAzureTypes},
	}
	acsImageTypes = map[string]attr.Type{
		"publisher": types.StringType, "offer": types.StringType, "sku": types.StringType, "version": types.StringType,
		"source_vhd_url": types.StringType, "runtime": types.StringType, "docker_version": types.StringType, "pause_image": types.StringType,
		"hyperv_isolation": types.BoolType,
	}
	acsResultTypes = map[string]attr.Type{
		"cluster": types.ObjectType{AttrTypes: acsClusterTypes}, "windows_pools": types.ListType{ElemType: types.ObjectType{AttrTypes: acsPoolTypes}},
		"windows_image": types.ObjectType{AttrTypes: acsImageTypes}, "warnings": listOfStrings,
	}
)

func (f *acsAPIModelFunction) Metadata(_ context.Context, _ function.MetadataRequest, resp *function.MetadataResponse) {
	resp.Name = "acs_apimodel"
}

func (f *acsAPIModelFunction) Definition(_ context.Context, _ function.DefinitionRequest, resp *function.DefinitionResponse) {
	resp.Definition = function.Definition{
		Summary: "Reads an acs-engine or aks-engine api model into kubewin settings",
		MarkdownDescription: "Reads an acs-engine or aks-engine api model (`apiVersion` `vlabs`, e.g. `file(\"windows.json\")`) into the settings of a " +
			"`kubewin_cluster` with an `azure` block (`cluster`), of its `kubewin_windows_node_pool`s (`windows_pools`, one per agent pool of " +
			"`osType` Windows), and of the Windows image those pools need, for its Packer build (`windows_image`).\n\n" +
			"Every field of the model is mapped, ignored with a warning that names it (in `warnings`: surface them with a `check` block, as " +
			"`examples/acs-engine` does), or rejected with an error that names it when ignoring it would change the cluster's behaviour " +
			"(Azure CNI or a network policy, data disks, control plane flags, a PKI of its own, ...). aks-engine's Hyper-V isolation " +
			"(`windowsProfile.windowsRuntimes`) maps onto `windows_image.hyperv_isolation`: bake the image with the `kubewin-release` " +
			"data source's `hyperv_isolation`, and pods select RuntimeClass `windows-hyperv`. Secrets — " +
			"`windowsProfile.adminPassword`, `servicePrincipalProfile.secret`, `certificateProfile`'s private keys, `etcdEncryptionKey` — are " +
			"dropped with a warning that names each field, never its value: Terraform stores a function's result, not its arguments, and the " +
			"result holds no secret, so a model read with `file()` converts as published and its password reaches neither plan nor state. " +
			"Give the Windows password with the pools' write-only `azure.admin_password_wo` (a kubewin cluster needs no service principal). Values the " +
			"model leaves out are null, so that kubewin's " +
			"defaults apply; a Kubernetes version kubewin does not support (acs-engine's were 1.6 to 1.15) is null with a warning: set " +
			"`kubernetes_version` yourself.",
		Parameters: []function.Parameter{function.StringParameter{
			Name:                "api_model",
			MarkdownDescription: "The api model's JSON.",
		}},
		Return: function.ObjectReturn{AttributeTypes: acsResultTypes},
	}
}

func (f *acsAPIModelFunction) Run(ctx context.Context, req function.RunRequest, resp *function.RunResponse) {
	var model string
	resp.Error = function.ConcatFuncErrors(resp.Error, req.Arguments.Get(ctx, &model))
	if resp.Error != nil {
		return
	}
	res, err := acsmodel.Convert([]byte(model))
	if err != nil {
		resp.Error = function.NewArgumentFuncError(0, err.Error())
		return
	}
	v, err := acsResultValue(res)
	if err != nil {
		resp.Error = function.NewFuncError(err.Error())
		return
	}
	resp.Error = function.ConcatFuncErrors(resp.Error, resp.Result.Set(ctx, v))
}

// Unset values of the model are null, so that kubewin's defaults apply.
func acsStr(s string) types.String {
	if s == "" {
		return types.StringNull()
	}
	return types.StringValue(s)
}

func acsNum(n int) types.Int64 {
	if n == 0 {
		return types.Int64Null()
	}
	return types.Int64Value(int64(n))
}

func acsList(s []string) types.List {
	if len(s) == 0 {
		return types.ListNull(types.StringType)
	}
	return types.ListValueMust(types.StringType, stringValues(s))
}

func acsMap(m map[string]string) types.Map {
	if len(m) == 0 {
		return types.MapNull(types.StringType)
	}
	return stringMap(m)
}

func machinesValue(m *acsmodel.Machines, count string) types.Object {
	t := machineTypes(count)
	if m == nil {
		return types.ObjectNull(t)
	}
	return types.ObjectValueMust(t, map[string]attr.Value{
		count:             acsNum(m.Count),
		"vm_size":         acsStr(m.VMSize),
		"image_id":        acsStr(m.ImageID),
		"zones":           acsList(m.Zones),
		"os_disk_size_gb": acsNum(m.OSDiskSizeGB),
	})
}

func acsResultValue(r *acsmodel.Result) (types.Object, error) {
	c := r.Cluster
	azure := types.ObjectValueMust(acsClusterAzureTypes, map[string]attr.Value{
		"dns_prefix":                      acsStr(c.DNSPrefix),
		"api_server_access":               acsStr(c.APIServerAccess),
		"api_server_authorized_ip_ranges": acsList(c.APIServerAuthorizedIPRanges),
		"vnet_cidr":                       acsStr(c.VNetCIDR),
		"master_subnet_id":                acsStr(c.ControlPlaneSubnetID),
		"agent_subnet_id":                 acsStr(c.AgentSubnetID),
		"admin_username":                  acsStr(c.AdminUsername),
		"ssh_public_keys":                 acsList(c.SSHPublicKeys),
		"tags":                            acsMap(c.Tags),
		"masters":                         machinesValue(&c.ControlPlanes, "count"),
		"linux_pool":                      machinesValue(c.LinuxPool, "node_count"),
	})
	cluster := types.ObjectValueMust(acsClusterTypes, map[string]attr.Value{
		"name":                 acsStr(c.Name),
		"kubernetes_version":   acsStr(c.KubernetesVersion),
		"orchestrator_version": acsStr(c.OrchestratorVersion),
		"location":             acsStr(c.Location),
		"cluster_cidr":         acsStr(c.ClusterCIDR),
		"service_cidr":         acsStr(c.ServiceCIDR),
		"azure":                azure,
	})
	var pools []attr.Value
	for _, p := range r.WindowsPools {
		price := types.Float64Null()
		if p.MaxBidPrice != nil {
			price = types.Float64Value(*p.MaxBidPrice)
		}
		pa := types.ObjectValueMust(acsPoolAzureTypes, map[string]attr.Value{
			"vm_size":                        acsStr(p.VMSize),
			"image_id":                       acsStr(p.ImageID),
			"subnet_id":                      acsStr(p.SubnetID),
			"zones":                          acsList(p.Zones),
			"os_disk_size_gb":                acsNum(p.OSDiskSizeGB),
			"os_disk_caching":                acsStr(p.OSDiskCaching),
			"admin_username":                 acsStr(p.AdminUsername),
			"priority":                       acsStr(p.Priority),
			"max_bid_price":                  price,
			"accelerated_networking_enabled": types.BoolValue(p.AcceleratedNetwork),
			"tags":                           acsMap(p.Tags),
		})
		pools = append(pools, types.ObjectValueMust(acsPoolTypes, map[string]attr.Value{
			"name":               acsStr(p.Name),
			"node_name_prefix":   acsStr(p.NodeNamePrefix),
			"node_count":         types.Int64Value(int64(p.NodeCount)),
			"max_pods":           acsNum(p.MaxPods),
			"labels":             acsMap(p.Labels),
			"kubelet_extra_args": acsMap(p.KubeletExtraArgs),
			"azure":              pa,
		}))
	}
	i := r.WindowsImage
	image := types.ObjectValueMust(acsImageTypes, map[string]attr.Value{
		"publisher":        acsStr(i.Publisher),
		"offer":            acsStr(i.Offer),
		"sku":              acsStr(i.SKU),
		"version":          acsStr(i.Version),
		"source_vhd_url":   acsStr(i.SourceVHDURL),
		"runtime":          acsStr(i.Runtime),
		"docker_version":   acsStr(i.DockerVersion),
		"pause_image":      acsStr(i.PauseImage),
		"hyperv_isolation": types.BoolValue(i.HyperVIsolation),
	})
	warnings := append([]string(nil), r.Warnings...)
	sort.Strings(warnings)
	wl := types.ListValueMust(types.StringType, stringValues(warnings))
	if len(warnings) == 0 {
		wl = types.ListValueMust(types.StringType, nil)
	}
	out, diags := types.ObjectValue(acsResultTypes, map[string]attr.Value{
		"cluster":       cluster,
		"windows_pools": types.ListValueMust(types.ObjectType{AttrTypes: acsPoolTypes}, pools),
		"windows_image": image,
		"warnings":      wl,
	})
	if diags.HasError() {
		return out, fmt.Errorf("build the result: %v", diags)
	}
	return out, nil
}
