package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/hashicorp/terraform-plugin-framework-validators/float64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubewin/kubewin/internal/api"
	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/azureimage"
	"github.com/kubewin/kubewin/internal/nodeaccess"
	"github.com/kubewin/kubewin/internal/nodestatus"
	"github.com/kubewin/kubewin/internal/sim/simmachine"
	"github.com/kubewin/kubewin/provider/internal/azure"
	"github.com/kubewin/kubewin/provider/internal/local"
	"github.com/kubewin/kubewin/provider/internal/pool"
)

// localPoolModel is the local backend's block: simulated machines on this host.
type localPoolModel struct {
	Image                               types.String `tfsdk:"image"`
	JoinSimulatedNodesToExistingCluster types.Bool   `tfsdk:"join_simulated_nodes_to_existing_cluster"`
}

// simulatedOptIn is the local block's opt-in that lets simulated nodes join a cluster kubewin
// did not create.
const simulatedOptIn = "join_simulated_nodes_to_existing_cluster"

// azurePoolModel is the azure backend's block: a Uniform virtual machine scale set. Names follow
// azurerm's azurerm_windows_virtual_machine_scale_set where it has one.
type azurePoolModel struct {
	ResourceGroupName            types.String  `tfsdk:"resource_group_name"`
	Location                     types.String  `tfsdk:"location"`
	VMSize                       types.String  `tfsdk:"vm_size"`
	SubnetID                     types.String  `tfsdk:"subnet_id"`
	ImageID                      types.String  `tfsdk:"image_id"`
	ImageManifest                types.String  `tfsdk:"image_manifest"`
	ScaleSetName                 types.String  `tfsdk:"scale_set_name"`
	AdminUsername                types.String  `tfsdk:"admin_username"`
	AdminPasswordWO              types.String  `tfsdk:"admin_password_wo"`
	AdminPasswordWOVersion       types.Int64   `tfsdk:"admin_password_wo_version"`
	Zones                        types.List    `tfsdk:"zones"`
	AcceleratedNetworkingEnabled types.Bool    `tfsdk:"accelerated_networking_enabled"`
	OSDiskStorageAccountType     types.String  `tfsdk:"os_disk_storage_account_type"`
	OSDiskSizeGB                 types.Int64   `tfsdk:"os_disk_size_gb"`
	OSDiskCaching                types.String  `tfsdk:"os_disk_caching"`
	Priority                     types.String  `tfsdk:"priority"`
	MaxBidPrice                  types.Float64 `tfsdk:"max_bid_price"`
	Tags                         types.Map     `tfsdk:"tags"`
	KubeletIdentityID            types.String  `tfsdk:"kubelet_identity_id"`
	ScaleSetID                   types.String  `tfsdk:"scale_set_id"`
}

var (
	pathLocalImage  = path.Root("local").AtName("image")
	pathAzure       = path.Root("azure")
	scaleSetNameRE  = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9_.-]{0,62}[A-Za-z0-9_])?$`)
	adminUsernameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9._-]{0,19}$`)
	reservedAdmins  = []string{"administrator", "admin", "user", "user1", "test", "user2", "test1", "user3", "admin1", "1", "123", "a", "actuser",
		"adm", "admin2", "aspnet", "backup", "console", "david", "guest", "john", "owner", "root", "server", "sql", "support", "support_388945a0",
		"sys", "test2", "test3", "user4", "user5"}
	backendReplaceIf = []planmodifier.Object{objectplanmodifier.RequiresReplaceIf(backendChanged, "Moving a pool to another backend replaces it.", "")}
)

func localPoolBlock() schema.Block {
	return schema.SingleNestedBlock{
		Description: "The machines are **simulated** Windows machines on this host (the local backend): nodeboot processes that join " +
			"for real, with a simulated kubelet that runs no containers. They join the `kubewin_cluster` named by `cluster_id`; " +
			"any other cluster is refused at plan time unless `" + simulatedOptIn + "` is set.",
		PlanModifiers: backendReplaceIf,
		Attributes: map[string]schema.Attribute{
			// Required within the block: checked by checkBackend, as the framework would
			// require it of a pool without the block too.
			"image": schema.StringAttribute{
				Optional:   true,
				Validators: []validator.String{stringvalidator.LengthAtLeast(1)},
				Description: requiredInBlock + "The image the machines are created from: the directory `packer build` wrote with the `kubewin-local` " +
					"builder (it holds `" + simmachine.ImageManifestFile + "`). Changing it replaces the nodes, surge-first.",
			},
			simulatedOptIn: schema.BoolAttribute{
				Optional: true,
				Description: "Let the pool's simulated nodes join the cluster of the provider's `kubernetes` block, a cluster kubewin did not " +
					"create. " +
					"Its scheduler will place pods on them that never run anything: set it only for a scratch cluster, to test schedulers and " +
					"policies.",
			},
		},
	}
}

