package provider

import (
	"context"
	"fmt"
	"regexp"
	"strconv"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/kubewin/kubewin/provider/internal/azure"
	"github.com/kubewin/kubewin/provider/internal/azurecsi"
)

// storageModel is an azure cluster's azure.storage: the Azure CSI drivers.
type storageModel struct {
	AzureDisk        types.Bool   `tfsdk:"azure_disk"`
	AzureFile        types.Bool   `tfsdk:"azure_file"`
	AzureDiskVersion types.String `tfsdk:"azure_disk_version"`
	AzureFileVersion types.String `tfsdk:"azure_file_version"`
	Images           types.Map    `tfsdk:"images"`
}

var (
	pathStorage      = pathClusterAzure.AtName("storage")
	storageAttrTypes = map[string]attr.Type{
		"azure_disk": types.BoolType, "azure_file": types.BoolType, "azure_disk_version": types.StringType,
		"azure_file_version": types.StringType, "images": types.MapType{ElemType: types.StringType},
	}
	// csiVersionRE is a release of the drivers (their tags).
	csiVersionRE = regexp.MustCompile(`^v1\.(\d+)\.\d+$`)
)

func storageAttribute() schema.Attribute {
	return schema.SingleNestedAttribute{
		Optional: true,
		Computed: true,
		Description: "The Azure CSI drivers, with `azure.cloud_provider`: [Azure Disk](https://github.com/kubernetes-sigs/azuredisk-csi-driver) " +
			"(`disk.csi.azure.com`, StorageClass `managed-csi`: Standard SSD, LRS, bound where the pod is scheduled; the default class) and " +
			"[Azure File](https://github.com/kubernetes-sigs/azurefile-csi-driver) (`file.csi.azure.com`, StorageClass `azurefile-csi`: SMB " +
			"shares of Standard LRS storage accounts, for Linux and Windows pods). Their controllers run on the control planes as the cloud " +
			"provider's identity, which gets Storage Account Contributor on the resource group with Azure File (disks are within Virtual " +
			"Machine Contributor); their node plugins run on every Linux node and, as HostProcess DaemonSets (no csi-proxy), on every " +
			"Windows node. Both classes delete the disk or share with the claim and can be expanded. Not installed: VolumeSnapshots (no " +
			"snapshot CRDs or controller, and no snapshot permissions), and Azure File's NFS and managed-identity mounts (its node proxy " +
			"is off, as it installs packages on the host). On by default for new clusters with the cloud provider; a cluster made before " +
			"this attribute existed keeps it off, and there a driver is on only if set to `true`. Each driver can be turned on or off in " +
			"place: off removes its controller, node plugins " +
			"and class, and volumes it made can no longer be attached or mounted until it is on again. Disks attach only to machines in " +
			"the cluster's resource group. Destroying the cluster does not delete the disks the driver made for claims still bound " +
			"(delete those claims first), nor the storage accounts Azure File made.",
		Attributes: map[string]schema.Attribute{
			"azure_disk": schema.BoolAttribute{
				Optional: true, Computed: true,
				Description: "Run the Azure Disk CSI driver. Default `true`.",
			},
			"azure_file": schema.BoolAttribute{
				Optional: true, Computed: true,
				Description: "Run the Azure File CSI driver. Default `true`.",
			},
			"azure_disk_version": schema.StringAttribute{
				Optional: true, Computed: true,
				Description: "The Azure Disk driver's release, `v1.<minor>.<patch>`, v1.33 or later; it supports every Kubernetes release " +
					"kubewin does. " +
					"Changes in place. Default: kubewin's pin, `" + azurecsi.Pinned.AzureDisk + "`. Its sidecars are kubewin's pins for it.",
			},
			"azure_file_version": schema.StringAttribute{
				Optional: true, Computed: true,
				Description: "The Azure File driver's release, as `azure_disk_version`. Default: `" + azurecsi.Pinned.AzureFile + "`.",
			},
			"images": schema.MapAttribute{
				Computed: true, ElementType: types.StringType,
				Description: "The images the drivers that are on run, by component: `azuredisk`, `azuredisk-windows`, `azurefile`, " +
					"`azurefile-windows`, `csi-provisioner`, `csi-attacher`, `csi-resizer`, `livenessprobe`, `csi-node-driver-registrar`.",
			},
		},
	}
}

