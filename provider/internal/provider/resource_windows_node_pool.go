package provider

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubewin/kubewin/internal/api"
	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/ipam"
	"github.com/kubewin/kubewin/internal/nodeaccess"
	"github.com/kubewin/kubewin/internal/sim/simmachine"
	"github.com/kubewin/kubewin/internal/winname"
	"github.com/kubewin/kubewin/provider/internal/azure"
	"github.com/kubewin/kubewin/provider/internal/pool"
)

var (
	_ resource.Resource                   = (*nodePoolResource)(nil)
	_ resource.ResourceWithConfigure      = (*nodePoolResource)(nil)
	_ resource.ResourceWithValidateConfig = (*nodePoolResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*nodePoolResource)(nil)
	_ resource.ResourceWithImportState    = (*nodePoolResource)(nil)
)

func newNodePoolResource() resource.Resource { return &nodePoolResource{} }

type nodePoolResource struct{ data *providerData }

type nodePoolModel struct {
	Name             types.String     `tfsdk:"name"`
	ClusterID        types.String     `tfsdk:"cluster_id"`
	Local            *localPoolModel  `tfsdk:"local"`
	Azure            *azurePoolModel  `tfsdk:"azure"`
	PodRoutes        *poolRoutesModel `tfsdk:"pod_routes"`
	NodeCount        types.Int64      `tfsdk:"node_count"`
	NodeNamePrefix   types.String     `tfsdk:"node_name_prefix"`
	NetworkMode      types.String     `tfsdk:"network_mode"`
	Labels           types.Map        `tfsdk:"labels"`
	Taints           []taintModel     `tfsdk:"taints"`
	MaxPods          types.Int64      `tfsdk:"max_pods"`
	KubeletExtraArgs types.Map        `tfsdk:"kubelet_extra_args"`
	memorySettings
	MaxSurge    types.Int64    `tfsdk:"max_surge"`
	TokenTTL    types.String   `tfsdk:"token_ttl"`
	Drain       types.Object   `tfsdk:"drain"`
	HealthCheck types.Object   `tfsdk:"health_check"`
	Timeouts    timeouts.Value `tfsdk:"timeouts"`
	ID          types.String   `tfsdk:"id"`
	Nodes       types.List     `tfsdk:"nodes"`
}

type taintModel struct {
	Key    types.String `tfsdk:"key"`
	Value  types.String `tfsdk:"value"`
	Effect types.String `tfsdk:"effect"`
}

type drainModel struct {
	Timeout            types.String `tfsdk:"timeout"`
	IgnoreDaemonSets   types.Bool   `tfsdk:"ignore_daemonsets"`
	DeleteEmptyDirData types.Bool   `tfsdk:"delete_emptydir_data"`
}

// defaultNotReadyTimeout is health_check.not_ready_timeout's default, pool.DefaultNotReadyTimeout.
const defaultNotReadyTimeout = "10m"

type healthCheckModel struct {
	NotReadyTimeout types.String `tfsdk:"not_ready_timeout"`
	MaxReplacements types.Int64  `tfsdk:"max_replacements"`
	JoinRetries     types.Int64  `tfsdk:"join_retries"`
}

// defaultJoinRetries is health_check.join_retries's default.
const defaultJoinRetries = 2

var (
	healthCheckAttrTypes = map[string]attr.Type{
		"not_ready_timeout": types.StringType,
		"max_replacements":  types.Int64Type,
		"join_retries":      types.Int64Type,
	}
	drainAttrTypes = map[string]attr.Type{"timeout": types.StringType, "ignore_daemonsets": types.BoolType, "delete_emptydir_data": types.BoolType}
	nodeAttrTypes  = map[string]attr.Type{"name": types.StringType, "ip": types.StringType, "pod_cidr": types.StringType, "ready": types.BoolType}
)

func (r *nodePoolResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_windows_node_pool"
}

