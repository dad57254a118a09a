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

	"github.com/kubewin/kubewin/internal/kubeversion"
	"github.com/kubewin/kubewin/provider/internal/azure"
	"github.com/kubewin/kubewin/provider/internal/azureccm"
)

// cloudProviderModel is an azure cluster's azure.cloud_provider.
type cloudProviderModel struct {
	Enabled             types.Bool   `tfsdk:"enabled"`
	CloudRoutes         types.Bool   `tfsdk:"cloud_routes"`
	Version             types.String `tfsdk:"version"`
	IdentityID          types.String `tfsdk:"identity_id"`
	IdentityClientID    types.String `tfsdk:"identity_client_id"`
	IdentityPrincipalID types.String `tfsdk:"identity_principal_id"`
	Images              types.Map    `tfsdk:"images"`
}

var (
	pathCloudProvider      = pathClusterAzure.AtName("cloud_provider")
	cloudProviderAttrTypes = map[string]attr.Type{
		"enabled": types.BoolType, "cloud_routes": types.BoolType, "version": types.StringType, "identity_id": types.StringType,
		"identity_client_id": types.StringType, "identity_principal_id": types.StringType, "images": types.MapType{ElemType: types.StringType},
	}
	// cloudProviderVersionRE is a cloud-provider-azure release: its minor is Kubernetes' (its
	// README's version matrix).
	cloudProviderVersionRE = regexp.MustCompile(`^v1\.(\d+)\.(\d+)$`)
)

func cloudProviderAttribute() schema.Attribute {
	return schema.SingleNestedAttribute{
		Optional: true,
		Computed: true,
		Description: "The out-of-tree Azure cloud provider ([cloud-provider-azure](https://github.com/kubernetes-sigs/cloud-provider-azure)): " +
			"cloud-controller-manager on the control planes, cloud-node-manager on every Linux node and, as a HostProcess DaemonSet, on " +
			"every Windows node, authenticating as the user-assigned identity `<name>-cloud-provider` (Network Contributor and Virtual " +
			"Machine Contributor on the resource group; no secret on disk). The control planes' and Linux agents' kubelets run with " +
			"`--cloud-provider=external`, and so do the Windows pools' that join the cluster. Nodes get their providerID, zone, region " +
			"and instance-type; `LoadBalancer` Services get rules and public IPs on the cluster's load balancer, which destroy removes " +
			"with the cluster. The provider's credentials must be allowed to assign roles " +
			"(`Microsoft.Authorization/roleAssignments/write`: Owner, User Access Administrator or Role Based Access Control " +
			"Administrator on the resource group). On by default for new clusters; a cluster made before this attribute existed keeps " +
			"it off.",
		Attributes: map[string]schema.Attribute{
			"enabled": schema.BoolAttribute{
				Optional: true,
				Computed: true,
				Description: "Run the cloud provider. Default `true` for a new cluster. It cannot be turned on or off in place: every " +
					"kubelet's `--cloud-provider` would have to change.",
			},
			"cloud_routes": schema.BoolAttribute{
				Optional: true,
				Computed: true,
				Description: "`true`: cloud-controller-manager's route controller keeps every node's pod route in the cluster's route " +
					"table, and deletes the routes in `cluster_cidr` that are not a node's: then remove `kubewin_pod_route`s and pools' " +
					"`pod_routes` of this table. `false`: kubewin writes the Linux agents' routes, `kubewin_pod_route` or a pool's " +
					"`pod_routes` the Windows nodes'. Changes in place. Default `false`.",
			},
			"version": schema.StringAttribute{
				Optional: true,
				Computed: true,
				Description: "cloud-provider-azure's release, `v1.<minor>.<patch>` with `kubernetes_version`'s minor (its version " +
					"matrix). Changes in place (the components' images are applied again). Default: kubewin's pin for the minor " +
					"(1.34 `v1.34.9`, 1.35 `v1.35.14`, 1.36 `v1.36.11`, 1.37 `v1.37.5`).",
			},
			"identity_id": schema.StringAttribute{
				Computed:    true,
				Description: "The cloud provider's user-assigned identity.",
			},
			"identity_client_id": schema.StringAttribute{
				Computed:    true,
				Description: "Its client ID, which the cloud configuration names.",
			},
			"identity_principal_id": schema.StringAttribute{
				Computed:    true,
				Description: "Its principal (object) ID, which its roles are assigned to.",
			},
			"images": schema.MapAttribute{
				Computed:    true,
				ElementType: types.StringType,
				Description: "The components' images by component: `cloud-controller-manager`, `cloud-node-manager`.",
			},
		},
	}
}