func azurePoolBlock() schema.Block {
	return schema.SingleNestedBlock{
		Description: "The machines are Windows Server VMs of one Uniform virtual machine scale set in Azure, created with the provider's " +
			"`azure` credentials. Every change of the pool is a constant number of ARM writes: adding nodes raises the scale set's capacity " +
			"with the pool-wide NodeConfig (and a fresh bootstrap token) in its model's custom data, in one write; removing nodes deletes " +
			"exactly the drained instances in one `deleteInstances` call. Instances' computer names, which are the node names, are " +
			"`node_name_prefix` and 6 base-36 digits of the instance ID. A join that fails before the node reaches the cluster is read from " +
			"the instance's serial console (boot diagnostics, always on). Changing `image_id`, `vm_size`, the OS disk, accelerated " +
			"networking or `max_bid_price` replaces the nodes surge-first, with the new settings in the scale set's model; `tags` and " +
			"added `zones` change the scale set in place; `resource_group_name`, `location`, `subnet_id`, `scale_set_name`, " +
			"`admin_username`, `priority` and `admin_password_wo_version` are refused on an existing pool. " +
			"Clusters running Azure's cloud-controller-manager must leave the route table to kubewin (`--configure-cloud-routes=false`) " +
			"or not use `kubewin_pod_route`.",
		PlanModifiers: backendReplaceIf,
		Attributes: map[string]schema.Attribute{
			"resource_group_name": schema.StringAttribute{
				Optional:    true,
				Description: requiredInBlock + "Resource group of the scale set." + fixedNote,
			},
			"location": schema.StringAttribute{
				Optional:    true,
				Description: requiredInBlock + "Azure region of the scale set, e.g. `westeurope`." + fixedNote,
			},
			"vm_size": schema.StringAttribute{
				Optional:    true,
				Description: requiredInBlock + "Size of the VMs, e.g. `Standard_D4s_v5`." + surgeNote,
			},
			"subnet_id": schema.StringAttribute{
				Optional: true,
				Description: requiredInBlock + "Resource ID of the subnet the nodes' NICs are in. For `l2bridge` and `host-gateway` the NICs forward IP, " +
					"so that pod traffic routed to a node reaches it. The NICs have no public address and are in no load balancer: the nodes reach the " +
					"Internet (registries, an API server outside the virtual network) only through the subnet's NAT gateway or a route of " +
					"0.0.0.0/0 to a firewall, and the plan warns when the subnet has neither." + fixedNote,
			},
			"image_id": schema.StringAttribute{
				Optional: true,
				Description: requiredInBlock + "Resource ID of the image the kubewin Packer plugin published: a gallery image version or a managed image. " +
					"Its Windows build, Kubernetes version and runtime are read from its tags `" +
					azureimage.TagWindowsBuild + "`, `" + azureimage.TagKubernetesVersion + "`, `" + azureimage.TagRuntime + "` and `" +
					azureimage.TagRuntimeVersion + "` at plan time, or from `image_manifest`. An image of another tenant's gallery needs that tenant " +
					"in the provider's `azure.auxiliary_tenant_ids`." + surgeNote,
			},
			"image_manifest": schema.StringAttribute{
				Optional: true,
				Description: "The image's manifest (the `kubewin-manifest.json` the Packer provisioner downloads, e.g. " +
					"`file(\"output/kubewin-manifest.json\")`), for images without kubewin's tags.",
			},
			"scale_set_name": schema.StringAttribute{
				Optional:      true,
				Computed:      true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
				Validators:    []validator.String{stringvalidator.RegexMatches(scaleSetNameRE, "must be 1-64 letters, digits, '.', '_' or '-'")},
				Description:   "Name of the scale set. Default: the pool's name." + fixedNote,
			},
			"admin_username": schema.StringAttribute{
				Optional: true,
				Validators: []validator.String{stringvalidator.RegexMatches(adminUsernameRE, "must be 1-20 letters, digits, '.', '_' or '-', "+
					"starting with a letter"), stringvalidator.NoneOfCaseInsensitive(reservedAdmins...)},
				Description: "The VMs' administrator account. Default `kubewin`." + fixedNote,
			},
			"admin_password_wo": schema.StringAttribute{
				Optional:   true,
				WriteOnly:  true,
				Sensitive:  true,
				Validators: []validator.String{stringvalidator.LengthBetween(12, 123), windowsPasswordValidator{}},
				Description: "The administrator's password, used when the scale set is created (write-only: never in the plan or the state). " +
					"Without it the password is random and known to nobody: use it only if you need to log on to the nodes. 12 to 123 " +
					"characters. Azure takes it only when it creates the scale set: see `admin_password_wo_version`.",
			},
			"admin_password_wo_version": schema.Int64Attribute{
				Optional: true,
				Description: "A version of `admin_password_wo`, kept in the state (Terraform's convention for write-only arguments: a change of " +
					"the write-only value alone is never seen). A change of it on an existing pool is refused at plan time, since Azure " +
					"sets a scale set's password only when it creates it: to use a new password, add a pool with another name beside this " +
					"one and remove this one once its nodes are Ready.",
			},
			"zones": schema.ListAttribute{
				Optional:    true,
				ElementType: types.StringType,
				Validators:  []validator.List{listvalidator.ValueStringsAre(stringvalidator.OneOf("1", "2", "3"))},
				Description: "Availability zones of the VMs, e.g. `[\"1\", \"2\", \"3\"]`. Default: none (a regional scale set). Zones can " +
					"be added in place (to a regional scale set too): the scale set's zones change, existing nodes stay where they are and " +
					"nodes added later spread over all the zones. Removing or replacing a zone, or going back to a regional scale set, is " +
					"refused at plan time, as Azure cannot do it: add a pool beside this one instead.",
			},
			"accelerated_networking_enabled": schema.BoolAttribute{
				Optional:    true,
				Description: "Accelerated networking on the NICs. Default `false`." + surgeNote,
			},
			"os_disk_storage_account_type": schema.StringAttribute{
				Optional:    true,
				Validators:  []validator.String{stringvalidator.OneOf("Standard_LRS", "StandardSSD_LRS", "Premium_LRS", "StandardSSD_ZRS", "Premium_ZRS")},
				Description: "Storage type of the OS disk. Default: the image's." + surgeNote + keptNote,
			},
			"os_disk_size_gb": schema.Int64Attribute{
				Optional:    true,
				Validators:  []validator.Int64{int64validator.Between(30, 4095)},
				Description: "Size of the OS disk in GB, 30 to 4095. Default: the image's." + surgeNote + keptNote,
			},
			"os_disk_caching": schema.StringAttribute{
				Optional:   true,
				Validators: []validator.String{stringvalidator.OneOf("None", "ReadOnly", "ReadWrite")},
				Description: "Caching of the OS disk: `None`, `ReadOnly` or `ReadWrite`. Default: Azure's (`None` for Standard storage, " +
					"`ReadOnly` for Premium storage)." + surgeNote + keptNote,
			},
			"priority": schema.StringAttribute{
				Optional:   true,
				Validators: []validator.String{stringvalidator.OneOf("Regular", "Spot")},
				Description: "`Regular`, or `Spot` VMs (evicted — deleted — when Azure needs the capacity; the next apply replaces them). Default " +
					"`Regular`." + fixedNote,
			},
			"max_bid_price": schema.Float64Attribute{
				Optional:    true,
				Validators:  []validator.Float64{float64validator.AtLeast(-1)},
				Description: "Highest hourly price for Spot VMs; `-1` (the default) evicts for capacity only." + surgeNote,
			},
			"tags": schema.MapAttribute{
				Optional:    true,
				ElementType: types.StringType,
				Description: "Tags of the scale set (besides kubewin's `" + azure.TagPool + "` and `" + azure.TagManagedBy + "`). A change " +
					"takes effect in place: the scale set's tags are replaced, no node changes.",
			},
			"kubelet_identity_id": kubeletIdentityAttribute("the pool's machines", "The image must carry the credential provider (the "+
				"`kubewin-release` data source's `acr_credential_provider_version`, tag `"+azureimage.TagACRCredentialProvider+"`), which the "+
				"plan checks. The scale set carries this identity alone: other user-assigned identities put on it are taken off by the pool's "+
				"next scale-out or replacement (a system-assigned one is kept). Removing the attribute replaces the nodes, which then pull "+
				"without it, and takes the identity off the scale set."+surgeNote),
			"scale_set_id": schema.StringAttribute{
				Computed:      true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
				Description:   "Resource ID of the scale set.",
			},
		},
	}
}