func (r *nodePoolResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	resp.Schema = schema.Schema{
		Description: "A pool of Windows Server nodes joined to a cluster. The pool's machines are created, like a cloud scale set's, " +
			"from a kubewin image with one NodeConfig in their custom data; nodeboot joins each with a short-lived bootstrap token minted " +
			"for the change of the pool (deleted once the nodes are Ready) and names the node after the machine's computer name. " +
			"Creation waits until every node is Ready, or fails naming the node, the join phase and the error code. Scaling in cordons " +
			"and drains the nodes it removes (through the Eviction API, so PodDisruptionBudgets hold) before deleting their machines and " +
			"Node objects.\n\n" +
			"Where the machines run is named by a backend block, one of `azure` (a virtual machine scale set) and `local` (**simulated** " +
			"Windows machines on the Terraform host, each a nodeboot process whose simulated kubelet runs no containers, for development, " +
			"demos and CI; they join only a `kubewin_cluster` of the local backend). There is no default.\n\n" +
			"Changing settings: a change takes effect in place, replaces the nodes surge-first (new nodes, made with the new value, Ready " +
			"before old ones are drained and deleted), is refused at plan time on an existing pool (its machines cannot take it: the error " +
			"says to add a pool with another name beside it), or replaces the pool (`name`, `cluster_id`, the backend). The table below " +
			"and each argument's description say which.\n\n" +
			"Unhealthy nodes: a node that stops being Ready is reported by `terraform plan` (a warning naming each such node and what the " +
			"next apply does with it) and handled by the next apply as `health_check` says: kept within its grace period, then drained and " +
			"replaced; a machine that stopped or is gone, or whose join failed, is replaced.\n\n" +
			"Machines the provider did not add cannot join: the bootstrap token in the machines' custom data is deleted once the pool's " +
			"nodes are Ready, so an instance added outside Terraform (by the Azure portal, a reimage, the scale set's automatic instance " +
			"repairs or a cluster autoscaler) fails its join with `TokenNotFound`. The next plan reports it and the next apply replaces it " +
			"with a machine that joins. Change the pool's size with `node_count` only; kubewin's scale set leaves automatic instance repairs " +
			"off, and they must stay off." + verifiedAzure,
		Blocks: map[string]schema.Block{"local": localPoolBlock(), "azure": azurePoolBlock(), "pod_routes": poolRoutesBlock()},
		Attributes: attributes(nodeAttributes("the pool mints one for each change that adds nodes; "+
			"an apply interrupted or failed while they join leaves it to them until it expires, "+
			"and a later apply replaces machines that have not joined once no token of the pool is left"), map[string]schema.Attribute{
			"name": schema.StringAttribute{
				Required:      true,
				PlanModifiers: replace,
				Description:   "Name of the pool: a lower-case DNS label. It is also the default node name prefix.",
			},
			"cluster_id": schema.StringAttribute{
				Optional:      true,
				PlanModifiers: replace,
				Description: "The `id` of the `kubewin_cluster` the nodes join (an azure cluster's for the `azure` backend, a local cluster's for " +
					"the `local` one). Without it the nodes join the cluster of the provider's `kubernetes` block (for the `local` backend only " +
					"with its explicit opt-in), which must be a kubeadm cluster (kubewin reads its networks from `kube-system/kubeadm-config`) " +
					"unless the block names its networks (`cluster_cidr`, `service_cidr`), as a managed cluster such as AKS needs.",
			},
			"node_count": schema.Int64Attribute{
				Required:   true,
				Validators: []validator.Int64{int64validator.AtLeast(0)},
				Description: "Number of nodes. (`count` is a Terraform meta-argument, hence the name.) Each node needs a pod CIDR of the " +
					"cluster's pod network: a plan whose cluster exists refuses more nodes than it has room for, besides its other nodes.",
			},
			"node_name_prefix": schema.StringAttribute{
				Optional:      true,
				Computed:      true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
				Description: fmt.Sprintf("Prefix of the nodes' names, at most %d characters: a node is named prefix + %d base-36 digits, a "+
					"Windows computer name of at most %d characters. Default: the pool's name.", winname.MaxPrefix, winname.SuffixLen,
					winname.MaxComputerName) + fixedNote,
			},
			"max_surge": schema.Int64Attribute{
				Optional:    true,
				Computed:    true,
				Default:     int64default.StaticInt64(1),
				Validators:  []validator.Int64{int64validator.AtLeast(1)},
				Description: "How many nodes a replacement creates before it drains and removes old ones. Default `1`.",
			},
			"health_check": schema.SingleNestedAttribute{
				Optional: true,
				Computed: true,
				Default: objectdefault.StaticValue(types.ObjectValueMust(healthCheckAttrTypes, map[string]attr.Value{
					"not_ready_timeout": types.StringValue(defaultNotReadyTimeout),
					"max_replacements":  types.Int64Value(pool.DefaultMaxReplacements),
					"join_retries":      types.Int64Value(defaultJoinRetries),
				})),
				Description: "When an apply replaces a node that joined and then stopped being Ready — its kubelet reports NotReady, or " +
					"stopped posting its status — modelled on AKS's node auto-repair and cluster-api's MachineHealthCheck. Such a node stays a " +
					"node of the pool, counted by `node_count` and left alone, until it has been NotReady for `not_ready_timeout`: a Windows " +
					"node rebooting for an update, or waiting out a network hiccup, keeps its pods. After that the next apply adds a node in " +
					"its place, then cordons the NotReady node, drains it through the Eviction API (PodDisruptionBudgets hold; `drain` " +
					"applies; on a node whose kubelet stopped posting its status, evicted pods are waited for only until their termination " +
					"grace period ends, as no kubelet can confirm them gone) and deletes its machine. An apply replaces at most " +
					"`max_replacements` NotReady nodes, those NotReady longest first; the others wait for a later apply. A change takes effect " +
					"in place.",
				Attributes: map[string]schema.Attribute{
					"not_ready_timeout": schema.StringAttribute{
						Optional:    true,
						Computed:    true,
						Default:     stringdefault.StaticString(defaultNotReadyTimeout),
						Validators:  []validator.String{durationValidator{}},
						Description: "How long a node may be NotReady before an apply replaces it (a Go duration). Default `10m`.",
					},
					"max_replacements": schema.Int64Attribute{
						Optional:    true,
						Computed:    true,
						Default:     int64default.StaticInt64(pool.DefaultMaxReplacements),
						Validators:  []validator.Int64{int64validator.AtLeast(1)},
						Description: "Most NotReady nodes one apply replaces. Default `1`.",
					},
					"join_retries": schema.Int64Attribute{
						Optional:   true,
						Computed:   true,
						Default:    int64default.StaticInt64(defaultJoinRetries),
						Validators: []validator.Int64{int64validator.Between(0, 10)},
						Description: "How many machines, in all, one apply replaces because their join failed with a code that lies with the " +
							"machine rather than the image, the settings or the cluster (`ClockSkew`, `PortInUse`, `APIServerUnreachable`, " +
							"`RegisterFailed`, `NetworkFailed`, `KubeletConfigFailed`, `ServiceFailed`, `RoutesFailed`, `Internal`): the machine is " +
							"deleted (its Node drained first, if it registered) and a new one added while the others go on joining, so that one bad " +
							"machine does not fail a large apply. Other codes fail the apply at once. `0` to never retry. Default `2`.",
					},
				},
			},
			"timeouts": timeoutsAttribute(ctx, "until every node is Ready or removed", 15*time.Minute, 30*time.Minute, 30*time.Minute),
			"id": schema.StringAttribute{
				Computed:      true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
				Description:   "The pool's name.",
			},
			"nodes": schema.ListNestedAttribute{
				Computed:    true,
				Description: "The pool's nodes.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"name": schema.StringAttribute{
						Computed:    true,
						Description: "Node (and computer) name.",
					},
					"ip": schema.StringAttribute{
						Computed:    true,
						Description: "The node's address.",
					},
					"pod_cidr": schema.StringAttribute{
						Computed:    true,
						Description: "The node's pod CIDR.",
					},
					"ready": schema.BoolAttribute{
						Computed:    true,
						Description: "Whether the node is Ready.",
					},
				}},
			},
		}),
	}
	noteReplacements(ctx, &resp.Schema)
}