// validateStorage checks the configured versions.
func validateStorage(ctx context.Context, v types.Object) diag.Diagnostics {
	var diags diag.Diagnostics
	if v.IsNull() || v.IsUnknown() {
		return diags
	}
	var s storageModel
	if diags.Append(v.As(ctx, &s, objectAsOptions)...); diags.HasError() {
		return diags
	}
	for name, ver := range map[string]types.String{"azure_disk_version": s.AzureDiskVersion, "azure_file_version": s.AzureFileVersion} {
		if ver.IsNull() || ver.IsUnknown() {
			continue
		}
		pin := map[string]string{"azure_disk_version": azurecsi.Pinned.AzureDisk, "azure_file_version": azurecsi.Pinned.AzureFile}[name]
		m := csiVersionRE.FindStringSubmatch(ver.ValueString())
		if m == nil {
			diags.AddAttributeError(pathStorage.AtName(name), "Invalid CSI Driver Version", fmt.Sprintf("azure.storage.%s %q is not a "+
				"release of the driver: write v1.<minor>.<patch>, e.g. %q, or remove it for kubewin's pin.", name, ver.ValueString(), pin))
			continue
		}
		if minor, _ := strconv.Atoi(m[1]); minor < azurecsi.OldestMinor {
			diags.AddAttributeError(pathStorage.AtName(name), "CSI Driver Too Old", fmt.Sprintf("azure.storage.%s %s is older than "+
				"v1.%d.0, the oldest release whose flags and images kubewin's objects use: write a v1.%d or later release, e.g. %q, or "+
				"remove it for kubewin's pin.", name, ver.ValueString(), azurecsi.OldestMinor, azurecsi.OldestMinor, pin))
		}
	}
	return diags
}

// planStorage sets azure.storage in the plan, after azure.cloud_provider: its defaults (both
// drivers, kubewin's pins) where the configuration names none, null for a cluster whose state
// predates the attribute and does not set it, and off without the cloud provider, which a driver
// turned on then is refused for.
func planStorage(ctx context.Context, req resource.ModifyPlanRequest, plan *clusterModel, prior *clusterModel) diag.Diagnostics {
	var diags diag.Diagnostics
	var cfg types.Object
	if diags.Append(req.Config.GetAttribute(ctx, pathStorage, &cfg)...); diags.HasError() || cfg.IsUnknown() {
		return diags
	}
	var c storageModel
	if !cfg.IsNull() {
		if diags.Append(cfg.As(ctx, &c, objectAsOptions)...); diags.HasError() {
			return diags
		}
	}
	predates := prior != nil && prior.Azure != nil && prior.Azure.Storage.IsNull()
	if cfg.IsNull() && predates {
		plan.Azure.Storage = types.ObjectNull(storageAttrTypes)
		return diags
	}
	var cp cloudProviderModel
	if !plan.Azure.CloudProvider.IsNull() && !plan.Azure.CloudProvider.IsUnknown() {
		if diags.Append(plan.Azure.CloudProvider.As(ctx, &cp, objectAsOptions)...); diags.HasError() {
			return diags
		}
	}
	if plan.Azure.CloudProvider.IsUnknown() || cp.Enabled.IsUnknown() {
		plan.Azure.Storage = types.ObjectUnknown(storageAttrTypes)
		return diags
	}
	cloudProvider := cp.Enabled.ValueBool()
	on := func(v types.Bool, name string) types.Bool {
		switch {
		case v.IsUnknown():
			return v
		case v.IsNull():
			// On with the cloud provider, but on a cluster whose state predates the attribute
			// only the drivers the configuration names: another installation may run the other.
			return types.BoolValue(cloudProvider && !predates)
		case v.ValueBool() && !cloudProvider:
			diags.AddAttributeError(pathStorage.AtName(name), "CSI Driver Needs the Cloud Provider", fmt.Sprintf("azure.storage.%s is "+
				"true, and azure.cloud_provider is off: the driver's controller authenticates as the cloud provider's identity with its "+
				"configuration. Set azure.storage.%s = false, or leave azure.cloud_provider on (a new cluster's default).", name, name))
		}
		return v
	}
	version := func(v types.String, pin string) types.String {
		if v.IsNull() && cloudProvider {
			return types.StringValue(pin)
		}
		return v // null without the cloud provider: no pin to follow
	}
	s := storageModel{
		AzureDisk: on(c.AzureDisk, "azure_disk"), AzureFile: on(c.AzureFile, "azure_file"),
		AzureDiskVersion: version(c.AzureDiskVersion, azurecsi.Pinned.AzureDisk),
		AzureFileVersion: version(c.AzureFileVersion, azurecsi.Pinned.AzureFile),
		Images:           types.MapUnknown(types.StringType),
	}
	if spec := storageSpecOf(s); spec != nil {
		var d diag.Diagnostics
		s.Images, d = storageImages(ctx, spec)
		diags.Append(d...)
	}
	var d diag.Diagnostics
	plan.Azure.Storage, d = types.ObjectValueFrom(ctx, storageAttrTypes, s)
	diags.Append(d...)
	return diags
}