// nodePoolBackend is a pool's backend block: what differs between the backends in the
// resource. The pool's machines are its pool.Compute.
type nodePoolBackend interface {
	// check reports the block's missing or conflicting arguments.
	check(m *nodePoolModel) diag.Diagnostics
	// modifyPlan sets the block's defaults in the plan, and checks where the plan runs.
	modifyPlan(ctx context.Context, m *nodePoolModel, plan *tfsdk.Plan) diag.Diagnostics
	// checkCluster checks that the backend's machines may join the pool's cluster.
	checkCluster(data *providerData, m *nodePoolModel) diag.Diagnostics
	// imageUnknown reports whether the pool's image is known only at apply.
	imageUnknown() bool
	// imagePath is the attribute naming the pool's image.
	imagePath() path.Path
	// image reads the pool's image.
	image(ctx context.Context, data *providerData, m *nodePoolModel) (*poolImage, diag.Diagnostics)
	// compute is the pool's machines at the backend. adminPassword is the azure backend's
	// write-only password, known only while applying.
	compute(ctx context.Context, data *providerData, m *nodePoolModel, adminPassword string) (pool.Compute, diag.Diagnostics)
	// applying records in the block what the machines' compute names, and brings the settings of
	// the backend's pool that change in place (an azure scale set's tags and zones) to the plan,
	// before the machines are reconciled.
	applying(ctx context.Context, c pool.Compute) diag.Diagnostics
	// plannedVersion is the version a cluster of the backend created in the same apply will
	// run, "" when the backend cannot tell.
	plannedVersion(data *providerData) string
	// settings are the block's arguments, kept for import.
	settings(ctx context.Context) (*localSettings, *azureSettings, diag.Diagnostics)
	// saveSettings keeps the pool's settings for import.
	saveSettings(ctx context.Context, data *providerData, s poolSettings, client kubernetes.Interface) error
	// podRouteTable is the route table pod_routes.route_table names on the backend; err says
	// why the name cannot be one.
	podRouteTable(name string) (routeBackend, error)
}

// Both blocks implement nodePoolBackend, checked here: oneBackend's run-time assertion would yield nil.
var (
	_ nodePoolBackend = (*localPoolModel)(nil)
	_ nodePoolBackend = (*azurePoolModel)(nil)
)

// backend is the backend the pool's block names; nil when it names none or both.
func (m *nodePoolModel) backend() nodePoolBackend {
	return oneBackend[nodePoolBackend](m.Local, m.Azure)
}

// check checks that simulated machines join only a cluster created as simulated unless the
// user opted in by name.
func (l *localPoolModel) check(m *nodePoolModel) diag.Diagnostics {
	var diags diag.Diagnostics
	if l.Image.IsNull() {
		diags.AddAttributeError(pathLocalImage, "Missing Image", "Set local.image to the directory `packer build` wrote with the kubewin-local builder.")
	}
	optIn := l.JoinSimulatedNodesToExistingCluster
	if m.ClusterID.IsNull() && !optIn.IsUnknown() && !optIn.ValueBool() {
		diags.AddAttributeError(path.Root("cluster_id"), "Simulated Nodes Need a Simulated Cluster",
			"The pool's machines are simulated (the local block): they run no containers. Without cluster_id they would join the cluster "+
				"of the provider's kubernetes block, a cluster kubewin did not create, whose workloads would be scheduled onto them and never run. "+
				"Set cluster_id to a kubewin_cluster (for example cluster_id = kubewin_cluster.dev.id). To test schedulers and policies against "+
				"a scratch cluster on purpose, set local."+simulatedOptIn+" = true.")
	}
	return diags
}