func (r *nodePoolResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = configuredData(req.ProviderData, &resp.Diagnostics)
}

func (r *nodePoolResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m nodePoolModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if !m.Name.IsUnknown() && !m.Name.IsNull() {
		if err := winname.ValidatePoolName(m.Name.ValueString()); err != nil {
			resp.Diagnostics.AddAttributeError(path.Root("name"), "Invalid Pool Name", err.Error())
			return
		}
	}
	prefix, prefixPath := m.NodeNamePrefix, path.Root("node_name_prefix")
	if prefix.IsNull() {
		prefix, prefixPath = m.Name, path.Root("name")
	}
	if !prefix.IsUnknown() && !prefix.IsNull() {
		if err := winname.ValidatePrefix(prefix.ValueString()); err != nil {
			fix := ""
			if prefixPath.Equal(path.Root("name")) {
				fix = " Set node_name_prefix, or shorten the pool's name."
			}
			resp.Diagnostics.AddAttributeError(prefixPath, "Windows Computer Names Too Long", err.Error()+"."+fix)
		}
	}
	resp.Diagnostics.Append(checkBackend(&m)...)
	resp.Diagnostics.Append(checkPodRoutes(&m)...)
}

// checkBackend checks that the pool names where its machines run, and its block's arguments.
func checkBackend(m *nodePoolModel) diag.Diagnostics {
	diags := checkOneBackend(m.Local, m.Azure,
		"The pool does not say where its machines run, and kubewin has no default backend. Add a backend block: "+
			"`azure { … }` creates a virtual machine scale set in Azure; `local { image = \"<image directory>\" }` creates simulated Windows "+
			"machines on this host, which join a kubewin_cluster of the local backend.",
		"azure or local")
	if b := m.backend(); b != nil {
		diags.Append(b.check(m)...)
	}
	return diags
}

// ModifyPlan checks what needs the image and the cluster: the image manifest, the version skew
// and every node setting, as nodeboot would check them, before anything is created.
func (r *nodePoolResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() || r.data == nil {
		return
	}
	var m nodePoolModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if m.NodeNamePrefix.IsUnknown() && !m.Name.IsUnknown() {
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("node_name_prefix"), m.Name)...)
	}
	if checkBackend(&m).HasError() {
		return // reported by ValidateConfig
	}
	b := m.backend()
	resp.Diagnostics.Append(b.modifyPlan(ctx, &m, &resp.Plan)...)
	if a, ok := b.(*azurePoolModel); ok {
		if req.State.Raw.IsNull() {
			resp.Diagnostics.AddAttributeWarning(path.Root("azure"), "Only Machines Terraform Adds Can Join This Pool",
				"The bootstrap token in the scale set's custom data is deleted once the pool's nodes are Ready, so an instance added outside "+
					"Terraform — by the Azure portal's scaling, a reimage, the scale set's automatic instance repairs or a cluster autoscaler — fails "+
					"its join with TokenNotFound. Change the pool's size with node_count, and leave the scale set's automatic repairs off (kubewin "+
					"does not turn them on). The next plan reports such an instance; the next apply replaces it with one that joins.")
		}
		resp.Diagnostics.Append(a.checkOutbound(ctx, r.data)...)
	}
	resp.Diagnostics.Append(checkFixedSettings(ctx, req.State, &m, len(resp.RequiresReplace) > 0)...)
	resp.Diagnostics.Append(b.checkCluster(r.data, &m)...)
	if !resp.Diagnostics.HasError() {
		resp.Diagnostics.Append(r.checkPoolRoutes(ctx, req.State, &m)...)
	}
	if resp.Diagnostics.HasError() || b.imageUnknown() {
		return
	}
	img, diags := b.image(ctx, r.data, &m)
	resp.Diagnostics.Append(diags...)
	if diags.HasError() {
		return
	}
	manifest := img.manifest
	imagePath := b.imagePath()
	conn, diags := r.cluster(ctx, &m)
	resp.Diagnostics.Append(diags...)
	var clusterVersion string
	if conn != nil {
		clusterVersion = conn.facts.Version
		resp.Diagnostics.Append(checkPodCIDRRoom(ctx, conn, &m)...)
		resp.Diagnostics.Append(checkCloudRoutes(&m, conn.facts)...)
	} else {
		clusterVersion = b.plannedVersion(r.data)
	}
	if clusterVersion != "" {
		resp.Diagnostics.Append(checkSkew(manifest, clusterVersion, imagePath)...)
	}
	if a, ok := b.(*azurePoolModel); ok {
		if manifest.HyperV() {
			resp.Diagnostics.Append(checkNestedVirtualization(a.VMSize)...)
		}
		resp.Diagnostics.Append(a.checkKubeletIdentity(ctx, r.data, manifest)...)
	}
	tmpl, diags := nodeConfigTemplate(ctx, &m, manifest, placeholderCluster)
	resp.Diagnostics.Append(diags...)
	if diags.HasError() {
		return
	}
	resp.Diagnostics.Append(checkNodeConfig(tmpl, manifest, func(field string) path.Path { return attributeOf(field, imagePath) })...)
}

// cluster reaches the pool's cluster, nil when it is not created yet or cannot be reached (the
// apply says so). A cluster kubewin cannot join (not a kubeadm cluster) is reported at plan time.
func (r *nodePoolResource) cluster(ctx context.Context, m *nodePoolModel) (*clusterConn, diag.Diagnostics) {
	var diags diag.Diagnostics
	if m.ClusterID.IsUnknown() {
		return nil, diags
	}
	conn, err := r.data.connect(ctx, m.ClusterID)
	if errors.As(err, new(*notKubeadmError)) {
		diags.Append(connectError(m.ClusterID, "the Pool's", err))
	}
	return conn, diags
}

