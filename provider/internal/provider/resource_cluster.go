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
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/kubewin/kubewin/internal/capin"
	"github.com/kubewin/kubewin/internal/controlplane"
	"github.com/kubewin/kubewin/internal/ipam"
	"github.com/kubewin/kubewin/internal/kubeversion"
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
}

// clusterLocalModel is the local backend's block, which has no settings.
type clusterLocalModel struct{}

var clusterNameRE = regexp.MustCompile(`^[a-z]([a-z0-9-]{0,38}[a-z0-9])?$`)

func (r *clusterResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_cluster"
}

// replaceIfLocal replaces a local cluster when the attribute changes; an azure cluster's change
// is refused at plan time instead (ModifyPlan).
var replaceIfLocal = stringplanmodifier.RequiresReplaceIf(func(ctx context.Context, req planmodifier.StringRequest, resp *stringplanmodifier.RequiresReplaceIfFuncResponse) {
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
			"(1 to 3 or 5, 3 to 5); a control plane or agent that was lost is made again by the next apply. The cluster CA's key never leaves the " +
			"control planes (see the azure block), and nothing secret is in the state: admin credentials come from the ephemeral " +
			"`kubewin_cluster_credentials`.",
		Blocks: map[string]schema.Block{
			"local": schema.SingleNestedBlock{
				Description:   "The cluster runs on this machine, as processes of the local backend (see the provider's `local` block).",
				PlanModifiers: []planmodifier.Object{objectplanmodifier.RequiresReplaceIf(localBlockChanged, "Moving a local cluster to another backend replaces it.", "")},
			},
			"azure": clusterAzureBlock(ctx),
		},
		Attributes: map[string]schema.Attribute{
			"name": schema.StringAttribute{
				Required:      true,
				PlanModifiers: replace,
				Validators:    []validator.String{stringvalidator.RegexMatches(clusterNameRE, "must be 1-40 lower-case letters, digits and '-', starting with a letter and ending with a letter or digit")},
				Description:   "Name of the cluster: unique in the local backend's state directory; on Azure, the prefix of its resources' names.",
			},
			"kubernetes_version": schema.StringAttribute{
				Optional: true, Computed: true, PlanModifiers: append([]planmodifier.String{stringplanmodifier.UseStateForUnknown()}, replace...),
				Description: fmt.Sprintf("Kubernetes release of the control plane, e.g. `1.37.1`: required for an azure cluster (Kubernetes 1.%d to 1.%d); "+
					"a local cluster runs the version of its programs, which this reads (setting another is an error).", kubeversion.OldestMinor, kubeversion.NewestMinor),
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
				PlanModifiers: []planmodifier.Int64{int64planmodifier.RequiresReplaceIf(func(ctx context.Context, req planmodifier.Int64Request, resp *int64planmodifier.RequiresReplaceIfFuncResponse) {
					resp.RequiresReplace = isLocalState(ctx, req.State)
				}, "Replaces a cluster of the local backend.", "")},
				Validators:  []validator.Int64{int64validator.Between(8, ipam.MaxPodCIDRBits)},
				Description: fmt.Sprintf("Prefix length of each node's pod CIDR. Default `%d`.", ipam.DefaultNodeMaskSize),
			},
			"running": schema.BoolAttribute{
				Computed: true, Default: booldefault.StaticBool(true),
				Description: "Whether the cluster runs: every control plane process of a local cluster (it reads `false` after a reboot; the next apply starts it again), " +
					"every control plane and agent of an azure cluster (the next apply makes the missing ones again).",
			},
			"id":             schema.StringAttribute{Computed: true, PlanModifiers: keep, Description: "The cluster's ID, which `kubewin_windows_node_pool.cluster_id` takes: a local cluster's name, an azure cluster's load balancer's resource ID."},
			"endpoint":       schema.StringAttribute{Computed: true, PlanModifiers: keep, Description: "URL of the API server: `https://127.0.0.1:<port>` for a local cluster, `https://<load balancer frontend address>:6443` on Azure."},
			"ca_certificate": schema.StringAttribute{Computed: true, PlanModifiers: keep, Description: "The cluster CA certificate (PEM)."},
			"ca_cert_hash":   schema.StringAttribute{Computed: true, PlanModifiers: keep, Description: "The CA pin nodes join with: `sha256:` and the hex sha256 of the CA's SubjectPublicKeyInfo, as kubeadm prints it."},
			"kubeconfig_path": schema.StringAttribute{
				Computed: true, PlanModifiers: keep,
				Description: "A local cluster's cluster-admin kubeconfig on this machine (owner-only; null on Azure). The credential itself is never stored in the Terraform state.",
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
	switch {
	case m.Local == nil && m.Azure == nil:
		resp.Diagnostics.AddAttributeError(path.Root("local"), "Missing Backend",
			"The cluster does not say where it runs, and kubewin has no default backend. Add a backend block: `azure { … }` makes an acs-engine-style "+
				"cluster in Azure (Linux control planes by kubeadm, a Linux agent pool, the network); `local {}` runs the control plane as processes on this machine.")
	case m.Local != nil && m.Azure != nil:
		resp.Diagnostics.AddAttributeError(path.Root("azure"), "Conflicting Backends", "Set one backend block, azure or local, not both.")
	case m.Azure != nil:
		resp.Diagnostics.Append(validateAzureCluster(ctx, &m)...)
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

// ModifyPlan refuses a local cluster in a Terraform Cloud run, and a local cluster of another
// version than its programs'; an azure cluster's checks are modifyAzurePlan's.
func (r *clusterResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() || r.data == nil {
		return
	}
	var m clusterModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if !req.State.Raw.IsNull() && !isLocalState(ctx, req.State) {
		resp.Diagnostics.Append(r.modifyAzurePlan(ctx, req, &m)...)
		return
	}
	if m.Local == nil {
		return
	}
	resp.Diagnostics.Append(checkNotRemote(path.Root("name"))...)
	if m.KubernetesVersion.IsNull() || m.KubernetesVersion.IsUnknown() || !req.State.Raw.IsNull() {
		return
	}
	if v, err := r.data.local.ControlPlaneVersion(); err == nil && !sameVersion(v, m.KubernetesVersion.ValueString()) {
		resp.Diagnostics.AddAttributeError(path.Root("kubernetes_version"), "Version Not Available Locally",
			fmt.Sprintf("The local backend's control plane programs are Kubernetes %s, not %s: remove kubernetes_version, or set it to %s.", v, m.KubernetesVersion.ValueString(), v))
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
	if resp.Diagnostics.HasError() {
		return
	}
	if m.Azure != nil {
		resp.Diagnostics.Append(r.createAzure(ctx, &m)...)
		// Saved even on failure: Terraform then knows what was made, and destroys it.
		if !m.ID.IsUnknown() {
			resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
		}
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
	if m.Azure != nil {
		gone, diags := r.readAzure(ctx, &m)
		resp.Diagnostics.Append(diags...)
		if gone {
			resp.State.RemoveResource(ctx)
			return
		}
		resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
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

// Update starts a stopped local cluster again (every other change of a local cluster replaces
// it), or changes an azure cluster in place.
func (r *clusterResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m, prior clusterModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &prior)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if m.Azure != nil {
		resp.Diagnostics.Append(r.updateAzure(ctx, &m, &prior)...)
		resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
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
	if m.Azure != nil {
		resp.Diagnostics.Append(r.deleteAzure(ctx, &m)...)
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
	if m.KubernetesVersion.IsNull() || m.KubernetesVersion.IsUnknown() || !sameVersion(m.KubernetesVersion.ValueString(), cp.Version) {
		m.KubernetesVersion = types.StringValue(cp.Version)
	}
	m.CACertificate = types.StringValue(string(ca))
	m.CACertHash = types.StringValue(pin)
	m.KubeconfigPath = types.StringValue(cp.AdminKubeconfig())
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
				Name: old.Name, KubernetesVersion: old.KubernetesVersion, ClusterCIDR: old.ClusterCIDR, ServiceCIDR: old.ServiceCIDR,
				NodeCIDRMaskSize: old.NodeCIDRMaskSize, Local: &clusterLocalModel{}, Running: old.Running, ID: old.ID, Endpoint: old.Endpoint,
				CACertificate: old.CACertificate, CACertHash: old.CACertHash, KubeconfigPath: old.KubeconfigPath,
			})...)
		},
	}}
}