func (l *localPoolModel) modifyPlan(context.Context, *nodePoolModel, *tfsdk.Plan) diag.Diagnostics {
	return checkNotRemote(path.Root("local"))
}

// checkCluster checks that a local pool's cluster_id names a cluster of the local backend.
func (l *localPoolModel) checkCluster(data *providerData, m *nodePoolModel) diag.Diagnostics {
	var diags diag.Diagnostics
	if m.ClusterID.IsNull() || m.ClusterID.IsUnknown() {
		return diags
	}
	if _, err := data.local.Cluster(m.ClusterID.ValueString()); err != nil {
		diags.AddAttributeError(path.Root("cluster_id"), "Not a Cluster of the Local Backend",
			fmt.Sprintf("The pool's machines are simulated (the local block) and join only a kubewin_cluster of the local backend, "+
				"which has no cluster %q in its state directory %s. Set cluster_id to the id of a kubewin_cluster, e.g. kubewin_cluster.dev.id.",
				m.ClusterID.ValueString(), data.local.StateDir))
	}
	return diags
}

func (l *localPoolModel) imageUnknown() bool   { return l.Image.IsUnknown() }
func (l *localPoolModel) imagePath() path.Path { return pathLocalImage }

// image reads a local image directory's manifest.
func (l *localPoolModel) image(context.Context, *providerData, *nodePoolModel) (*poolImage, diag.Diagnostics) {
	var diags diag.Diagnostics
	manifest, digest, err := loadImage(l.Image.ValueString())
	if err != nil {
		diags.AddAttributeError(pathLocalImage, "Invalid Image", err.Error())
		return nil, diags
	}
	return &poolImage{manifest, digest}, diags
}

// compute is a local pool's machines; also for a pool whose cluster is gone.
func (l *localPoolModel) compute(_ context.Context, data *providerData, m *nodePoolModel, _ string) (pool.Compute, diag.Diagnostics) {
	return &local.Compute{
		Backend:    data.local,
		Pool:       m.Name.ValueString(),
		Prefix:     m.NodeNamePrefix.ValueString(),
		ImageDir:   l.Image.ValueString(),
		AnyCluster: l.JoinSimulatedNodesToExistingCluster.ValueBool(),
	}, nil
}

func (l *localPoolModel) applying(context.Context, pool.Compute) diag.Diagnostics { return nil }

// plannedVersion is the version the local control plane programs will run.
func (l *localPoolModel) plannedVersion(data *providerData) string {
	v, err := data.local.ControlPlaneVersion()
	if err != nil {
		return ""
	}
	return v
}

func (l *localPoolModel) settings(context.Context) (*localSettings, *azureSettings, diag.Diagnostics) {
	return &localSettings{Image: l.Image.ValueString(),
		JoinSimulatedNodesToExistingCluster: l.JoinSimulatedNodesToExistingCluster.ValueBoolPointer()}, nil, nil
}

// saveSettings keeps a local pool's settings in the backend's state directory.
func (l *localPoolModel) saveSettings(_ context.Context, data *providerData, s poolSettings, _ kubernetes.Interface) error {
	raw, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return data.local.SavePoolFile(s.Name, "pool.json", raw)
}

// check reports the azure block's missing arguments.
func (a *azurePoolModel) check(*nodePoolModel) diag.Diagnostics {
	var diags diag.Diagnostics
	required := []struct {
		name, what string
		v          types.String
	}{
		{"resource_group_name", "the resource group of the scale set", a.ResourceGroupName},
		{"location", "the Azure region, e.g. westeurope", a.Location},
		{"vm_size", "the VM size, e.g. Standard_D4s_v5", a.VMSize},
		{"subnet_id", "the resource ID of the nodes' subnet", a.SubnetID},
		{"image_id", "the resource ID of the image the kubewin Packer plugin published", a.ImageID},
	}
	for _, r := range required {
		if r.v.IsNull() {
			diags.AddAttributeError(pathAzure.AtName(r.name), "Missing Azure Setting", "Set azure."+r.name+" ("+r.what+"): the scale set needs it.")
		}
	}
	if !a.Priority.IsUnknown() && !a.MaxBidPrice.IsUnknown() && a.Priority.ValueString() != "Spot" && !a.MaxBidPrice.IsNull() {
		diags.AddAttributeError(pathAzure.AtName("max_bid_price"), "Spot Setting Without Spot VMs",
			"max_bid_price applies only to priority = \"Spot\": remove it, or set priority.")
	}
	return diags
}

// fixedSetting is a pool setting that an existing pool keeps: the scale set (or the pool's
// nodes) cannot take a new value, so a change is refused at plan time rather than destroying
// every node first, as a replacement of the pool would.
type fixedSetting struct {
	at  path.Path
	get func(m *nodePoolModel) attr.Value
	why string
}

// surgeNote and fixedNote end the description of a setting a change of which replaces the
// nodes surge-first, or is refused on an existing pool.
const (
	surgeNote = " A change replaces the nodes surge-first: the scale set's model takes the new value, new nodes are made with it and " +
		"are Ready before old ones are drained and deleted."
	keptNote = " Once set, it can change but not be removed: Azure keeps it in the scale set's model, so removing it is refused at " +
		"plan time."
	fixedNote = " A change on an existing pool is refused at plan time, as the pool's machines cannot take it: add a pool with another " +
		"name beside this one instead."
)

// newPoolBeside is what a refused change tells the user to do instead.
const newPoolBeside = "To use the new value, add a kubewin_windows_node_pool with another name and the new value beside this one and " +
	"apply (its nodes are Ready before anything else changes), let the workloads move to its nodes, then remove this pool (its nodes " +
	"are drained before they are deleted)."