// checkPodCIDRRoom refuses a node_count the cluster's pod network cannot give each node a pod
// CIDR of: node IPAM splits the cluster CIDR into pod CIDRs of the controller manager's
// --node-cidr-mask-size, one per Node, and a node that gets none never has a pod network (the
// controller manager reports CIDRNotAvailable; the join fails with PodCIDRTimeout minutes
// later). The cluster's other nodes hold theirs.
func checkPodCIDRRoom(ctx context.Context, conn *clusterConn, m *nodePoolModel) diag.Diagnostics {
	var diags diag.Diagnostics
	cidr, err := netip.ParsePrefix(conn.facts.ClusterCIDR)
	if err != nil || m.NodeCount.IsUnknown() {
		return diags
	}
	mask := conn.facts.NodeCIDRMaskSize
	split, err := ipam.NewSplitter(cidr, mask)
	if err != nil {
		return diags // an unknown mask, or IPv6: nothing to count
	}
	c, err := kubernetes.NewForConfig(conn.rest)
	if err != nil {
		return diags
	}
	// From the API server's cache: a count, not a consistent read.
	others, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: nodeaccess.PoolLabel + "!=" + m.Name.ValueString(),
		ResourceVersion: "0"})
	if err != nil {
		return diags // the apply reads the cluster again and says what fails
	}
	total := int(split.Count())
	room := total - len(others.Items)
	if want := m.NodeCount.ValueInt64(); want > int64(room) {
		diags.AddAttributeError(path.Root("node_count"), "Pool Larger Than the Cluster's Pod Network",
			fmt.Sprintf("node_count = %d needs a pod CIDR for each node. The cluster's pod network %s, split into /%d per node (the controller "+
				"manager's --node-cidr-mask-size), has %d, and the cluster's other nodes hold %d: room for %d.\n\nLower node_count to %d or "+
				"fewer, or give the cluster a larger pod network or longer per-node CIDRs (a kubewin_cluster's cluster_cidr and "+
				"node_cidr_mask_size; a kubeadm cluster's networking.podSubnet and controllerManager's node-cidr-mask-size).",
				want, cidr, mask, total, len(others.Items), max(room, 0), max(room, 0)))
	}
	return diags
}

// loadImage reads and validates an image's manifest, and returns it with its digest, which
// identifies the image.
func loadImage(dir string) (*v1alpha1.ImageManifest, string, error) {
	raw, err := os.ReadFile(filepath.Join(dir, simmachine.ImageManifestFile))
	if err != nil {
		return nil, "", fmt.Errorf("read the image manifest: %w. Point local.image at the directory `packer build` wrote", err)
	}
	m, err := api.LoadImageManifest(raw)
	if err != nil {
		return nil, "", err
	}
	digest := sha256.Sum256(raw)
	return m, hex.EncodeToString(digest[:]), nil
}

// clusterFacts are what a NodeConfig takes from the cluster.
type clusterFacts struct {
	Endpoint, CAHash, Version, ClusterCIDR, ServiceCIDR string
	// NodeCIDRMaskSize is the length of the pod CIDR node IPAM gives each node; 0 when unknown.
	NodeCIDRMaskSize int
	// ExternalCloudProvider: the cluster runs an external cloud provider's node manager for
	// Windows nodes, so their kubelets run with --cloud-provider=external.
	ExternalCloudProvider bool
	// CloudRoutes: the cluster's cloud-controller-manager runs its route controller, which keeps
	// every node's pod route in its route table.
	CloudRoutes bool
}

// placeholderCluster stands in for a cluster not created yet, to check the node settings.
var placeholderCluster = clusterFacts{Endpoint: "127.0.0.1:6443", CAHash: "sha256:" + strings.Repeat("0", 64),
	ClusterCIDR: v1alpha1.DefaultClusterCIDR, ServiceCIDR: v1alpha1.DefaultServiceCIDR}

// placeholderToken stands in the template for the token each change of the pool mints, so
// that the template validates; it is never sent anywhere.
const placeholderToken = "abcdef.0123456789abcdef"

// nodeConfigTemplate is the pool's NodeConfig, with a placeholder token: every node boots with
// it and names itself after its computer.
func nodeConfigTemplate(ctx context.Context, m *nodePoolModel, manifest *v1alpha1.ImageManifest, c clusterFacts) (*v1alpha1.NodeConfig,
	diag.Diagnostics) {
	cfg, diags := m.settings().nodeConfig(ctx, manifest.Runtime.Name, c)
	cfg.Cluster.BootstrapToken = placeholderToken
	return cfg, diags
}

func (m *nodePoolModel) settings() nodeSettings {
	return nodeSettings{NetworkMode: m.NetworkMode, Labels: m.Labels, Taints: m.Taints, MaxPods: m.MaxPods, KubeletExtraArgs: m.KubeletExtraArgs,
		Memory: m.memorySettings}
}

// attributeOf maps a NodeConfig field path to the pool attribute it comes from.
func attributeOf(field string, image path.Path) path.Path {
	for prefix, attr := range map[string]path.Path{
		"node.labels": path.Root("labels"), "node.taints": path.Root("taints"), "node.maxPods": path.Root("max_pods"),
		"network": path.Root("network_mode"), "kubelet.extraArgs": path.Root("kubelet_extra_args"), "runtime": image,
		"kubelet.systemReservedMemory": path.Root("system_reserved_memory"), "kubelet.kubeReservedMemory": path.Root("kube_reserved_memory"),
		"kubelet.evictionHardMemory": path.Root("eviction_hard_memory"),
	} {
		if strings.HasPrefix(field, prefix) {
			return attr
		}
	}
	return path.Root("cluster_id")
}

