package provider

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/controlplane"
	"github.com/kubewin/kubewin/internal/ipam"
	"github.com/kubewin/kubewin/internal/kubeversion"
	"github.com/kubewin/kubewin/provider/internal/cluster"
	"github.com/kubewin/kubewin/provider/internal/local"
)

var (
	_ resource.Resource                   = (*clusterResource)(nil)
	_ resource.ResourceWithConfigure      = (*clusterResource)(nil)
	_ resource.ResourceWithImportState    = (*clusterResource)(nil)
	_ resource.ResourceWithValidateConfig = (*clusterResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*clusterResource)(nil)
	_ resource.ResourceWithUpgradeState   = (*clusterResource)(nil)
)

func newClusterResource() resource.Resource { return &clusterResource{} }

type clusterResource struct{ data *providerData }

type clusterModel struct {
	Name              types.String       `tfsdk:"name"`
	KubernetesVersion types.String       `tfsdk:"kubernetes_version"`
	ClusterCIDR       types.String       `tfsdk:"cluster_cidr"`
	ServiceCIDR       types.String       `tfsdk:"service_cidr"`
	NodeCIDRMaskSize  types.Int64        `tfsdk:"node_cidr_mask_size"`
	Local             *clusterLocalModel `tfsdk:"local"`
	Azure             *clusterAzureModel `tfsdk:"azure"`
	Running           types.Bool         `tfsdk:"running"`
	ID                types.String       `tfsdk:"id"`
	Endpoint          types.String       `tfsdk:"endpoint"`
	CACertificate     types.String       `tfsdk:"ca_certificate"`
	CACertHash        types.String       `tfsdk:"ca_cert_hash"`
	KubeconfigPath    types.String       `tfsdk:"kubeconfig_path"`
	Timeouts          timeouts.Value     `tfsdk:"timeouts"`
}

// The cluster's operations' default timeouts: an azure cluster's creation boots its machines (each
// given 20 minutes) and joins its agents; an upgrade replaces its control planes and agents one
// at a time.
const (
	clusterCreateTimeout = 60 * time.Minute
	clusterUpdateTimeout = 60 * time.Minute
	clusterDeleteTimeout = 30 * time.Minute
)

// nullTimeouts is a timeouts attribute left unset.
var nullTimeouts = timeouts.Value{Object: types.ObjectNull(map[string]attr.Type{
	"create": types.StringType, "update": types.StringType, "delete": types.StringType,
})}

// clusterLocalModel is the local backend's block, which has no settings.
type clusterLocalModel struct{}

var clusterNameRE = regexp.MustCompile(`^[a-z]([a-z0-9-]{0,38}[a-z0-9])?$`)

func (r *clusterResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_cluster"
}

// replaceIfLocal replaces a local cluster when the attribute changes; an azure cluster's change
// is refused at plan time instead (ModifyPlan).
var replaceIfLocal = stringplanmodifier.RequiresReplaceIf(func(ctx context.Context, req planmodifier.StringRequest,
	resp *stringplanmodifier.RequiresReplaceIfFuncResponse) {
	resp.RequiresReplace = isLocalState(ctx, req.State)
}, "Replaces a cluster of the local backend.", "")

func isLocalState(ctx context.Context, state tfsdk.State) bool {
	var azure types.Object
	if state.Raw.IsNull() || state.GetAttribute(ctx, path.Root("azure"), &azure).HasError() {
		return false
	}
	return azure.IsNull()
}

