package provider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/kubewin/kubewin/internal/capin"
	"github.com/kubewin/kubewin/internal/controlplane"
	"github.com/kubewin/kubewin/internal/ipam"
)

var (
	_ resource.Resource                   = (*clusterResource)(nil)
	_ resource.ResourceWithConfigure      = (*clusterResource)(nil)
	_ resource.ResourceWithImportState    = (*clusterResource)(nil)
	_ resource.ResourceWithValidateConfig = (*clusterResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*clusterResource)(nil)
)

func newClusterResource() resource.Resource { return &clusterResource{} }

type clusterResource struct{ data *providerData }

type clusterModel struct {
	Name              types.String `tfsdk:"name"`
	ClusterCIDR       types.String `tfsdk:"cluster_cidr"`
	ServiceCIDR       types.String `tfsdk:"service_cidr"`
	NodeCIDRMaskSize  types.Int64  `tfsdk:"node_cidr_mask_size"`
	Running           types.Bool   `tfsdk:"running"`
	ID                types.String `tfsdk:"id"`
	Endpoint          types.String `tfsdk:"endpoint"`
	KubernetesVersion types.String `tfsdk:"kubernetes_version"`
	CACertificate     types.String `tfsdk:"ca_certificate"`
	CACertHash        types.String `tfsdk:"ca_cert_hash"`
	KubeconfigPath    types.String `tfsdk:"kubeconfig_path"`
}

var clusterNameRE = regexp.MustCompile(`^[a-z]([a-z0-9-]{0,38}[a-z0-9])?$`)

func (r *clusterResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_cluster"
}

func (r *clusterResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	resp.Schema = schema.Schema{
		Description: "A Kubernetes cluster run by the local backend: etcd, kube-apiserver, kube-controller-manager and kube-scheduler as " +
			"processes on 127.0.0.1, with the kubeadm-compatible state Windows nodes join (bootstrap token authentication, cluster-info, " +
			"CSR approval, node IPAM). The processes outlive `terraform apply`; destroying the resource stops them and removes their data. " +
			"A cluster found stopped (after a reboot) is started again, with its data, by the next apply.",
		Attributes: map[string]schema.Attribute{
			"name": schema.StringAttribute{
				Required:      true,
				PlanModifiers: replace,
				Validators:    []validator.String{stringvalidator.RegexMatches(clusterNameRE, "must be 1-40 lower-case letters, digits and '-', starting with a letter and ending with a letter or digit")},
				Description:   "Name of the cluster, unique in the local backend's state directory.",
			},
			"cluster_cidr": schema.StringAttribute{
				Optional: true, Computed: true, Default: stringdefault.StaticString("10.244.0.0/16"), PlanModifiers: replace,
				Validators:  []validator.String{cidrValidator{}},
				Description: "Pod network of the cluster, split into per-node pod CIDRs by node IPAM. Default `10.244.0.0/16`.",
			},
			"service_cidr": schema.StringAttribute{
				Optional: true, Computed: true, Default: stringdefault.StaticString("10.96.0.0/12"), PlanModifiers: replace,
				Validators:  []validator.String{cidrValidator{}},
				Description: "Service network of the cluster. Default `10.96.0.0/12`.",
			},
			"node_cidr_mask_size": schema.Int64Attribute{
				Optional: true, Computed: true, Default: int64default.StaticInt64(ipam.DefaultNodeMaskSize),
				PlanModifiers: []planmodifier.Int64{int64planmodifier.RequiresReplace()},
				Validators:    []validator.Int64{int64validator.Between(8, ipam.MaxPodCIDRBits)},
				Description:   fmt.Sprintf("Prefix length of each node's pod CIDR. Default `%d`.", ipam.DefaultNodeMaskSize),
			},
			"running": schema.BoolAttribute{
				Computed: true, Default: booldefault.StaticBool(true),
				Description: "Whether every control plane process runs. It reads `false` when the cluster was stopped (for example by a reboot); the next apply starts it again.",
			},
			"id":                 schema.StringAttribute{Computed: true, PlanModifiers: keep, Description: "The cluster's name."},
			"endpoint":           schema.StringAttribute{Computed: true, PlanModifiers: keep, Description: "URL of the API server, `https://127.0.0.1:<port>`."},
			"kubernetes_version": schema.StringAttribute{Computed: true, PlanModifiers: keep, Description: "Version of the control plane, e.g. `v1.37.1`."},
			"ca_certificate":     schema.StringAttribute{Computed: true, PlanModifiers: keep, Description: "The cluster CA certificate (PEM)."},
			"ca_cert_hash":       schema.StringAttribute{Computed: true, PlanModifiers: keep, Description: "The CA pin nodes join with: `sha256:` and the hex sha256 of the CA's SubjectPublicKeyInfo, as kubeadm prints it."},
			"kubeconfig_path": schema.StringAttribute{
				Computed: true, PlanModifiers: keep,
				Description: "Path of a cluster-admin kubeconfig on this machine (owner-only). The credential itself is never stored in the Terraform state.",
			},
		},
	}
}

func (r *clusterResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = configuredData(req.ProviderData, &resp.Diagnostics)
}

// ModifyPlan refuses a cluster of the local backend in a Terraform Cloud run.
func (r *clusterResource) ModifyPlan(_ context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if !req.Plan.Raw.IsNull() {
		resp.Diagnostics.Append(checkNotRemote(path.Root("name"))...)
	}
}