// spec is the desired pool and the manager that reconciles it at its backend. adminPassword is
// the azure backend's write-only password, known only while applying.
func (r *nodePoolResource) spec(ctx context.Context, m *nodePoolModel, adminPassword string) (pool.Spec, *pool.Manager, diag.Diagnostics) {
	mgr, conn, diags := r.manager(ctx, m, adminPassword)
	if diags.HasError() {
		return pool.Spec{}, nil, diags
	}
	img, d := m.backend().image(ctx, r.data, m)
	diags.Append(d...)
	if diags.HasError() {
		return pool.Spec{}, nil, diags
	}
	// The cloud provider's node manager initializes a node from its Azure instance metadata: a
	// simulated machine of the local backend has none, and would keep the uninitialized taint.
	facts := conn.facts
	facts.ExternalCloudProvider = facts.ExternalCloudProvider && m.Azure != nil
	tmpl, d := nodeConfigTemplate(ctx, m, img.manifest, facts)
	diags.Append(d...)
	if a := m.Azure; a != nil && !a.KubeletIdentityID.IsNull() {
		at := pathAzure.AtName("kubelet_identity_id")
		tmpl.Kubelet.AzureContainerRegistry, d = readKubeletIdentity(ctx, r.data, at, a.KubeletIdentityID.ValueString())
		diags.Append(d...)
	}
	ttl, _ := time.ParseDuration(m.TokenTTL.ValueString())
	drainOpts, d := drainOptions(ctx, m.Drain)
	diags.Append(d...)
	health, d := healthCheck(ctx, m.HealthCheck)
	diags.Append(d...)
	routes, _, err := m.podRoutes(ctx, r.data)
	if err != nil {
		diags.AddAttributeError(pathPodRoutesTable, "Cannot Use the Route Table", err.Error())
	}
	s := pool.Spec{
		Pool:     m.Name.ValueString(),
		Count:    int(m.NodeCount.ValueInt64()),
		Image:    img.digest,
		Template: *tmpl,
		MaxSurge: int(m.MaxSurge.ValueInt64()),
		TokenTTL: ttl,
		Drain:    drainOpts,
		Health:   health,
		HyperV:   img.manifest.HyperV(),
		Routes:   routes,
	}
	return s, mgr, diags
}

// manager connects to the pool's cluster and its backend: what reading and destroying a pool
// need, without its image (which may be gone by then).
func (r *nodePoolResource) manager(ctx context.Context, m *nodePoolModel, adminPassword string) (*pool.Manager, *clusterConn, diag.Diagnostics) {
	diags := checkBackend(m)
	if diags.HasError() {
		return nil, nil, diags
	}
	b := m.backend()
	diags.Append(b.checkCluster(r.data, m)...)
	if diags.HasError() {
		return nil, nil, diags
	}
	conn, err := r.data.connect(ctx, m.ClusterID)
	var client kubernetes.Interface
	if err == nil {
		conn.rest.QPS, conn.rest.Burst = 50, 100
		client, err = kubernetes.NewForConfig(conn.rest)
	}
	if err != nil {
		diags.Append(connectError(m.ClusterID, "the Pool's", err))
		return nil, nil, diags
	}
	compute, d := b.compute(ctx, r.data, m, adminPassword)
	diags.Append(d...)
	return &pool.Manager{Client: client, Compute: compute}, conn, diags
}

func (r *nodePoolResource) apply(ctx context.Context, m *nodePoolModel, adminPassword string, timeout time.Duration) diag.Diagnostics {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	s, mgr, diags := r.spec(ctx, m, adminPassword)
	if diags.HasError() {
		return diags
	}
	diags.Append(m.backend().applying(ctx, mgr.Compute)...)
	var nodes []pool.Node
	var err error
	if !diags.HasError() {
		nodes, err = mgr.Reconcile(ctx, s)
	}
	if nodes == nil {
		nodes, _ = mgr.Nodes(context.WithoutCancel(ctx), s)
	}
	diags.Append(setNodes(m, nodes)...)
	diags.Append(r.saveSettings(ctx, m, mgr.Client)...)
	if err != nil {
		var je *pool.JoinError
		var ae *pool.ActionError
		switch {
		case errors.As(err, &je):
			diags.AddError("Node Failed to Join", je.Detail())
		case errors.As(err, &ae):
			diags.AddError(ae.Summary, fmt.Sprintf("Pool %q did not reach node_count = %d: %s.\n\n%s\n\nThe state keeps the nodes the pool has now.",
				m.Name.ValueString(), m.NodeCount.ValueInt64(), err, ae.Remedy))
		default:
			diags.AddError("Cannot Reconcile Node Pool", fmt.Sprintf("Pool %q did not reach node_count = %d: %s.\n\nThe state keeps the "+
				"nodes the pool has now: fix the cause above and apply again to resume. If a wait ran out, raise timeouts (create "+
				"15m, update 30m by default) or drain.timeout.", m.Name.ValueString(), m.NodeCount.ValueInt64(), err))
		}
	}
	return diags
}