func (r *clusterResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	replace := []planmodifier.String{replaceIfLocal}
	resp.Schema = schema.Schema{
		Version: 1,
		Description: "A Kubernetes cluster for Windows node pools, made by one of two backends, named by a block: `azure` (an acs-engine-style " +
			"cluster in Azure: virtual network, security groups, a route table for kubenet-style routing, a Standard load balancer in front of " +
			"1, 3 or 5 Ubuntu control planes bootstrapped by cloud-init with `kubeadm init` and `kubeadm join --control-plane`, and a scale set " +
			"of Linux agents for CoreDNS and other Linux-only system pods) or `local` (etcd, kube-apiserver, kube-controller-manager and " +
			"kube-scheduler as processes on 127.0.0.1, with the kubeadm-compatible state Windows nodes join, for development, demos and CI). " +
			"There is no default.\n\n" +
			"A local cluster's processes outlive `terraform apply`; destroying the resource stops them and removes their data, and a cluster " +
			"found stopped (after a reboot) is started again by the next apply. Changing its name or networks replaces it.\n\n" +
			"An azure cluster is never replaced by a change: a change that would need a new cluster (its Kubernetes version, networks, " +
			"masters' machines, ...) is an error at plan time. Its Linux pool's `node_count` changes in place, and control planes can be added " +
			"(1 to 3 or 5, 3 to 5); a control plane or agent that was lost, or whose VM Compute left `Failed` (an allocation failure, an OS " +
			"provisioning timeout), is made again by the next apply. A create that fails after the first control plane runs leaves the " +
			"cluster tainted, which Terraform replaces on the next apply; `terraform untaint` keeps it, and the next apply then makes what " +
			"is missing in place. The cluster CA's key never leaves the " +
			"control planes (see the azure block), and nothing secret is in the state: admin credentials come from the ephemeral " +
			"`kubewin_cluster_credentials`." + verifiedAzure,
		Blocks: map[string]schema.Block{
			"local": schema.SingleNestedBlock{
				Description: "The cluster runs on this machine, as processes of the local backend (see the provider's `local` block).",
				PlanModifiers: []planmodifier.Object{objectplanmodifier.RequiresReplaceIf(localBlockChanged,
					"Moving a local cluster to another backend replaces it.", "")},
			},
			"azure": clusterAzureBlock(ctx),
		},
		Attributes: map[string]schema.Attribute{
			"name": schema.StringAttribute{
				Required:      true,
				PlanModifiers: replace,
				Validators: []validator.String{stringvalidator.RegexMatches(clusterNameRE, "must be 1-40 lower-case letters, digits and '-', "+
					"starting with a letter and ending with a letter or digit")},
				Description: "Name of the cluster: unique in the local backend's state directory; on Azure, the prefix of its resources' names.",
			},
			"kubernetes_version": schema.StringAttribute{
				Optional:      true,
				Computed:      true,
				PlanModifiers: append([]planmodifier.String{stringplanmodifier.UseStateForUnknown()}, replace...),
				Description: fmt.Sprintf("Kubernetes release of the control plane, e.g. `1.37.1`: required for an azure cluster (Kubernetes 1.%d "+
					"to 1.%d); "+
					"a local cluster runs the version of its programs, which this reads (setting another is an error).", kubeversion.OldestMinor,
					kubeversion.NewestMinor),
			},
			"cluster_cidr": schema.StringAttribute{
				Optional:      true,
				Computed:      true,
				Default:       stringdefault.StaticString(v1alpha1.DefaultClusterCIDR),
				PlanModifiers: replace,
				Validators:    []validator.String{cidrValidator{}},
				Description:   "Pod network of the cluster, split into per-node pod CIDRs by node IPAM. Default `10.244.0.0/16`.",
			},
			"service_cidr": schema.StringAttribute{
				Optional:      true,
				Computed:      true,
				Default:       stringdefault.StaticString(v1alpha1.DefaultServiceCIDR),
				PlanModifiers: replace,
				Validators:    []validator.String{cidrValidator{}},
				Description:   "Service network of the cluster. Default `10.96.0.0/12`.",
			},
			"node_cidr_mask_size": schema.Int64Attribute{
				Optional: true,
				Computed: true,
				Default:  int64default.StaticInt64(ipam.DefaultNodeMaskSize),
				PlanModifiers: []planmodifier.Int64{int64planmodifier.RequiresReplaceIf(func(ctx context.Context, req planmodifier.Int64Request,
					resp *int64planmodifier.RequiresReplaceIfFuncResponse) {
					resp.RequiresReplace = isLocalState(ctx, req.State)
				}, "Replaces a cluster of the local backend.", "")},
				Validators:  []validator.Int64{int64validator.Between(8, ipam.MaxPodCIDRBits)},
				Description: fmt.Sprintf("Prefix length of each node's pod CIDR. Default `%d`.", ipam.DefaultNodeMaskSize),
			},
			"timeouts": timeoutsAttribute(ctx, "until the control planes and agents are Ready or removed", clusterCreateTimeout,
				clusterUpdateTimeout, clusterDeleteTimeout),
			"running": schema.BoolAttribute{
				Computed: true,
				Default:  booldefault.StaticBool(true),
				Description: "Whether the cluster runs: every control plane process of a local cluster (it reads `false` after a reboot; the next " +
					"apply starts it again), " +
					"every control plane and agent of an azure cluster (the next apply makes the missing ones again).",
			},
			"id": schema.StringAttribute{
				Computed:      true,
				PlanModifiers: keep,
				Description: "The cluster's ID, which `kubewin_windows_node_pool.cluster_id` takes: a local cluster's name, an azure cluster's " +
					"load balancer's resource ID.",
			},
			"endpoint": schema.StringAttribute{
				Computed:      true,
				PlanModifiers: keep,
				Description: "URL of the API server: `https://127.0.0.1:<port>` for a local cluster, `https://<load balancer frontend " +
					"address>:6443` on Azure.",
			},
			"ca_certificate": schema.StringAttribute{
				Computed:      true,
				PlanModifiers: keep,
				Description:   "The cluster CA certificate (PEM).",
			},
			"ca_cert_hash": schema.StringAttribute{
				Computed:      true,
				PlanModifiers: keep,
				Description:   "The CA pin nodes join with: `sha256:` and the hex sha256 of the CA's SubjectPublicKeyInfo, as kubeadm prints it.",
			},
			"kubeconfig_path": schema.StringAttribute{
				Computed:      true,
				PlanModifiers: keep,
				Description: "A local cluster's cluster-admin kubeconfig on this machine (owner-only; null on Azure). The credential itself is " +
					"never stored in the Terraform state.",
			},
		},
	}
}