func azureValue(get func(a *azurePoolModel) attr.Value) func(m *nodePoolModel) attr.Value {
	return func(m *nodePoolModel) attr.Value {
		if m.Azure == nil {
			return nil
		}
		return get(m.Azure)
	}
}

// fixedSettings are the settings a change of which is refused: Azure sets them only when it
// creates the scale set (the Update operation's body, VirtualMachineScaleSetUpdate, has no
// place for them, https://learn.microsoft.com/rest/api/compute/virtual-machine-scale-sets/update),
// or they name the scale set itself.
var fixedSettings = []fixedSetting{
	{path.Root("node_name_prefix"), func(m *nodePoolModel) attr.Value { return m.NodeNamePrefix },
		"a node's name is its machine's computer name, which a scale set (osProfile.computerNamePrefix) and the local backend set only when " +
			"they create the pool"},
	{pathAzure.AtName("resource_group_name"), azureValue(func(a *azurePoolModel) attr.Value { return a.ResourceGroupName }),
		"the scale set is a resource of its resource group; a pool does not move its nodes to another scale set"},
	{pathAzure.AtName("location"), azureValue(func(a *azurePoolModel) attr.Value { return a.Location }),
		"a scale set's region is fixed when Azure creates it"},
	{pathAzure.AtName("scale_set_name"), azureValue(func(a *azurePoolModel) attr.Value { return a.ScaleSetName }),
		"the name names the scale set; a pool does not move its nodes to another scale set"},
	{pathAzure.AtName("subnet_id"), azureValue(func(a *azurePoolModel) attr.Value { return a.SubnetID }),
		"the pool's nodes keep the subnet they were created in (Azure moves a scale set's NICs only within their virtual network, and " +
			"kubewin does not move them)"},
	{pathAzure.AtName("admin_username"), azureValue(func(a *azurePoolModel) attr.Value { return a.AdminUsername }),
		"Azure sets a scale set's administrator only when it creates it (the update's osProfile has no adminUsername)"},
	{pathAzure.AtName("priority"), azureValue(func(a *azurePoolModel) attr.Value { return a.Priority }),
		"Azure sets a scale set's priority only when it creates it (the update's virtualMachineProfile has no priority)"},
	{pathAzure.AtName("admin_password_wo_version"), azureValue(func(a *azurePoolModel) attr.Value { return a.AdminPasswordWOVersion }),
		"Azure sets a scale set's administrator password only when it creates it (the update's osProfile has no adminPassword), so the " +
			"new password would be silently ignored"},
}

// keptSettings are the settings that may change but not go back to unset: the scale set's model
// keeps a value once set, as the Update body has no way to remove it (its OS disk settings are
// typed string, integer and object, never null, in the ARM template schema of Microsoft.Compute
// 2024-11-01, and Compute keeps a setting a PATCH leaves out).
var keptSettings = []fixedSetting{
	{pathAzure.AtName("os_disk_storage_account_type"), azureValue(func(a *azurePoolModel) attr.Value { return a.OSDiskStorageAccountType }),
		"the scale set's model keeps the OS disk's storage type once set: Azure has no way to return it to the image's"},
	{pathAzure.AtName("os_disk_size_gb"), azureValue(func(a *azurePoolModel) attr.Value { return a.OSDiskSizeGB }),
		"the scale set's model keeps the OS disk's size once set: Azure has no way to return it to the image's"},
	{pathAzure.AtName("os_disk_caching"), azureValue(func(a *azurePoolModel) attr.Value { return a.OSDiskCaching }),
		"the scale set's model keeps the OS disk's caching once set: Azure has no way to return it to its default"},
}

// checkFixedSettings refuses, on an existing pool that is not being replaced anyway, a change of
// a fixed setting, a kept setting going back to unset, and zones that are not a superset of the scale set's: zones can be added to a
// scale set but never removed or replaced, nor can a zonal scale set become regional
// ("Update scale set to add availability zones" in
// https://learn.microsoft.com/azure/virtual-machine-scale-sets/virtual-machine-scale-sets-use-availability-zones).
func checkFixedSettings(ctx context.Context, state tfsdk.State, m *nodePoolModel, replaced bool) diag.Diagnostics {
	var diags diag.Diagnostics
	if state.Raw.IsNull() || replaced {
		return diags
	}
	var old nodePoolModel
	if diags.Append(state.Get(ctx, &old)...); diags.HasError() {
		return diags
	}
	for _, f := range fixedSettings {
		was, now := f.get(&old), f.get(m)
		if was == nil || now == nil || now.IsUnknown() || was.Equal(now) {
			continue
		}
		diags.AddAttributeError(f.at, "Setting Cannot Change on an Existing Pool", fmt.Sprintf("%s changes from %s to %s, but %s. "+
			"Keep %s = %s. %s", f.at, was, now, f.why, f.at, was, newPoolBeside))
	}
	for _, f := range keptSettings {
		if was, now := f.get(&old), f.get(m); was != nil && now != nil && !was.IsNull() && now.IsNull() {
			diags.AddAttributeError(f.at, "Setting Cannot Be Removed", fmt.Sprintf("%s was %s and is now unset, but %s. Keep %s = %s, "+
				"or set the value the nodes should have (a change replaces the nodes surge-first).", f.at, was, f.why, f.at, was))
		}
	}
	if old.Azure == nil || m.Azure == nil || m.Azure.Zones.IsUnknown() {
		return diags
	}
	var was, now []string
	diags.Append(old.Azure.Zones.ElementsAs(ctx, &was, false)...)
	diags.Append(m.Azure.Zones.ElementsAs(ctx, &now, false)...)
	var removed []string
	for _, z := range was {
		if !slices.Contains(now, z) {
			removed = append(removed, z)
		}
	}
	if len(removed) > 0 {
		diags.AddAttributeError(pathAzure.AtName("zones"), "Zones Can Only Be Added", fmt.Sprintf("azure.zones drops zones %s of %s, but "+
			"Azure can only add zones to a scale set: it cannot remove or replace them, nor make a zonal scale set regional. Keep every "+
			"zone of %s in azure.zones (adding zones is done in place: nodes added later spread over all of them). %s",
			`"`+strings.Join(removed, `", "`)+`"`, old.Azure.Zones, old.Azure.Zones, newPoolBeside))
	}
	return diags
}