// storageSpecOf is the backend's storage of a model whose values are known; nil otherwise.
func storageSpecOf(s storageModel) *azure.StorageSpec {
	for _, v := range []attr.Value{s.AzureDisk, s.AzureFile} {
		if v.IsNull() || v.IsUnknown() {
			return nil
		}
	}
	for _, v := range []attr.Value{s.AzureDiskVersion, s.AzureFileVersion} {
		if v.IsUnknown() {
			return nil
		}
	}
	return &azure.StorageSpec{AzureDisk: s.AzureDisk.ValueBool(), AzureFile: s.AzureFile.ValueBool(),
		Versions: azurecsi.Versions{AzureDisk: s.AzureDiskVersion.ValueString(), AzureFile: s.AzureFileVersion.ValueString()}}
}

// storageImages are the images of the drivers of spec that are on.
func storageImages(ctx context.Context, spec *azure.StorageSpec) (types.Map, diag.Diagnostics) {
	return types.MapValueFrom(ctx, types.StringType, azurecsi.Images(azurecsi.Config{Versions: spec.Versions,
		AzureDisk: spec.AzureDisk, AzureFile: spec.AzureFile}))
}

// storageSpec is the backend's storage of the block; nil when it is null (the state predates
// it) or the cloud provider is off.
func storageSpec(ctx context.Context, v types.Object, cloudProvider *azure.CloudProviderSpec) (*azure.StorageSpec, diag.Diagnostics) {
	var diags diag.Diagnostics
	if v.IsNull() || v.IsUnknown() || cloudProvider == nil {
		return nil, diags
	}
	var s storageModel
	diags.Append(v.As(ctx, &s, objectAsOptions)...)
	return storageSpecOf(s), diags
}

// setStorageState records what the drivers run: the images of the drivers that are on (a value
// still unknown after the apply is the spec's).
func setStorageState(ctx context.Context, a *clusterAzureModel, spec *azure.StorageSpec) diag.Diagnostics {
	var diags diag.Diagnostics
	if !a.Storage.IsUnknown() && (a.Storage.IsNull() || spec == nil) {
		return diags
	}
	s := storageModel{AzureDisk: types.BoolValue(false), AzureFile: types.BoolValue(false),
		AzureDiskVersion: types.StringNull(), AzureFileVersion: types.StringNull()}
	if spec != nil {
		s.AzureDisk, s.AzureFile = types.BoolValue(spec.AzureDisk), types.BoolValue(spec.AzureFile)
		s.AzureDiskVersion, s.AzureFileVersion = types.StringValue(spec.Versions.AzureDisk), types.StringValue(spec.Versions.AzureFile)
	}
	var d diag.Diagnostics
	s.Images, d = storageImages(ctx, storageSpecOf(s))
	diags.Append(d...)
	a.Storage, d = types.ObjectValueFrom(ctx, storageAttrTypes, s)
	diags.Append(d...)
	return diags
}