// localBlockChanged replaces a local cluster moved to another backend; an azure cluster's move is
// refused in ModifyPlan.
func localBlockChanged(ctx context.Context, req planmodifier.ObjectRequest, resp *objectplanmodifier.RequiresReplaceIfFuncResponse) {
	resp.RequiresReplace = isLocalState(ctx, req.State) && req.PlanValue.IsNull()
}

func (r *clusterResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = configuredData(req.ProviderData, &resp.Diagnostics)
}

func (r *clusterResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m clusterModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(checkOneBackend(m.Local, m.Azure,
		"The cluster does not say where it runs, and kubewin has no default backend. Add a backend block: "+
			"`azure { … }` makes an acs-engine-style cluster in Azure (Linux control planes by kubeadm, a Linux agent pool, the network); "+
			"`local {}` runs the control plane as processes on this machine.",
		"azure or local")...)
	if b := m.backend(); b != nil {
		resp.Diagnostics.Append(b.validate(ctx, &m)...)
	}
	if !m.KubernetesVersion.IsNull() && !m.KubernetesVersion.IsUnknown() {
		v, err := kubeversion.Parse(m.KubernetesVersion.ValueString())
		if err == nil {
			err = kubeversion.CheckSupported(v)
		}
		if err != nil {
			resp.Diagnostics.AddAttributeError(path.Root("kubernetes_version"), "Unsupported Kubernetes Version", err.Error())
		}
	}
	if m.ClusterCIDR.IsUnknown() || m.ServiceCIDR.IsUnknown() {
		return
	}
	clusterCIDR, serviceCIDR := v1alpha1.DefaultClusterCIDR, v1alpha1.DefaultServiceCIDR
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

// clusterBackend is a cluster's backend block: what differs between the backends in the
// resource. The cluster itself is its cluster.Cluster.
type clusterBackend interface {
	validate(ctx context.Context, m *clusterModel) diag.Diagnostics
	modifyPlan(ctx context.Context, data *providerData, req resource.ModifyPlanRequest, m *clusterModel) diag.Diagnostics
	create(ctx context.Context, data *providerData, m *clusterModel) diag.Diagnostics
	// read reads the cluster into m; gone is true when it no longer exists.
	read(ctx context.Context, data *providerData, m *clusterModel) (gone bool, diags diag.Diagnostics)
	// update changes the cluster in place; save is false when m is not the cluster's state.
	update(ctx context.Context, data *providerData, m, prior *clusterModel) (save bool, diags diag.Diagnostics)
	delete(ctx context.Context, data *providerData, m *clusterModel) diag.Diagnostics
}

// Both blocks implement clusterBackend, checked here: oneBackend's run-time assertion would yield nil.
var (
	_ clusterBackend = (*clusterLocalModel)(nil)
	_ clusterBackend = (*clusterAzureModel)(nil)
)

// backend is the backend the cluster's block names; nil when it names none or both.
func (m *clusterModel) backend() clusterBackend { return oneBackend[clusterBackend](m.Local, m.Azure) }

// ModifyPlan runs the checks of the plan's backend; an existing azure cluster's are the azure
// block's, whatever block the plan names.
func (r *clusterResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() || r.data == nil {
		return
	}
	var m clusterModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	b := m.backend()
	if !req.State.Raw.IsNull() && !isLocalState(ctx, req.State) {
		b = &clusterAzureModel{}
	}
	if b != nil {
		resp.Diagnostics.Append(b.modifyPlan(ctx, r.data, req, &m)...)
	}
	if m.Azure != nil && !resp.Diagnostics.HasError() {
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, pathCloudProvider, m.Azure.CloudProvider)...)
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, pathStorage, m.Azure.Storage)...)
	}
}