func (r *clusterResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m clusterModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || m.ClusterCIDR.IsUnknown() || m.ServiceCIDR.IsUnknown() {
		return
	}
	clusterCIDR, serviceCIDR := "10.244.0.0/16", "10.96.0.0/12"
	if !m.ClusterCIDR.IsNull() {
		clusterCIDR = m.ClusterCIDR.ValueString()
	}
	if !m.ServiceCIDR.IsNull() {
		serviceCIDR = m.ServiceCIDR.ValueString()
	}
	c, err1 := ipam.ParsePrefix(clusterCIDR)
	s, err2 := ipam.ParsePrefix(serviceCIDR)
	if err1 != nil || err2 != nil {
		return // reported by the attribute validators
	}
	for _, err := range ipam.Overlaps(ipam.Named{Name: "cluster_cidr", Prefix: c}, ipam.Named{Name: "service_cidr", Prefix: s}) {
		resp.Diagnostics.AddAttributeError(path.Root("service_cidr"), "Overlapping CIDRs", err.Error())
	}
	if !m.NodeCIDRMaskSize.IsNull() && !m.NodeCIDRMaskSize.IsUnknown() && int(m.NodeCIDRMaskSize.ValueInt64()) < c.Bits() {
		resp.Diagnostics.AddAttributeError(path.Root("node_cidr_mask_size"), "Node CIDR Larger Than Cluster CIDR",
			fmt.Sprintf("node_cidr_mask_size /%d is larger than cluster_cidr %s: use /%d or longer.", m.NodeCIDRMaskSize.ValueInt64(), c, c.Bits()))
	}
}

func (r *clusterResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m clusterModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	bin, err := r.data.local.ControlPlaneBinDir()
	if err != nil {
		resp.Diagnostics.AddError("Control Plane Programs Not Found", err.Error())
		return
	}
	dir := r.data.local.ClusterDir(m.Name.ValueString())
	if _, err := os.Stat(dir); err == nil {
		resp.Diagnostics.AddAttributeError(path.Root("name"), "Cluster Already Exists",
			fmt.Sprintf("The local backend already has a cluster named %q in %s. Import it with `terraform import`, choose another name, or remove that directory.", m.Name.ValueString(), dir))
		return
	}
	cp, err := controlplane.Start(ctx, controlplane.Config{
		Dir: dir, BinDir: bin, ClusterName: m.Name.ValueString(), Detach: true, Progress: io.Discard,
		ClusterCIDR: m.ClusterCIDR.ValueString(), ServiceCIDR: m.ServiceCIDR.ValueString(), NodeCIDRMaskSize: int(m.NodeCIDRMaskSize.ValueInt64()),
	})
	if err != nil {
		_ = os.RemoveAll(dir) // nothing half-created: Start stopped whatever it had started
		resp.Diagnostics.AddError("Cannot Start Cluster", fmt.Sprintf("Starting the control plane of cluster %q failed: %s", m.Name.ValueString(), err))
		return
	}
	resp.Diagnostics.Append(setClusterState(&m, cp)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *clusterResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m clusterModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	cp, err := controlplane.Load(r.data.local.ClusterDir(m.Name.ValueString()))
	if errors.Is(err, os.ErrNotExist) {
		resp.State.RemoveResource(ctx) // the cluster's directory is gone: so is the cluster
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Cannot Read Cluster", err.Error())
		return
	}
	resp.Diagnostics.Append(setClusterState(&m, cp)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Update only ever starts a stopped cluster again: every input forces a replacement.
func (r *clusterResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m clusterModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	cp, err := controlplane.Resume(ctx, r.data.local.ClusterDir(m.Name.ValueString()), io.Discard)
	if err != nil {
		resp.Diagnostics.AddError("Cannot Start Cluster Again", fmt.Sprintf("Cluster %q was stopped and could not be started again: %s", m.Name.ValueString(), err))
		return
	}
	resp.Diagnostics.Append(setClusterState(&m, cp)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *clusterResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m clusterModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	dir := r.data.local.ClusterDir(m.Name.ValueString())
	cp, err := controlplane.Load(dir)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Cannot Read Cluster", err.Error())
		return
	}
	if err := cp.Destroy(ctx); err != nil {
		resp.Diagnostics.AddError("Cannot Delete Cluster", fmt.Sprintf("Stopping cluster %q and removing %s failed: %s", m.Name.ValueString(), dir, err))
	}
}

func (r *clusterResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	cp, err := controlplane.Load(r.data.local.ClusterDir(req.ID))
	if err != nil {
		resp.Diagnostics.AddError("Cannot Import Cluster", fmt.Sprintf("The local backend has no cluster named %q: %s", req.ID, err))
		return
	}
	m := clusterModel{
		Name:             types.StringValue(req.ID),
		ClusterCIDR:      types.StringValue(cp.Config.ClusterCIDR),
		ServiceCIDR:      types.StringValue(cp.Config.ServiceCIDR),
		NodeCIDRMaskSize: types.Int64Value(int64(cp.Config.NodeCIDRMaskSize)),
	}
	resp.Diagnostics.Append(setClusterState(&m, cp)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func setClusterState(m *clusterModel, cp *controlplane.ControlPlane) diag.Diagnostics {
	var diags diag.Diagnostics
	ca, err := cp.CACert()
	if err != nil {
		diags.AddError("Cannot Read Cluster CA", err.Error())
		return diags
	}
	pin, err := capin.HashPEM(ca)
	if err != nil {
		diags.AddError("Cannot Read Cluster CA", err.Error())
		return diags
	}
	running := true
	for _, up := range cp.Running() {
		running = running && up
	}
	m.ID = m.Name
	m.Running = types.BoolValue(running)
	m.Endpoint = types.StringValue(cp.Endpoint())
	m.KubernetesVersion = types.StringValue(cp.Version)
	m.CACertificate = types.StringValue(string(ca))
	m.CACertHash = types.StringValue(pin)
	m.KubeconfigPath = types.StringValue(cp.AdminKubeconfig())
	return diags
}