// modifyPlan names the scale set after the pool by default.
func (a *azurePoolModel) modifyPlan(ctx context.Context, m *nodePoolModel, plan *tfsdk.Plan) diag.Diagnostics {
	if a.ScaleSetName.IsUnknown() && !m.Name.IsUnknown() {
		return plan.SetAttribute(ctx, pathAzure.AtName("scale_set_name"), m.Name)
	}
	return nil
}

func (a *azurePoolModel) checkCluster(*providerData, *nodePoolModel) diag.Diagnostics { return nil }

// checkOutbound warns at plan when the pool's subnet gives its machines no way out of the virtual
// network (azure.SubnetOutbound): the scale set's NICs have no public address and are in no load
// balancer's pool. The nodes still join an API server they reach inside the network (the image holds
// everything a first boot needs), so it is a warning, not an error.
func (a *azurePoolModel) checkOutbound(ctx context.Context, data *providerData) diag.Diagnostics {
	var diags diag.Diagnostics
	if a.SubnetID.IsUnknown() || a.SubnetID.IsNull() {
		return diags
	}
	c, err := data.azure(ctx)
	if err != nil {
		return diags // reported where the pool needs Azure
	}
	err = c.SubnetOutbound(ctx, a.SubnetID.ValueString())
	switch {
	case errors.Is(err, azure.ErrNoOutbound):
		diags.AddAttributeWarning(pathAzure.AtName("subnet_id"), "The Pool's Subnet Has No Outbound Path", err.Error()+
			".\n\nThe pool's nodes can reach only addresses inside the virtual network (and networks peered or connected to it): their join "+
			"fails if the cluster's API server is elsewhere, and their pods cannot pull images from registries on the Internet.")
	case err != nil:
		diags.AddAttributeWarning(pathAzure.AtName("subnet_id"), "Cannot Check the Pool's Subnet", err.Error())
	}
	return diags
}

func (a *azurePoolModel) imageUnknown() bool {
	return a.ImageID.IsUnknown() || a.ImageManifest.IsUnknown()
}

func (a *azurePoolModel) imagePath() path.Path { return pathAzure.AtName("image_id") }

func (a *azurePoolModel) applying(ctx context.Context, c pool.Compute) diag.Diagnostics {
	var diags diag.Diagnostics
	if ss, ok := c.(*azure.ScaleSet); ok {
		a.ScaleSetID = types.StringValue(ss.ID())
		if err := ss.Sync(ctx); err != nil {
			diags.AddAttributeError(pathAzure, "Cannot Update the Scale Set", fmt.Sprintf("%s.\n\nThe pool's nodes are unchanged: fix the "+
				"cause and apply again.", err))
		}
	}
	return diags
}

func (a *azurePoolModel) plannedVersion(*providerData) string { return "" }

// settings are the azure block's arguments (never the password).
func (a *azurePoolModel) settings(ctx context.Context) (*localSettings, *azureSettings, diag.Diagnostics) {
	s := &azureSettings{
		ResourceGroupName:            a.ResourceGroupName.ValueString(),
		Location:                     a.Location.ValueString(),
		VMSize:                       a.VMSize.ValueString(),
		SubnetID:                     a.SubnetID.ValueString(),
		ImageID:                      a.ImageID.ValueString(),
		ScaleSetName:                 a.ScaleSetName.ValueString(),
		ScaleSetID:                   a.ScaleSetID.ValueString(),
		ImageManifest:                a.ImageManifest.ValueStringPointer(),
		AdminUsername:                a.AdminUsername.ValueStringPointer(),
		AdminPasswordWOVersion:       a.AdminPasswordWOVersion.ValueInt64Pointer(),
		OSDiskStorageAccountType:     a.OSDiskStorageAccountType.ValueStringPointer(),
		OSDiskCaching:                a.OSDiskCaching.ValueStringPointer(),
		Priority:                     a.Priority.ValueStringPointer(),
		AcceleratedNetworkingEnabled: a.AcceleratedNetworkingEnabled.ValueBoolPointer(),
		OSDiskSizeGB:                 a.OSDiskSizeGB.ValueInt64Pointer(),
		MaxBidPrice:                  a.MaxBidPrice.ValueFloat64Pointer(),
		KubeletIdentityID:            a.KubeletIdentityID.ValueStringPointer(),
	}
	var diags diag.Diagnostics
	s.Tags, diags = stringMapOf(ctx, a.Tags)
	if !a.Zones.IsNull() {
		diags.Append(a.Zones.ElementsAs(ctx, &s.Zones, false)...)
	}
	return nil, s, diags
}

// saveSettings keeps an azure pool's settings in its cluster.
func (a *azurePoolModel) saveSettings(ctx context.Context, _ *providerData, s poolSettings, client kubernetes.Interface) error {
	return saveClusterSettings(ctx, client, s)
}

// poolImage is what a pool knows of its image: the part of the manifest a NodeConfig needs,
// and a digest that changes whenever the machines' image or settings do.
type poolImage struct {
	manifest *v1alpha1.ImageManifest
	digest   string
}