// sameVersion compares releases with or without their leading v.
func sameVersion(a, b string) bool {
	pa, errA := kubeversion.Parse(a)
	pb, errB := kubeversion.Parse(b)
	return errA == nil && errB == nil && pa.EqualTo(pb)
}

func (r *clusterResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m clusterModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	timeout, diags := m.Timeouts.Create(ctx, clusterCreateTimeout)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp.Diagnostics.Append(m.backend().create(ctx, r.data, &m)...)
	// Saved even on failure once the cluster has an ID: Terraform then knows what was made, and
	// destroys it.
	if !m.ID.IsUnknown() {
		resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
	}
}

func (r *clusterResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m clusterModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	gone, diags := m.backend().read(ctx, r.data, &m)
	resp.Diagnostics.Append(diags...)
	if gone {
		resp.State.RemoveResource(ctx)
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Update starts a stopped local cluster again (every other change of a local cluster replaces
// it), or changes an azure cluster in place.
func (r *clusterResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m, prior clusterModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &prior)...)
	timeout, diags := m.Timeouts.Update(ctx, clusterUpdateTimeout)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	save, diags := m.backend().update(ctx, r.data, &m, &prior)
	resp.Diagnostics.Append(diags...)
	if save {
		resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
	}
}

func (r *clusterResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m clusterModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	timeout, diags := m.Timeouts.Delete(ctx, clusterDeleteTimeout)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp.Diagnostics.Append(m.backend().delete(ctx, r.data, &m)...)
}

// ImportState imports a local cluster by its name. (An azure cluster's settings are its
// configuration's: it is not imported.)
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
		Local:            &clusterLocalModel{},
		Timeouts:         nullTimeouts,
	}
	st, err := m.Local.cluster(r.data, &m).Observe(ctx)
	resp.Diagnostics.Append(setLocalState(&m, st, err, "Cannot Read Cluster", "%[2]s")...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (l *clusterLocalModel) validate(context.Context, *clusterModel) diag.Diagnostics { return nil }

// modifyPlan refuses a local cluster in a Terraform Cloud run, and a new local cluster of another
// version than its programs'.
func (l *clusterLocalModel) modifyPlan(_ context.Context, data *providerData, req resource.ModifyPlanRequest, m *clusterModel) diag.Diagnostics {
	diags := checkNotRemote(path.Root("name"))
	if m.KubernetesVersion.IsNull() || m.KubernetesVersion.IsUnknown() || !req.State.Raw.IsNull() {
		return diags
	}
	if v, err := data.local.ControlPlaneVersion(); err == nil && !sameVersion(v, m.KubernetesVersion.ValueString()) {
		diags.AddAttributeError(path.Root("kubernetes_version"), "Version Not Available Locally",
			fmt.Sprintf("The local backend's control plane programs are Kubernetes %s, not %s: remove kubernetes_version, or set it to %s.",
				v, m.KubernetesVersion.ValueString(), v))
	}
	return diags
}

// cluster is the local cluster the model describes.
func (l *clusterLocalModel) cluster(data *providerData, m *clusterModel) *local.Cluster {
	return &local.Cluster{
		Backend:          data.local,
		Name:             m.Name.ValueString(),
		ClusterCIDR:      m.ClusterCIDR.ValueString(),
		ServiceCIDR:      m.ServiceCIDR.ValueString(),
		NodeCIDRMaskSize: int(m.NodeCIDRMaskSize.ValueInt64()),
	}
}

func (l *clusterLocalModel) create(ctx context.Context, data *providerData, m *clusterModel) diag.Diagnostics {
	var diags diag.Diagnostics
	if _, err := data.local.ControlPlaneBinDir(); err != nil {
		diags.AddError("Control Plane Programs Not Found", err.Error())
		return diags
	}
	dir := data.local.ClusterDir(m.Name.ValueString())
	if _, err := os.Stat(dir); err == nil {
		diags.AddAttributeError(path.Root("name"), "Cluster Already Exists",
			fmt.Sprintf("The local backend already has a cluster named %q in %s. "+
				"Import it with `terraform import`, choose another name, or remove that directory.", m.Name.ValueString(), dir))
		return diags
	}
	st, err := l.cluster(data, m).Create(ctx)
	return setLocalState(m, st, err, "Cannot Start Cluster", "Starting the control plane of cluster %q failed: %s")
}

func (l *clusterLocalModel) read(ctx context.Context, data *providerData, m *clusterModel) (bool, diag.Diagnostics) {
	st, err := l.cluster(data, m).Observe(ctx)
	if st == nil && err == nil {
		return true, nil // the cluster's directory is gone: so is the cluster
	}
	return false, setLocalState(m, st, err, "Cannot Read Cluster", "%[2]s")
}

func (l *clusterLocalModel) update(ctx context.Context, data *providerData, m, prior *clusterModel) (bool, diag.Diagnostics) {
	st, err := l.cluster(data, m).Repair(ctx, nil)
	diags := setLocalState(m, st, err, "Cannot Start Cluster Again", "Cluster %q was stopped and could not be started again: %s")
	return st != nil, diags
}

func (l *clusterLocalModel) delete(ctx context.Context, data *providerData, m *clusterModel) diag.Diagnostics {
	var diags diag.Diagnostics
	err := l.cluster(data, m).Delete(ctx)
	var step *cluster.StepError
	switch {
	case errors.As(err, &step):
		diags.AddError("Cannot Read Cluster", step.Err.Error())
	case err != nil:
		diags.AddError("Cannot Delete Cluster", fmt.Sprintf("Stopping cluster %q and removing %s failed: %s",
			m.Name.ValueString(), data.local.ClusterDir(m.Name.ValueString()), err))
	}
	return diags
}

// setLocalState records a local cluster's state in m, or reports err: a failure to read the
// CA of a running cluster as such, any other under summary with detail (of the cluster's name
// and err).
func setLocalState(m *clusterModel, st *cluster.State, err error, summary, detail string) diag.Diagnostics {
	var diags diag.Diagnostics
	var ca *local.ReadError
	if errors.As(err, &ca) {
		diags.AddError("Cannot Read Cluster CA", err.Error())
		return diags
	}
	if err != nil {
		diags.AddError(summary, fmt.Sprintf(detail, m.Name.ValueString(), err))
		return diags
	}
	m.ID = m.Name
	m.Running = types.BoolValue(st.Running)
	m.Endpoint = types.StringValue(st.Endpoint)
	if m.KubernetesVersion.IsNull() || m.KubernetesVersion.IsUnknown() || !sameVersion(m.KubernetesVersion.ValueString(), st.Version) {
		m.KubernetesVersion = types.StringValue(st.Version)
	}
	m.CACertificate = types.StringValue(string(st.CACert))
	m.CACertHash = types.StringValue(st.CAHash)
	m.KubeconfigPath = types.StringValue(st.KubeconfigPath)
	return diags
}

// UpgradeState reads a version 0 state — before the backend blocks, when every cluster was the
// local backend's — as a local cluster.
func (r *clusterResource) UpgradeState(context.Context) map[int64]resource.StateUpgrader {
	str := func() schema.StringAttribute { return schema.StringAttribute{Computed: true} }
	return map[int64]resource.StateUpgrader{0: {
		PriorSchema: &schema.Schema{Attributes: map[string]schema.Attribute{
			"name": schema.StringAttribute{Required: true}, "cluster_cidr": str(), "service_cidr": str(),
			"node_cidr_mask_size": schema.Int64Attribute{Computed: true}, "running": schema.BoolAttribute{Computed: true},
			"id": str(), "endpoint": str(), "kubernetes_version": str(), "ca_certificate": str(), "ca_cert_hash": str(), "kubeconfig_path": str(),
		}},
		StateUpgrader: func(ctx context.Context, req resource.UpgradeStateRequest, resp *resource.UpgradeStateResponse) {
			var old struct {
				Name, ClusterCIDR, ServiceCIDR, ID, Endpoint, KubernetesVersion, CACertificate, CACertHash, KubeconfigPath types.String
				NodeCIDRMaskSize                                                                                           types.Int64
				Running                                                                                                    types.Bool
			}
			for attr, v := range map[string]any{
				"name": &old.Name, "cluster_cidr": &old.ClusterCIDR, "service_cidr": &old.ServiceCIDR, "id": &old.ID, "endpoint": &old.Endpoint,
				"kubernetes_version": &old.KubernetesVersion, "ca_certificate": &old.CACertificate, "ca_cert_hash": &old.CACertHash,
				"kubeconfig_path": &old.KubeconfigPath, "node_cidr_mask_size": &old.NodeCIDRMaskSize, "running": &old.Running,
			} {
				resp.Diagnostics.Append(req.State.GetAttribute(ctx, path.Root(attr), v)...)
			}
			if resp.Diagnostics.HasError() {
				return
			}
			resp.Diagnostics.Append(resp.State.Set(ctx, &clusterModel{
				Name:              old.Name,
				KubernetesVersion: old.KubernetesVersion,
				ClusterCIDR:       old.ClusterCIDR,
				ServiceCIDR:       old.ServiceCIDR,
				NodeCIDRMaskSize:  old.NodeCIDRMaskSize,
				Local:             &clusterLocalModel{},
				Running:           old.Running,
				ID:                old.ID,
				Endpoint:          old.Endpoint,
				CACertificate:     old.CACertificate,
				CACertHash:        old.CACertHash,
				KubeconfigPath:    old.KubeconfigPath,
				Timeouts:          nullTimeouts,
			})...)
		},
	}}
}