// validateCloudProvider checks the configured version against kubernetes_version.
func validateCloudProvider(ctx context.Context, v types.Object, m *clusterModel) diag.Diagnostics {
	var diags diag.Diagnostics
	if v.IsNull() || v.IsUnknown() {
		return diags
	}
	var p cloudProviderModel
	if diags.Append(v.As(ctx, &p, objectAsOptions)...); diags.HasError() || p.Version.IsNull() || p.Version.IsUnknown() {
		return diags
	}
	at := pathCloudProvider.AtName("version")
	match := cloudProviderVersionRE.FindStringSubmatch(p.Version.ValueString())
	if match == nil {
		diags.AddAttributeError(at, "Invalid Cloud Provider Version", fmt.Sprintf("azure.cloud_provider.version %q is not a cloud-provider-azure "+
			"release: write v1.<minor>.<patch>, e.g. \"v1.%d.5\", or remove it for kubewin's pin.", p.Version.ValueString(), kubeversion.NewestMinor))
		return diags
	}
	if m.KubernetesVersion.IsNull() || m.KubernetesVersion.IsUnknown() {
		return diags
	}
	k, err := kubeversion.Parse(m.KubernetesVersion.ValueString())
	if err != nil {
		return diags // kubernetes_version's own check says why
	}
	if minor, _ := strconv.Atoi(match[1]); minor != int(k.Minor()) {
		diags.AddAttributeError(at, "Cloud Provider Version of Another Minor", fmt.Sprintf("azure.cloud_provider.version %s is for Kubernetes 1.%d, "+
			"and kubernetes_version is %s: cloud-provider-azure's minor must be Kubernetes' (its version matrix). Write a v1.%d.x release, or "+
			"remove version for kubewin's pin.", p.Version.ValueString(), minor, m.KubernetesVersion.ValueString(), k.Minor()))
	}
	return diags
}

// planCloudProvider sets azure.cloud_provider in the plan: its defaults for a new cluster (on,
// without cloud routes, kubewin's pinned release), the state's identity for an existing one
// (which keeps it off when its state predates the attribute), and refuses turning it on or off.
func planCloudProvider(ctx context.Context, req resource.ModifyPlanRequest, plan *clusterModel, prior *clusterModel) diag.Diagnostics {
	var diags diag.Diagnostics
	var cfg types.Object
	if diags.Append(req.Config.GetAttribute(ctx, pathCloudProvider, &cfg)...); diags.HasError() {
		return diags
	}
	if cfg.IsUnknown() {
		return diags // known at apply: the plan keeps it unknown
	}
	var c cloudProviderModel
	if !cfg.IsNull() {
		if diags.Append(cfg.As(ctx, &c, objectAsOptions)...); diags.HasError() {
			return diags
		}
	}
	var was *cloudProviderModel // nil: a new cluster, or one whose state predates the attribute
	if prior != nil && prior.Azure != nil && !prior.Azure.CloudProvider.IsNull() && !prior.Azure.CloudProvider.IsUnknown() {
		was = &cloudProviderModel{}
		if diags.Append(prior.Azure.CloudProvider.As(ctx, was, objectAsOptions)...); diags.HasError() {
			return diags
		}
	}
	enabled := prior == nil || (was != nil && was.Enabled.ValueBool())
	if !c.Enabled.IsNull() && !c.Enabled.IsUnknown() {
		if on := c.Enabled.ValueBool(); prior != nil && on != enabled {
			diags.AddAttributeError(pathCloudProvider.AtName("enabled"), "Cloud Provider Cannot Be Turned On or Off in Place",
				fmt.Sprintf("azure.cloud_provider.enabled goes from %t to %t on existing cluster %q: every kubelet's --cloud-provider would "+
					"have to change, and its nodes be initialized again. Keep enabled = %t; for the other setting, make a new kubewin_cluster "+
					"and move the node pools to it.", enabled, on, plan.Name.ValueString(), enabled))
			return diags
		}
		enabled = c.Enabled.ValueBool()
	}
	if prior != nil && was == nil && !enabled && cfg.IsNull() {
		plan.Azure.CloudProvider = types.ObjectNull(cloudProviderAttrTypes) // the state predates the attribute
		return diags
	}
	p := cloudProviderModel{
		Enabled: types.BoolValue(enabled), CloudRoutes: types.BoolValue(c.CloudRoutes.ValueBool()), Version: c.Version,
		IdentityID: types.StringNull(), IdentityClientID: types.StringNull(), IdentityPrincipalID: types.StringNull(),
		Images: types.MapNull(types.StringType),
	}
	if c.CloudRoutes.IsUnknown() {
		p.CloudRoutes = types.BoolUnknown()
	}
	if enabled {
		if p.Version.IsNull() {
			p.Version = pinnedCloudProviderVersion(plan.KubernetesVersion)
		}
		p.IdentityID, p.IdentityClientID, p.IdentityPrincipalID = types.StringUnknown(), types.StringUnknown(), types.StringUnknown()
		if was != nil {
			p.IdentityID, p.IdentityClientID, p.IdentityPrincipalID = was.IdentityID, was.IdentityClientID, was.IdentityPrincipalID
		}
		p.Images = types.MapUnknown(types.StringType)
		if !p.Version.IsUnknown() {
			var d diag.Diagnostics
			p.Images, d = types.MapValueFrom(ctx, types.StringType, azureccm.Images(versionsOf(p.Version.ValueString())))
			diags.Append(d...)
		}
	}
	if c.Enabled.IsUnknown() {
		p.Enabled = types.BoolUnknown()
	}
	var d diag.Diagnostics
	plan.Azure.CloudProvider, d = types.ObjectValueFrom(ctx, cloudProviderAttrTypes, p)
	diags.Append(d...)
	return diags
}