func (r *nodePoolResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m nodePoolModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	timeout, diags := m.Timeouts.Create(ctx, 15*time.Minute)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	m.ID = m.Name
	resp.Diagnostics.Append(r.apply(ctx, &m, adminPassword(ctx, req.Config), timeout)...)
	// Saved even on failure: Terraform then knows the machines (tainted) and removes them.
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *nodePoolResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m nodePoolModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	timeout, diags := m.Timeouts.Update(ctx, 30*time.Minute)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(r.apply(ctx, &m, adminPassword(ctx, req.Config), timeout)...)
	if !resp.Diagnostics.HasError() {
		resp.Diagnostics.Append(r.leaveRouteTable(ctx, req.State, &m)...)
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// adminPassword reads the write-only password from the configuration: it is in no plan or state.
func adminPassword(ctx context.Context, config tfsdk.Config) string {
	var pw types.String
	if diags := config.GetAttribute(ctx, pathAzure.AtName("admin_password_wo"), &pw); diags.HasError() {
		return ""
	}
	return pw.ValueString()
}

func (r *nodePoolResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m nodePoolModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if r.data.localClusterGone(m.ClusterID) {
		resp.State.RemoveResource(ctx) // the cluster is gone, and its nodes with it
		return
	}
	mgr, _, diags := r.manager(ctx, &m, "")
	if diags.HasError() {
		resp.Diagnostics.Append(diags...)
		return
	}
	health, diags := healthCheck(ctx, m.HealthCheck)
	resp.Diagnostics.Append(diags...)
	s := pool.Spec{Pool: m.Name.ValueString(), Health: health}
	nodes, err := mgr.Nodes(ctx, s)
	if err != nil {
		resp.Diagnostics.AddError("Cannot Read Node Pool", err.Error())
		return
	}
	findings, err := mgr.Health(ctx, s)
	if err != nil {
		resp.Diagnostics.AddError("Cannot Read Node Pool", err.Error())
		return
	}
	// Drift: Ready nodes and nodes NotReady within their grace count; what the next apply
	// replaces does not.
	count := 0
	for _, n := range nodes {
		if n.Ready {
			count++
		}
	}
	for _, f := range findings {
		if f.Kept {
			count++
		}
	}
	if len(findings) > 0 {
		resp.Diagnostics.AddWarning(fmt.Sprintf("Pool %s Has Nodes That Are Not Ready", m.Name.ValueString()), healthReport(findings))
	}
	// Ready nodes without their route do not count either: the next apply writes the routes.
	count -= r.unrouted(ctx, &m, nodes, &resp.Diagnostics)
	m.NodeCount = types.Int64Value(int64(count))
	resp.Diagnostics.Append(setNodes(&m, nodes)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *nodePoolResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m nodePoolModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	timeout, diags := m.Timeouts.Delete(ctx, 30*time.Minute)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if r.data.localClusterGone(m.ClusterID) {
		// The cluster went first: only the machines remain, with nothing to drain.
		diags := checkBackend(&m)
		if diags.HasError() {
			resp.Diagnostics.Append(diags...)
			return
		}
		c, diags := m.backend().compute(ctx, r.data, &m, "")
		if diags.HasError() {
			resp.Diagnostics.Append(diags...)
			return
		}
		machines, err := c.List(ctx)
		if err == nil {
			var names []string
			for _, mc := range machines {
				names = append(names, mc.Name)
			}
			err = errors.Join(c.Delete(ctx, names), c.Destroy(ctx))
		}
		if err == nil { // the routes of the machines just deleted
			err = r.removePoolRoutes(ctx, &m)
		}
		if err != nil {
			resp.Diagnostics.AddError("Cannot Delete Node Pool", err.Error())
		}
		return
	}
	mgr, _, diags := r.manager(ctx, &m, "")
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	drainOpts, d := drainOptions(ctx, m.Drain)
	resp.Diagnostics.Append(d...)
	routes, _, err := m.podRoutes(ctx, r.data)
	if err != nil {
		resp.Diagnostics.AddAttributeError(pathPodRoutesTable, "Cannot Use the Route Table", err.Error())
		return
	}
	s := pool.Spec{Pool: m.Name.ValueString(), Drain: drainOpts, Routes: routes}
	if err := mgr.Destroy(ctx, s); err != nil {
		resp.Diagnostics.AddError("Cannot Delete Node Pool", err.Error())
	}
}

// ImportState takes a local pool's name, or an azure pool's scale set resource ID.
func (r *nodePoolResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	var s poolSettings
	var err error
	if strings.HasPrefix(strings.ToLower(req.ID), "/subscriptions/") {
		s, err = r.importAzure(ctx, req.ID)
	} else {
		var data []byte
		if data, err = r.data.local.LoadPoolFile(req.ID, "pool.json"); err == nil {
			err = json.Unmarshal(data, &s)
		}
		if err != nil {
			err = fmt.Errorf("the local backend has no pool named %q: %w", req.ID, err)
		}
	}
	if err != nil {
		resp.Diagnostics.AddError("Cannot Import Node Pool", err.Error()+". Import a local pool by its name, an azure pool by its scale set's resource ID.")
		return
	}
	m := s.model()
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// importAzure reads an azure pool's settings: the scale set names its pool (and cluster), whose
// settings as last applied are kept in the cluster.
func (r *nodePoolResource) importAzure(ctx context.Context, id string) (poolSettings, error) {
	c, err := r.data.azure(ctx)
	if err != nil {
		return poolSettings{}, err
	}
	tags, err := c.ScaleSetTags(ctx, id)
	if err != nil {
		return poolSettings{}, err
	}
	name := tags[azure.TagPool]
	if name == "" {
		return poolSettings{}, fmt.Errorf("scale set %s has no %s tag: kubewin did not create it", id, azure.TagPool)
	}
	conn, err := r.data.connect(ctx, types.StringValue(tags[tagClusterID]))
	if err != nil {
		return poolSettings{}, err
	}
	client, err := kubernetes.NewForConfig(conn.rest)
	if err != nil {
		return poolSettings{}, err
	}
	return loadClusterSettings(ctx, client, name)
}

// healthCheck reads the health_check attribute.
func healthCheck(ctx context.Context, v types.Object) (pool.HealthCheck, diag.Diagnostics) {
	var hm healthCheckModel
	diags := v.As(ctx, &hm, objectAsOptions)
	timeout, _ := time.ParseDuration(hm.NotReadyTimeout.ValueString())
	return pool.HealthCheck{
		NotReadyTimeout: timeout,
		MaxReplacements: int(hm.MaxReplacements.ValueInt64()),
		JoinRetries:     int(hm.JoinRetries.ValueInt64()),
	}, diags
}

// healthReport says, node by node, what is wrong and what the next apply does about it.
func healthReport(findings []pool.Finding) string {
	var b strings.Builder
	for _, f := range findings {
		fmt.Fprintf(&b, "- %s: %s; %s.\n", f.Node, f.State, f.Action)
	}
	b.WriteString("\nhealth_check sets how long a NotReady node is kept and how many an apply replaces; node_count counts the nodes that are kept.")
	return b.String()
}

func setNodes(m *nodePoolModel, nodes []pool.Node) diag.Diagnostics {
	var diags diag.Diagnostics
	values := make([]attr.Value, 0, len(nodes))
	for _, n := range nodes {
		obj, d := types.ObjectValue(nodeAttrTypes, map[string]attr.Value{
			"name": types.StringValue(n.Name), "ip": types.StringValue(n.IP), "pod_cidr": types.StringValue(n.PodCIDR), "ready": types.BoolValue(n.Ready),
		})
		diags.Append(d...)
		values = append(values, obj)
	}
	list, d := types.ListValue(types.ObjectType{AttrTypes: nodeAttrTypes}, values)
	diags.Append(d...)
	m.Nodes = list
	return diags
}

// poolSettings are the pool's attributes as last applied, kept for import: by the local
// backend in its state directory, for an azure pool in the cluster.
type poolSettings struct {
	Name, ClusterID, NodeNamePrefix, NetworkMode, TokenTTL string
	Local                                                  *localSettings `json:",omitempty"`
	Azure                                                  *azureSettings `json:",omitempty"`
	NodeCount, MaxPods, MaxSurge                           int64
	Labels, KubeletExtraArgs                               map[string]string
	Taints                                                 []v1alpha1.Taint
	DrainTimeout                                           string
	IgnoreDaemonSets, DeleteEmptyDirData                   bool
	NotReadyTimeout                                        string `json:",omitempty"`
	MaxReplacements                                        int64  `json:",omitempty"`
	JoinRetries                                            *int64 `json:",omitempty"`
	SystemReservedMemory, KubeReservedMemory               string `json:",omitempty"`
	EvictionHardMemory                                     string `json:",omitempty"`
	PodRouteTable                                          string `json:",omitempty"`
}

type localSettings struct {
	Image                               string
	JoinSimulatedNodesToExistingCluster *bool
}

// azureSettings are the azure block's arguments (never the password); unset ones are nil.
type azureSettings struct {
	ResourceGroupName, Location, VMSize, SubnetID, ImageID, ScaleSetName, ScaleSetID string
	ImageManifest, AdminUsername, OSDiskStorageAccountType, OSDiskCaching, Priority  *string
	KubeletIdentityID                                                                *string
	Zones                                                                            []string
	AcceleratedNetworkingEnabled                                                     *bool
	OSDiskSizeGB, AdminPasswordWOVersion                                             *int64
	MaxBidPrice                                                                      *float64
	Tags                                                                             map[string]string
}

func settingsOf(ctx context.Context, m *nodePoolModel) (poolSettings, diag.Diagnostics) {
	s := poolSettings{
		Name:           m.Name.ValueString(),
		ClusterID:      m.ClusterID.ValueString(),
		NodeNamePrefix: m.NodeNamePrefix.ValueString(),
		NetworkMode:    m.NetworkMode.ValueString(),
		TokenTTL:       m.TokenTTL.ValueString(),
		NodeCount:      m.NodeCount.ValueInt64(),
		MaxPods:        m.MaxPods.ValueInt64(),
		MaxSurge:       m.MaxSurge.ValueInt64(),
		Taints:         taintsOf(m.Taints),

		SystemReservedMemory: m.SystemReserved.ValueString(),
		KubeReservedMemory:   m.KubeReserved.ValueString(),
		EvictionHardMemory:   m.EvictionHard.ValueString(),
	}
	if m.PodRoutes != nil {
		s.PodRouteTable = m.PodRoutes.RouteTable.ValueString()
	}
	var diags, d diag.Diagnostics
	s.Local, s.Azure, diags = m.backend().settings(ctx)
	if !m.Labels.IsNull() {
		s.Labels, d = stringMapOf(ctx, m.Labels)
		diags.Append(d...)
	}
	if !m.KubeletExtraArgs.IsNull() {
		s.KubeletExtraArgs, d = stringMapOf(ctx, m.KubeletExtraArgs)
		diags.Append(d...)
	}
	var dm drainModel
	diags.Append(m.Drain.As(ctx, &dm, objectAsOptions)...)
	s.DrainTimeout, s.IgnoreDaemonSets, s.DeleteEmptyDirData = dm.Timeout.ValueString(), dm.IgnoreDaemonSets.ValueBool(),
		dm.DeleteEmptyDirData.ValueBool()
	var hm healthCheckModel
	diags.Append(m.HealthCheck.As(ctx, &hm, objectAsOptions)...)
	s.NotReadyTimeout, s.MaxReplacements = hm.NotReadyTimeout.ValueString(), hm.MaxReplacements.ValueInt64()
	s.JoinRetries = hm.JoinRetries.ValueInt64Pointer()
	return s, diags
}

func (s poolSettings) model() nodePoolModel {
	clusterID := types.StringNull()
	if s.ClusterID != "" {
		clusterID = types.StringValue(s.ClusterID)
	}
	m := nodePoolModel{
		Name:             types.StringValue(s.Name),
		ID:               types.StringValue(s.Name),
		ClusterID:        clusterID,
		NodeNamePrefix:   types.StringValue(s.NodeNamePrefix),
		NetworkMode:      types.StringValue(s.NetworkMode),
		TokenTTL:         types.StringValue(s.TokenTTL),
		NodeCount:        types.Int64Value(s.NodeCount),
		MaxPods:          types.Int64Value(s.MaxPods),
		MaxSurge:         types.Int64Value(s.MaxSurge),
		Labels:           stringMap(s.Labels),
		KubeletExtraArgs: stringMap(s.KubeletExtraArgs),
		Taints:           taintModelsOf(s.Taints),
		memorySettings: memorySettings{SystemReserved: optionalString(s.SystemReservedMemory), KubeReserved: optionalString(s.KubeReservedMemory),
			EvictionHard: optionalString(s.EvictionHardMemory)},
		Drain: types.ObjectValueMust(drainAttrTypes, map[string]attr.Value{
			"timeout": types.StringValue(s.DrainTimeout), "ignore_daemonsets": types.BoolValue(s.IgnoreDaemonSets),
			"delete_emptydir_data": types.BoolValue(s.DeleteEmptyDirData),
		}),
		// Settings saved before health_check existed have its defaults.
		HealthCheck: types.ObjectValueMust(healthCheckAttrTypes, map[string]attr.Value{
			"not_ready_timeout": types.StringValue(cmp.Or(s.NotReadyTimeout, defaultNotReadyTimeout)),
			"max_replacements":  types.Int64Value(cmp.Or(s.MaxReplacements, pool.DefaultMaxReplacements)),
			"join_retries":      types.Int64Value(ptrOr(s.JoinRetries, defaultJoinRetries)),
		}),
		Timeouts: timeouts.Value{Object: types.ObjectNull(map[string]attr.Type{"create": types.StringType, "update": types.StringType,
			"delete": types.StringType})},
		Nodes: types.ListNull(types.ObjectType{AttrTypes: nodeAttrTypes}),
	}
	if s.PodRouteTable != "" {
		m.PodRoutes = &poolRoutesModel{RouteTable: types.StringValue(s.PodRouteTable)}
	}
	if l := s.Local; l != nil {
		m.Local = &localPoolModel{Image: types.StringValue(l.Image),
			JoinSimulatedNodesToExistingCluster: types.BoolPointerValue(l.JoinSimulatedNodesToExistingCluster)}
	}
	if a := s.Azure; a != nil {
		zones := types.ListNull(types.StringType)
		if a.Zones != nil {
			zones = types.ListValueMust(types.StringType, stringValues(a.Zones))
		}
		m.Azure = &azurePoolModel{
			ResourceGroupName:            types.StringValue(a.ResourceGroupName),
			Location:                     types.StringValue(a.Location),
			VMSize:                       types.StringValue(a.VMSize),
			SubnetID:                     types.StringValue(a.SubnetID),
			ImageID:                      types.StringValue(a.ImageID),
			ScaleSetName:                 types.StringValue(a.ScaleSetName),
			ScaleSetID:                   types.StringValue(a.ScaleSetID),
			ImageManifest:                types.StringPointerValue(a.ImageManifest),
			AdminUsername:                types.StringPointerValue(a.AdminUsername),
			AdminPasswordWO:              types.StringNull(),
			AdminPasswordWOVersion:       types.Int64PointerValue(a.AdminPasswordWOVersion),
			OSDiskStorageAccountType:     types.StringPointerValue(a.OSDiskStorageAccountType),
			OSDiskCaching:                types.StringPointerValue(a.OSDiskCaching),
			Priority:                     types.StringPointerValue(a.Priority),
			AcceleratedNetworkingEnabled: types.BoolPointerValue(a.AcceleratedNetworkingEnabled),
			OSDiskSizeGB:                 types.Int64PointerValue(a.OSDiskSizeGB),
			MaxBidPrice:                  types.Float64PointerValue(a.MaxBidPrice),
			KubeletIdentityID:            types.StringPointerValue(a.KubeletIdentityID),
			Zones:                        zones,
			Tags:                         stringMap(a.Tags),
		}
	}
	return m
}

func stringValues(in []string) []attr.Value {
	out := make([]attr.Value, len(in))
	for i, v := range in {
		out[i] = types.StringValue(v)
	}
	return out
}

// taintsOf and taintModelsOf convert between the taints attribute and NodeConfig taints.
func taintsOf(models []taintModel) []v1alpha1.Taint {
	var out []v1alpha1.Taint
	for _, t := range models {
		out = append(out, v1alpha1.Taint{Key: t.Key.ValueString(), Value: t.Value.ValueString(), Effect: t.Effect.ValueString()})
	}
	return out
}

func taintModelsOf(taints []v1alpha1.Taint) []taintModel {
	var out []taintModel
	for _, t := range taints {
		v := types.StringNull()
		if t.Value != "" {
			v = types.StringValue(t.Value)
		}
		out = append(out, taintModel{Key: types.StringValue(t.Key), Value: v, Effect: types.StringValue(t.Effect)})
	}
	return out
}

// stringMapOf and stringMap convert between a map attribute and a Go map (nil for null).
func stringMapOf(ctx context.Context, v types.Map) (map[string]string, diag.Diagnostics) {
	if v.IsNull() || v.IsUnknown() {
		return nil, nil
	}
	var out map[string]string
	diags := v.ElementsAs(ctx, &out, false)
	return out, diags
}

func stringMap(m map[string]string) types.Map {
	if m == nil {
		return types.MapNull(types.StringType)
	}
	elems := map[string]attr.Value{}
	for k, v := range m {
		elems[k] = types.StringValue(v)
	}
	return types.MapValueMust(types.StringType, elems)
}

// saveSettings keeps the pool's settings for import: a local pool's in the backend's state
// directory, an azure pool's in its cluster.
func (r *nodePoolResource) saveSettings(ctx context.Context, m *nodePoolModel, client kubernetes.Interface) diag.Diagnostics {
	s, diags := settingsOf(ctx, m)
	if diags.HasError() {
		return diags
	}
	if err := m.backend().saveSettings(ctx, r.data, s, client); err != nil {
		diags.AddWarning("Cannot Save Pool Settings", err.Error()+" (importing this pool will not work)")
	}
	return diags
}

// ptrOr is *p, or def when p is nil (a setting saved before it existed).
func ptrOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