// image reads an Azure image's tags (or the manifest the configuration gives).
func (a *azurePoolModel) image(ctx context.Context, data *providerData, m *nodePoolModel) (*poolImage, diag.Diagnostics) {
	var diags diag.Diagnostics
	var manifest *v1alpha1.ImageManifest
	var err error
	if !a.ImageManifest.IsNull() {
		manifest, err = api.LoadImageManifest([]byte(a.ImageManifest.ValueString()))
		if err != nil {
			diags.AddAttributeError(pathAzure.AtName("image_manifest"), "Invalid Image Manifest", err.Error())
			return nil, diags
		}
	} else {
		c, err := data.azure(ctx)
		if err != nil {
			diags.AddAttributeError(pathAzure, "Cannot Reach Azure", err.Error())
			return nil, diags
		}
		tags, err := c.ImageTags(ctx, a.ImageID.ValueString())
		if err == nil {
			manifest, err = azureimage.Manifest(a.ImageID.ValueString(), tags)
		}
		if err != nil {
			diags.AddAttributeError(pathAzure.AtName("image_id"), "Invalid Image", err.Error())
			return nil, diags
		}
	}
	machines, d := azureMachines(ctx, m, manifest)
	diags.Append(d...)
	return &poolImage{manifest, machines.Digest()}, diags
}

// checkKubeletIdentity checks, when the pool's kubelets pull from Azure Container Registry as
// an identity, that the image carries the credential provider, that the identity exists and
// that the provider's credential may assign it.
func (a *azurePoolModel) checkKubeletIdentity(ctx context.Context, data *providerData, manifest *v1alpha1.ImageManifest) diag.Diagnostics {
	var diags diag.Diagnostics
	at := pathAzure.AtName("kubelet_identity_id")
	if a.KubeletIdentityID.IsNull() || a.KubeletIdentityID.IsUnknown() {
		return diags
	}
	if manifest.ACRCredentialProvider == "" {
		diags.AddAttributeError(at, "Image Cannot Pull From Azure Container Registry by Identity", fmt.Sprintf(
			"The pool's image %s carries no acr-credential-provider (no %s tag), which the kubelet pulls from Azure Container Registry "+
				"as the identity with. Bake the image with the kubewin-release data source's acr_credential_provider_version and "+
				"publish it with the data source's azure_tags, or remove kubelet_identity_id and give pods an image pull secret.",
			a.ImageID.ValueString(), azureimage.TagACRCredentialProvider))
		return diags
	}
	return checkKubeletIdentity(ctx, data, at, a.KubeletIdentityID.ValueString())
}

// checkNestedVirtualization checks, for an image baked with Hyper-V isolation, that Azure
// documents nested virtualization for the pool's VM size (azure.NestedVirtualizationOf): a
// size documented without it is an error; a size whose series kubewin has no record of is a
// warning, for the user to check on the series' page.
func checkNestedVirtualization(vmSize types.String) diag.Diagnostics {
	var diags diag.Diagnostics
	if vmSize.IsUnknown() || vmSize.IsNull() {
		return diags
	}
	size := vmSize.ValueString()
	const sizes = "https://learn.microsoft.com/azure/virtual-machines/sizes/overview"
	switch azure.NestedVirtualizationOf(size) {
	case azure.NestedNotSupported:
		diags.AddAttributeError(pathAzure.AtName("vm_size"), "VM Size Cannot Run Hyper-V Isolated Containers", fmt.Sprintf(
			"The pool's image was baked with Hyper-V isolation, which needs nested virtualization on a virtual machine, and Azure documents "+
				"none for %s (series %s). Use a size whose series supports it, such as Standard_D4s_v5 or Standard_D4as_v5 (see the "+
				"\"Nested Virtualization\" line of each series at %s), or a pool image baked without hyperv_isolation.", size,
			azure.SizeSeries(size), sizes))
	case azure.NestedUnknown:
		diags.AddAttributeWarning(pathAzure.AtName("vm_size"), "Nested Virtualization Not Checked", fmt.Sprintf(
			"The pool's image was baked with Hyper-V isolation, which needs nested virtualization, and kubewin has no record of whether "+
				"%s supports it. Check the \"Nested Virtualization\" line of its series at %s: on a size without it, the nodes join but "+
				"every pod of RuntimeClass windows-hyperv fails to start.", size, sizes))
	}
	return diags
}

// azureMachines is the scale set's machine settings.
func azureMachines(ctx context.Context, m *nodePoolModel, manifest *v1alpha1.ImageManifest) (azure.Machines, diag.Diagnostics) {
	a := m.Azure
	tags, diags := stringMapOf(ctx, a.Tags)
	var zones []string
	if !a.Zones.IsNull() && !a.Zones.IsUnknown() {
		diags.Append(a.Zones.ElementsAs(ctx, &zones, false)...)
	}
	mode := v1alpha1.NetworkMode(m.NetworkMode.ValueString())
	machines := azure.Machines{
		ResourceGroup: a.ResourceGroupName.ValueString(),
		Location:      a.Location.ValueString(),
		SubnetID:      a.SubnetID.ValueString(),
		VMSize:        a.VMSize.ValueString(),
		ImageID:       a.ImageID.ValueString(),
		AdminUsername: "kubewin",
		Zones:         zones,
		// Routed modes deliver pod traffic to the node's NIC, addressed to pods: it must forward.
		IPForwarding:          mode == v1alpha1.NetworkModeL2Bridge || mode == v1alpha1.NetworkModeHostGateway,
		AcceleratedNetworking: a.AcceleratedNetworkingEnabled.ValueBool(),
		OSDisk: azure.OSDisk{StorageAccountType: a.OSDiskStorageAccountType.ValueString(), Caching: a.OSDiskCaching.ValueString(),
			SizeGB: int32(a.OSDiskSizeGB.ValueInt64())},
		Spot:              a.Priority.ValueString() == "Spot",
		MaxBidPrice:       -1,
		Tags:              tags,
		KubeletIdentityID: a.KubeletIdentityID.ValueString(),
	}
	if !a.AdminUsername.IsNull() {
		machines.AdminUsername = a.AdminUsername.ValueString()
	}
	if !a.MaxBidPrice.IsNull() {
		machines.MaxBidPrice = a.MaxBidPrice.ValueFloat64()
	}
	if manifest != nil && manifest.Runtime.Name == "" {
		diags.AddAttributeError(pathAzure.AtName("image_id"), "Invalid Image", fmt.Sprintf("The image %s names no container runtime. "+
			"Give it the %s tag (containerd or docker; the kubewin Packer templates set it when they publish), or set azure.image_manifest "+
			"to the manifest it was baked with (file(\"output/kubewin-manifest.json\")).", a.ImageID.ValueString(), azureimage.TagRuntime))
	}
	return machines, diags
}