// pinnedCloudProviderVersion is kubewin's pinned release for a kubernetes_version (unknown while
// it is, or when it is not a supported release, which its own check reports).
func pinnedCloudProviderVersion(kubernetesVersion types.String) types.String {
	if kubernetesVersion.IsNull() || kubernetesVersion.IsUnknown() {
		return types.StringUnknown()
	}
	k, err := kubeversion.Parse(kubernetesVersion.ValueString())
	if err != nil {
		return types.StringUnknown()
	}
	v, err := azureccm.ForMinor(int(k.Minor()))
	if err != nil {
		return types.StringUnknown()
	}
	return types.StringValue(v.CloudControllerManager)
}

func versionsOf(v string) azureccm.Versions {
	return azureccm.Versions{CloudControllerManager: v, CloudNodeManager: v}
}

// cloudProviderSpec is the backend's cloud provider of the block; nil when off. A version still
// unknown (kubernetes_version was unknown at plan) is the pin of the now known one.
func cloudProviderSpec(ctx context.Context, v types.Object, kubernetesVersion types.String) (*azure.CloudProviderSpec, diag.Diagnostics) {
	var diags diag.Diagnostics
	if v.IsNull() || v.IsUnknown() {
		return nil, diags
	}
	var p cloudProviderModel
	if diags.Append(v.As(ctx, &p, objectAsOptions)...); diags.HasError() || !p.Enabled.ValueBool() {
		return nil, diags
	}
	version := p.Version
	if version.IsNull() || version.IsUnknown() {
		version = pinnedCloudProviderVersion(kubernetesVersion)
	}
	if version.IsUnknown() {
		diags.AddAttributeError(pathCloudProvider.AtName("version"), "No Cloud Provider Version",
			fmt.Sprintf("kubewin pins no cloud-provider-azure release for kubernetes_version %s: set azure.cloud_provider.version.",
				kubernetesVersion.ValueString()))
		return nil, diags
	}
	return &azure.CloudProviderSpec{Routes: p.CloudRoutes.ValueBool(), Version: version.ValueString()}, diags
}

// setCloudProviderState records what the cluster's cloud provider runs as and with: every value
// known (empty IDs when the identity could not be read: the cluster's creation failed before).
func setCloudProviderState(ctx context.Context, a *clusterAzureModel, spec *azure.CloudProviderSpec, identityID string,
	s *azure.CloudProviderState) diag.Diagnostics {
	var diags diag.Diagnostics
	var p cloudProviderModel
	if a.CloudProvider.IsNull() || a.CloudProvider.IsUnknown() || spec == nil {
		if !a.CloudProvider.IsUnknown() {
			return diags
		}
		p = cloudProviderModel{Enabled: types.BoolValue(false), CloudRoutes: types.BoolValue(false), Version: types.StringNull(),
			IdentityID: types.StringNull(), IdentityClientID: types.StringNull(), IdentityPrincipalID: types.StringNull(),
			Images: types.MapNull(types.StringType)}
	} else {
		if diags.Append(a.CloudProvider.As(ctx, &p, objectAsOptions)...); diags.HasError() {
			return diags
		}
		p.Version = types.StringValue(spec.Version)
		p.CloudRoutes = types.BoolValue(spec.Routes)
		ids := azure.IdentityIDs{}
		if s != nil {
			ids = s.Identity
		}
		p.IdentityID, p.IdentityClientID, p.IdentityPrincipalID = types.StringValue(identityID), types.StringValue(ids.ClientID),
			types.StringValue(ids.PrincipalID)
		var d diag.Diagnostics
		p.Images, d = types.MapValueFrom(ctx, types.StringType, azureccm.Images(versionsOf(spec.Version)))
		diags.Append(d...)
	}
	var d diag.Diagnostics
	a.CloudProvider, d = types.ObjectValueFrom(ctx, cloudProviderAttrTypes, p)
	diags.Append(d...)
	return diags
}