// compute is the pool's scale set.
func (a *azurePoolModel) compute(ctx context.Context, data *providerData, m *nodePoolModel, adminPassword string) (pool.Compute, diag.Diagnostics) {
	c, err := data.azure(ctx)
	var diags diag.Diagnostics
	if err != nil {
		diags.AddAttributeError(pathAzure, "Cannot Reach Azure", err.Error())
		return nil, diags
	}
	machines, d := azureMachines(ctx, m, nil)
	diags.Append(d...)
	if m.ClusterID.ValueString() != "" {
		machines.Tags = withTag(machines.Tags, tagClusterID, m.ClusterID.ValueString())
	}
	return &azure.ScaleSet{
		Client:             c,
		Name:               a.ScaleSetName.ValueString(),
		Pool:               m.Name.ValueString(),
		ComputerNamePrefix: m.NodeNamePrefix.ValueString(),
		Machines:           machines,
		AdminPassword:      adminPassword,
	}, diags
}

// tagClusterID names, on a pool's scale set, the kubewin_cluster it joins, for import.
const tagClusterID = "kubewin.io/cluster-id"

func withTag(tags map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for tk, tv := range tags {
		out[tk] = tv
	}
	return out
}

// The settings of an azure pool as last applied are kept in the cluster, next to its nodes'
// reports, for import.
func settingsObjectName(pool string) string { return "kubewin-pool-" + pool }

func saveClusterSettings(ctx context.Context, c kubernetes.Interface, s poolSettings) error {
	data, err := json.Marshal(s)
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: settingsObjectName(s.Name), Namespace: nodestatus.Namespace,
			Labels: map[string]string{nodeaccess.PoolLabel: s.Name}},
		Data: map[string]string{"settings.json": string(data)},
	}
	cms := c.CoreV1().ConfigMaps(nodestatus.Namespace)
	_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	}
	return err
}

func loadClusterSettings(ctx context.Context, c kubernetes.Interface, pool string) (poolSettings, error) {
	var s poolSettings
	cm, err := c.CoreV1().ConfigMaps(nodestatus.Namespace).Get(ctx, settingsObjectName(pool), metav1.GetOptions{})
	if err != nil {
		return s, fmt.Errorf("read the settings of pool %s from the cluster (%s/%s): %w", pool, nodestatus.Namespace, settingsObjectName(pool), err)
	}
	return s, json.Unmarshal([]byte(cm.Data["settings.json"]), &s)
}

// windowsPasswordValidator applies Azure's complexity rule for Windows administrator passwords at
// plan time, as azurerm's validatePasswordComplexityWindows does: at least three of lower case,
// upper case, digits and other characters, no control characters, and none of the passwords
// Azure refuses outright (the VM FAQ's list, which Compute answers with InvalidParameter).
type windowsPasswordValidator struct{}

func (windowsPasswordValidator) Description(context.Context) string {
	return "must have at least three of: lower case letters, upper case letters, digits, other characters; no control characters"
}

func (v windowsPasswordValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

// refusedPasswords are passwords Azure refuses whatever their complexity.
var refusedPasswords = []string{"abc@123", "P@$$w0rd", "P@ssw0rd", "P@ssword123", "Pa$$word", "pass@word1", "Password!", "Password1",
	"Password22", "iloveyou!"}

func (windowsPasswordValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	pw := req.ConfigValue.ValueString()
	var lower, upper, digit, other bool
	for _, r := range pw {
		switch {
		case unicode.IsControl(r):
			resp.Diagnostics.AddAttributeError(req.Path, "Invalid Administrator Password",
				fmt.Sprintf("%s contains a control character, which Azure refuses: use printable characters only.", req.Path))
			return
		case r >= 'a' && r <= 'z':
			lower = true
		case r >= 'A' && r <= 'Z':
			upper = true
		case r >= '0' && r <= '9':
			digit = true
		default:
			other = true
		}
	}
	classes := 0
	for _, ok := range []bool{lower, upper, digit, other} {
		if ok {
			classes++
		}
	}
	switch {
	case classes < 3:
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid Administrator Password", fmt.Sprintf("%s has %d of the 4 kinds of characters "+
			"Azure counts (lower case, upper case, digits, others such as !@#$%%); Windows VMs need at least 3: add the missing kinds.", req.Path, classes))
	case slices.Contains(refusedPasswords, pw):
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid Administrator Password",
			fmt.Sprintf("%s is one of the common passwords Azure refuses: choose another.", req.Path))
	}
}
