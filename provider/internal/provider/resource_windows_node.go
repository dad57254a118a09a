package provider

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"

	"github.com/kubewin/kubewin/internal/api"
	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/guest"
	"github.com/kubewin/kubewin/internal/remote"
	"github.com/kubewin/kubewin/provider/internal/servers"
)

var (
	_ resource.Resource                   = (*windowsNodeResource)(nil)
	_ resource.ResourceWithConfigure      = (*windowsNodeResource)(nil)
	_ resource.ResourceWithValidateConfig = (*windowsNodeResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*windowsNodeResource)(nil)
)

func newWindowsNodeResource() resource.Resource { return &windowsNodeResource{} }

// windowsNodeResource is an existing Windows server joined as a node, over WinRM or SSH.
type windowsNodeResource struct{ data *providerData }

type windowsNodeModel struct {
	Host             types.String    `tfsdk:"host"`
	ClusterID        types.String    `tfsdk:"cluster_id"`
	NodeName         types.String    `tfsdk:"node_name"`
	InterfaceName    types.String    `tfsdk:"interface_name"`
	WinRM            *winrmModel     `tfsdk:"winrm"`
	SSH              *sshModel       `tfsdk:"ssh"`
	Install          *installModel   `tfsdk:"install"`
	Simulated        *simulatedModel `tfsdk:"simulated"`
	NetworkMode      types.String    `tfsdk:"network_mode"`
	Labels           types.Map       `tfsdk:"labels"`
	Taints           []taintModel    `tfsdk:"taints"`
	MaxPods          types.Int64     `tfsdk:"max_pods"`
	KubeletExtraArgs types.Map       `tfsdk:"kubelet_extra_args"`
	memorySettings
	TokenTTL      types.String   `tfsdk:"token_ttl"`
	Drain         types.Object   `tfsdk:"drain"`
	Timeouts      timeouts.Value `tfsdk:"timeouts"`
	ID            types.String   `tfsdk:"id"`
	Ready         types.Bool     `tfsdk:"ready"`
	WindowsBuild  types.Int64    `tfsdk:"windows_build"`
	KubernetesVer types.String   `tfsdk:"kubernetes_version"`
	Runtime       types.String   `tfsdk:"runtime"`
}

type winrmModel struct {
	Port                  types.Int64  `tfsdk:"port"`
	User                  types.String `tfsdk:"user"`
	Password              types.String `tfsdk:"password_wo"`
	PasswordEnv           types.String `tfsdk:"password_env"`
	Auth                  types.String `tfsdk:"auth"`
	CACertificate         types.String `tfsdk:"ca_certificate"`
	TLSServerName         types.String `tfsdk:"tls_server_name"`
	InsecureSkipTLSVerify types.Bool   `tfsdk:"insecure_skip_tls_verify"`
	InsecureUseHTTP       types.Bool   `tfsdk:"insecure_use_http"`
}

type sshModel struct {
	Port                  types.Int64  `tfsdk:"port"`
	User                  types.String `tfsdk:"user"`
	PrivateKey            types.String `tfsdk:"private_key_wo"`
	PrivateKeyEnv         types.String `tfsdk:"private_key_env"`
	HostKey               types.String `tfsdk:"host_key"`
	InsecureIgnoreHostKey types.Bool   `tfsdk:"insecure_ignore_host_key"`
}

type installModel struct {
	Release  types.String `tfsdk:"release"`
	Transfer types.String `tfsdk:"transfer"`
	Mirror   types.String `tfsdk:"mirror"`
	Parallel types.Int64  `tfsdk:"parallel"`
	CacheDir types.String `tfsdk:"cache_dir"`
}

type simulatedModel struct {
	Root                                types.String `tfsdk:"root"`
	Nodeboot                            types.String `tfsdk:"nodeboot"`
	JoinSimulatedNodesToExistingCluster types.Bool   `tfsdk:"join_simulated_nodes_to_existing_cluster"`
}

var (
	pathWinRM    = path.Root("winrm")
	pathSSH      = path.Root("ssh")
	pathInstall  = path.Root("install")
	pathSimulate = path.Root("simulated")
)

func (r *windowsNodeResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_windows_node"
}

func (r *windowsNodeResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	optional := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{
			Optional:    true,
			Description: desc,
		}
	}
	flag := func(desc string) schema.BoolAttribute {
		return schema.BoolAttribute{
			Optional:    true,
			Description: desc,
		}
	}
	computed := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	resp.Schema = schema.Schema{
		Description: "An existing Windows Server (on-premises, vSphere, another cloud) joined to a cluster as a node, reached over WinRM or SSH: " +
			"the original guides' manual deployment as one resource.\n\n" +
			"Creating it checks the server first and reports every problem at once, changing nothing: a supported Windows build " +
			"(Windows Server 2019, 2022 or 2025), the Containers feature and no pending restart, the kubelet's ports free, no other Kubernetes " +
			"installation. It then records what the server holds under kubewin's directories, installs the payload (the `install` block: " +
			"the same installation as the Packer provisioner's, ending in `nodeboot bake`) or uses the kubewin image the server was created " +
			"from, writes a NodeConfig with a bootstrap token of the node's own (owner-only, deleted once the node is Ready), runs " +
			"`nodeboot join` with its `[phase]` lines in the provider's log, starts nodeboot's service and waits until the node is Ready. A " +
			"failed join names the phase and the error code, read over the same connection when the node never reached the cluster.\n\n" +
			"Destroying it cordons and drains the node (PodDisruptionBudgets hold), runs `nodeboot reset`, removes what the resource " +
			"installed and every file that appeared under kubewin's directories since the join began, then deletes the Node: the server " +
			"is left as it was. A node that is gone or NotReady shows as a replacement on the next plan.\n\n" +
			"Secrets: `winrm.password_wo` and `ssh.private_key_wo` are write-only (Terraform 1.11 or later, OpenTofu 1.11 or later): never " +
			"in the plan or state. Terraform gives a resource no configuration when it destroys it, so a destroy reads the secret from the " +
			"environment variable `winrm.password_env` (default `$" + defaultPasswordEnv + "`) or `ssh.private_key_env` (default `$" +
			defaultPrivateKeyEnv + "`), which also stands in for the write-only attribute when that is not set.\n\n" +
			"There is no import: a destroy removes what the resource recorded and installed when it joined the node, which a node joined " +
			"otherwise lacks." + verifiedServers,
		Blocks: map[string]schema.Block{
			"winrm": schema.SingleNestedBlock{
				Description: "Reach the server over WinRM: HTTPS with the certificate checked, unless an insecure_ option says otherwise. Set this block or " +
					"`ssh`.",
				Attributes: map[string]schema.Attribute{
					"port": schema.Int64Attribute{
						Optional:    true,
						Validators:  []validator.Int64{int64validator.Between(1, 65535)},
						Description: fmt.Sprintf("WinRM port. Default `%d`, or `%d` with `insecure_use_http`.", winrmHTTPSPort, winrmHTTPPort),
					},
					"user": optional(requiredInBlock + "User to log in as, an administrator of the server: `Administrator`, `SERVER\\user` or `DOMAIN\\user`."),
					"password_wo": schema.StringAttribute{
						Optional:  true,
						Sensitive: true,
						WriteOnly: true,
						Description: "The user's password, write-only: never in the plan or state. Default: the environment variable named by `password_env`, which " +
							"a destroy always reads.",
					},
					"password_env": optional("Environment variable holding the password, for a destroy (Terraform gives it no configuration) and when " +
						"`password_wo` is not set. Default `" + defaultPasswordEnv + "`."),
					"auth": schema.StringAttribute{
						Optional:   true,
						Validators: []validator.String{stringvalidator.OneOf(remote.AuthNTLM, remote.AuthBasic)},
						Description: "`ntlm` (default: WinRM's Negotiate for local accounts, the password never sent) or `basic` (the server must allow Basic " +
							"authentication; refused over plain HTTP).",
					},
					"ca_certificate": optional("PEM certificates of the CAs that may sign the server's certificate. Default: the system's trusted CAs."),
					"tls_server_name": optional("Name the server's certificate must carry, when it is not `host` (connecting by IP address to a " +
						"certificate with a DNS name)."),
					"insecure_skip_tls_verify": flag("Accept any certificate from the server, so that anyone on the network path can pose as it and read the " +
						"password and bootstrap token. For test networks only."),
					"insecure_use_http": flag("Use plain HTTP (`winrm quickconfig` without `-transport:https`): nothing is encrypted, the bootstrap token " +
						"travels in the clear. Basic authentication is refused over it. For test networks only."),
				},
			},
			"ssh": schema.SingleNestedBlock{
				Description: "Reach the server over SSH (Windows Server's OpenSSH) with a key, the server's host key checked. Set this block or `winrm`.",
				Attributes: map[string]schema.Attribute{
					"port": schema.Int64Attribute{
						Optional:    true,
						Validators:  []validator.Int64{int64validator.Between(1, 65535)},
						Description: fmt.Sprintf("SSH port. Default `%d`.", sshPort),
					},
					"user": optional(requiredInBlock + "User to log in as, an administrator of the server."),
					"private_key_wo": schema.StringAttribute{
						Optional:  true,
						Sensitive: true,
						WriteOnly: true,
						Description: "The user's private key (PEM or OpenSSH format), write-only: never in the plan or state. Default: the environment variable " +
							"named by `private_key_env`, which a destroy always reads.",
					},
					"private_key_env": optional("Environment variable holding the private key, for a destroy (Terraform gives it no configuration) and " +
						"when `private_key_wo` is not set. Default `" + defaultPrivateKeyEnv + "`."),
					"host_key": optional("The server's public host key, as in known_hosts without the host name (`ssh-ed25519 AAAA...`; " +
						"`ssh-keyscan -t ed25519 <host>` prints it). Required unless `insecure_ignore_host_key`."),
					"insecure_ignore_host_key": flag("Accept any host key, so that anyone on the network path can pose as the server. For test networks only."),
				},
			},
			"install": schema.SingleNestedBlock{
				Description: "Install the kubewin payload on the server, as the Packer provisioner bakes an image: every file verified by its sha256, then " +
					"`nodeboot bake`. Destroying the node removes it again. Without this block the server must have been created from a kubewin image.",
				Attributes: map[string]schema.Attribute{
					"release": optional(requiredInBlock + "The bake plan: an image manifest in JSON whose files carry their source URLs, as the " +
						"`kubewin-release` Packer data source's `manifest` resolves it. Its Windows build must be the server's."),
					"transfer": schema.StringAttribute{
						Optional:   true,
						Validators: []validator.String{stringvalidator.OneOf(guest.GuestFetch, guest.HostCache)},
						Description: "`guest-fetch` (default: the server downloads every file itself, from its source or `mirror`) or `host-cache` (the Terraform " +
							"host downloads into `cache_dir` and uploads: for servers without Internet access).",
					},
					"mirror": optional("With `guest-fetch`, fetch every file from `<mirror>/<path>` instead of its source URL."),
					"parallel": schema.Int64Attribute{
						Optional:    true,
						Validators:  []validator.Int64{int64validator.Between(1, 64)},
						Description: "With `guest-fetch`, how many files the server downloads at once. Default `4`.",
					},
					"cache_dir": optional("With `host-cache`, the cache directory. Default: `kubewin/terraform` in the user's cache directory."),
				},
			},
			"simulated": schema.SingleNestedBlock{
				Description: "The server is a **simulated** Windows machine (nodeboot's sim platform, as the local backend's) in a directory of a POSIX host " +
					"reached over `ssh`: " +
					"for development and tests. It runs no containers, so it joins only a `kubewin_cluster` of the local backend unless `" + simulatedOptIn + "` " +
					"is set.",
				Attributes: map[string]schema.Attribute{
					"root": optional(requiredInBlock + "The simulated machine's directory on the host: its system drive, with its description in " +
						"`sim/machine.json`."),
					"nodeboot": optional(requiredInBlock + "The nodeboot binary on the host that runs the simulated machine."),
					simulatedOptIn: flag("Let the simulated node join the cluster of the provider's `kubernetes` block, a cluster kubewin did not create, whose " +
						"scheduler will place pods on it that never run. For scratch clusters only."),
				},
			},
		},
		Attributes: attributes(nodeAttributes("the node's own, minted when it joins"), map[string]schema.Attribute{
			"host": schema.StringAttribute{
				Required:    true,
				Validators:  []validator.String{stringvalidator.LengthAtLeast(1)},
				Description: "The server's address: a DNS name or an IP address. Changing it replaces the node.",
			},
			"cluster_id": schema.StringAttribute{
				Optional:    true,
				Description: "The `id` of the `kubewin_cluster` the node joins. Without it the node joins the cluster of the provider's `kubernetes` block.",
			},
			"node_name": schema.StringAttribute{
				Optional:      true,
				Computed:      true,
				PlanModifiers: computed,
				Description:   "The Node's name, a DNS label. Default: the server's computer name, lower-cased.",
			},
			"interface_name": schema.StringAttribute{
				Optional: true,
				Description: "The server's network adapter the pod network binds to and the node's address is taken from (`Get-NetAdapter` lists them). " +
					"Default `" + v1alpha1.DefaultInterfaceName + "`.",
			},
			"timeouts": timeoutsAttribute(ctx, "until the node is Ready or removed", 30*time.Minute, 0, 30*time.Minute),
			"id": schema.StringAttribute{
				Computed:      true,
				PlanModifiers: computed,
				Description:   "The node's name.",
			},
			"ready": schema.BoolAttribute{
				Computed:    true,
				Description: "Whether the Node is Ready: false (a replacement on the next plan) when it is gone or NotReady.",
			},
			"windows_build": schema.Int64Attribute{
				Computed:    true,
				Description: "The server's Windows build.",
			},
			"kubernetes_version": schema.StringAttribute{
				Computed:      true,
				PlanModifiers: computed,
				Description:   "The Kubernetes version of the node's kubelet (the image's).",
			},
			"runtime": schema.StringAttribute{
				Computed:      true,
				PlanModifiers: computed,
				Description:   "The node's container runtime.",
			},
		}),
	}
}

func (r *windowsNodeResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = configuredData(req.ProviderData, &resp.Diagnostics)
}

func known(v interface {
	IsNull() bool
	IsUnknown() bool
}) bool {
	return !v.IsNull() && !v.IsUnknown()
}

func (r *windowsNodeResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m windowsNodeModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(m.check()...)
}

// check reports every mistake in the configuration against its attribute.
func (m *windowsNodeModel) check() diag.Diagnostics {
	var diags diag.Diagnostics
	diags.Append(m.checkTransport()...)
	if in := m.Install; in != nil {
		switch {
		case in.Release.IsNull():
			diags.AddAttributeError(pathInstall.AtName("release"), "Missing Release", "Set install.release to a bake plan: the manifest a kubewin-release "+
				"data source resolves (an image manifest in JSON).")
		case known(in.Release):
			if _, err := api.LoadImageManifest([]byte(in.Release.ValueString())); err != nil {
				diags.AddAttributeError(pathInstall.AtName("release"), "Invalid Release", fmt.Sprintf("install.release is not a kubewin bake plan: %s.", err))
			}
		}
		if known(in.Mirror) && in.Transfer.ValueString() == guest.HostCache {
			diags.AddAttributeError(pathInstall.AtName("mirror"), "Mirror Without Guest Fetch", "mirror is where the server fetches files (transfer = "+
				"\"guest-fetch\"); with host-cache, point the release's URLs at the mirror instead.")
		}
	}
	if sim := m.Simulated; sim != nil {
		if sim.Root.IsNull() || sim.Nodeboot.IsNull() {
			diags.AddAttributeError(pathSimulate, "Incomplete Simulated Machine", "Set simulated.root (the machine's directory) and simulated.nodeboot (the "+
				"nodeboot binary that runs it).")
		}
		if m.WinRM != nil {
			diags.AddAttributeError(pathSimulate, "Simulated Machine Over WinRM", "A simulated machine lives on a POSIX host: reach it with the ssh block.")
		}
		if optIn := sim.JoinSimulatedNodesToExistingCluster; m.ClusterID.IsNull() && !optIn.IsUnknown() && !optIn.ValueBool() {
			diags.AddAttributeError(path.Root("cluster_id"), "Simulated Node Needs a Simulated Cluster",
				"The server is simulated (the simulated block): it runs no containers. Without cluster_id it would join the cluster of the provider's "+
					"kubernetes block, whose workloads would be scheduled onto it and never run. Set cluster_id to a kubewin_cluster, or, for a scratch "+
					"cluster on purpose, simulated."+simulatedOptIn+" = true.")
		}
	}
	if known(m.NodeName) {
		diags.Append(checkNodeName(m.NodeName.ValueString(), path.Root("node_name"))...)
	}
	return diags
}

// maxNodeName leaves room for the node's access group (servers.Group) in a label value.
const maxNodeName = validation.DNS1123LabelMaxLength - 2

// checkNodeName checks a node's name: a DNS label (a Windows computer name, lower-cased, is one).
func checkNodeName(name string, at path.Path) diag.Diagnostics {
	var diags diag.Diagnostics
	errs := validation.IsDNS1123Label(name)
	if len(name) > maxNodeName {
		errs = append(errs, fmt.Sprintf("must be no more than %d characters", maxNodeName))
	}
	if len(errs) > 0 {
		diags.AddAttributeError(at, "Invalid Node Name", fmt.Sprintf("Node name %q: %s. Set node_name to a lower-case DNS label, such as the server's "+
			"computer name.", name, strings.Join(errs, "; ")))
	}
	return diags
}

// replacing are the attributes whose change replaces the node (it joins again).
var replacing = append([]path.Path{
	path.Root("host"),
	path.Root("cluster_id"),
	path.Root("node_name"),
	path.Root("interface_name"),
	pathInstall,
	pathSimulate,
}, nodeSettingsPaths...)

// ModifyPlan replaces the node when what it joined with changes, or when it is gone or
// NotReady, and checks the node settings against the release to install.
func (r *windowsNodeResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() || r.data == nil {
		return
	}
	var m windowsNodeModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if !req.State.Raw.IsNull() {
		for _, p := range replacing {
			var planned, prior attr.Value
			resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, p, &planned)...)
			resp.Diagnostics.Append(req.State.GetAttribute(ctx, p, &prior)...)
			if !planned.IsUnknown() && !planned.Equal(prior) {
				resp.RequiresReplace.Append(p)
			}
		}
		var ready types.Bool
		resp.Diagnostics.Append(req.State.GetAttribute(ctx, path.Root("ready"), &ready)...)
		if !ready.ValueBool() {
			// The node is gone or NotReady: planning it Ready makes the change to undo.
			resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("ready"), types.BoolValue(true))...)
			resp.RequiresReplace.Append(path.Root("ready"))
		}
	}
	if m.Install == nil || !known(m.Install.Release) {
		return
	}
	plan, err := api.LoadImageManifest([]byte(m.Install.Release.ValueString()))
	if err != nil {
		return // reported by ValidateConfig
	}
	if !m.ClusterID.IsUnknown() {
		if conn, err := r.data.connect(ctx, m.ClusterID); err == nil {
			resp.Diagnostics.Append(checkSkew(plan, conn.facts.Version, pathInstall.AtName("release"))...)
		}
	}
	cfg, diags := m.settings().nodeConfig(ctx, plan.Runtime.Name, placeholderCluster)
	resp.Diagnostics.Append(diags...)
	if diags.HasError() {
		return
	}
	cfg.Cluster.BootstrapToken = placeholderToken
	resp.Diagnostics.Append(checkNodeConfig(cfg, plan, m.attributeOf)...)
}

func (m *windowsNodeModel) settings() nodeSettings {
	return nodeSettings{NetworkMode: m.NetworkMode, Labels: m.Labels, Taints: m.Taints, MaxPods: m.MaxPods, KubeletExtraArgs: m.KubeletExtraArgs,
		Memory: m.memorySettings}
}

// attributeOf maps a NodeConfig field path to the attribute it comes from.
func (m *windowsNodeModel) attributeOf(field string) path.Path {
	switch {
	case strings.HasPrefix(field, "network.interfaceName"):
		return path.Root("interface_name")
	case strings.HasPrefix(field, "runtime"):
		return pathInstall.AtName("release")
	}
	return attributeOf(field, pathInstall.AtName("release"))
}

// node is the node's lifecycle on its server and cluster.
func (r *windowsNodeResource) node(ctx context.Context, m *windowsNodeModel, shell guest.Shell) (*servers.Node, *clusterConn, diag.Diagnostics) {
	var diags diag.Diagnostics
	conn, err := r.data.connect(ctx, m.ClusterID)
	var client kubernetes.Interface
	if err == nil {
		client, err = kubernetes.NewForConfig(conn.rest)
	}
	if err != nil {
		diags.Append(connectError(m.ClusterID, "the Node's", err))
		return nil, nil, diags
	}
	opts, d := drainOptions(ctx, m.Drain)
	diags.Append(d...)
	ttl, _ := time.ParseDuration(m.TokenTTL.ValueString())
	return &servers.Node{Server: shell, Client: client, Name: m.ID.ValueString(), TokenTTL: ttl, Drain: opts}, conn, diags
}

// install is what the install block asks for, or nil.
func (m *windowsNodeModel) install() (*guest.Install, error) {
	in := m.Install
	if in == nil {
		return nil, nil
	}
	plan, err := api.LoadImageManifest([]byte(in.Release.ValueString()))
	if err != nil {
		return nil, err
	}
	out := &guest.Install{
		Plan:     *plan,
		Transfer: in.Transfer.ValueString(),
		Mirror:   in.Mirror.ValueString(),
		Parallel: int(in.Parallel.ValueInt64()),
		CacheDir: in.CacheDir.ValueString(),
	}
	if out.Transfer == "" {
		out.Transfer = guest.GuestFetch
	}
	if out.Parallel == 0 {
		out.Parallel = 4
	}
	if out.CacheDir == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			dir = os.TempDir()
		}
		out.CacheDir = dir + string(os.PathSeparator) + "kubewin" + string(os.PathSeparator) + "terraform"
	}
	return out, nil
}

func (r *windowsNodeResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m windowsNodeModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	timeout, d := m.Timeouts.Create(ctx, 30*time.Minute)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	secret, d := m.secret(ctx, req.Config)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := serverContext(ctx, &m, secret, timeout)
	defer cancel()

	// Connect and check the server: every problem at once, before anything changes.
	shell, closeShell, err := m.connect(ctx, secret)
	if err != nil {
		resp.Diagnostics.Append(m.connectionError(err)...)
		return
	}
	defer closeShell()
	facts, install, manifest, d := m.checkServer(ctx, shell)
	if resp.Diagnostics.Append(d...); resp.Diagnostics.HasError() {
		return
	}
	node, d := r.nodeToJoin(ctx, &m, shell, facts, install, manifest)
	if resp.Diagnostics.Append(d...); resp.Diagnostics.HasError() {
		return
	}

	// The first change: from here on, the state is saved whatever happens, so that a destroy
	// (or the replacement of a tainted node) returns the server to where it was.
	if err := node.Snapshot(ctx); err != nil {
		resp.Diagnostics.Append(commandError(err)...)
		return
	}
	defer func() { resp.Diagnostics.Append(resp.State.Set(ctx, &m)...) }()
	if err := node.Join(ctx); err != nil {
		resp.Diagnostics.Append(commandError(err)...)
		return
	}
	m.Ready = types.BoolValue(true)
}

// serverContext is the context of a create or destroy on the server: the secret masked in the
// provider's log, the operation's timeout, and the host a field of every log line.
func serverContext(ctx context.Context, m *windowsNodeModel, secret string, timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx = tflog.MaskAllFieldValuesStrings(tflog.MaskMessageStrings(ctx, secret), secret)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	return tflog.SetField(ctx, "host", m.Host.ValueString()), cancel
}

// checkServer inspects the server and checks it against the release to install, or reads the
// image it was created from: every problem at once, changing nothing.
func (m *windowsNodeModel) checkServer(ctx context.Context, shell guest.Shell) (
	guest.Facts, *guest.Install, *v1alpha1.ImageManifest, diag.Diagnostics,
) {
	var diags diag.Diagnostics
	facts, err := servers.Inspect(ctx, shell)
	if err != nil {
		if remote.KindOf(err) != 0 {
			diags.Append(m.connectionError(err)...)
		} else {
			diags.AddAttributeError(path.Root("host"), "Cannot Inspect the Server", err.Error())
		}
		return facts, nil, nil, diags
	}
	install, err := m.install()
	if err != nil {
		diags.AddAttributeError(pathInstall.AtName("release"), "Invalid Release", err.Error())
		return facts, nil, nil, diags
	}
	var plan *v1alpha1.ImageManifest
	if install != nil {
		plan = &install.Plan
	}
	if problems := servers.Check(facts, plan); len(problems) > 0 {
		for _, p := range problems {
			diags.AddAttributeError(path.Root("host"), p.Summary, p.Detail+" Nothing was changed on the server.")
		}
		return facts, nil, nil, diags
	}
	manifest := plan
	if manifest == nil {
		if manifest, err = servers.ReadManifest(ctx, shell); err != nil {
			diags.AddAttributeError(path.Root("host"), "Cannot Read the Server's Image", err.Error())
		}
	}
	return facts, install, manifest, diags
}

// nodeToJoin names the node, builds its NodeConfig for its cluster and checks it, and fills in
// the computed attributes the node joins with.
func (r *windowsNodeResource) nodeToJoin(ctx context.Context, m *windowsNodeModel, shell guest.Shell, facts guest.Facts,
	install *guest.Install, manifest *v1alpha1.ImageManifest,
) (*servers.Node, diag.Diagnostics) {
	var diags diag.Diagnostics
	if !known(m.NodeName) {
		m.NodeName = types.StringValue(strings.ToLower(facts.ComputerName))
		if diags.Append(checkNodeName(m.NodeName.ValueString(), path.Root("node_name"))...); diags.HasError() {
			return nil, diags
		}
	}
	m.ID = m.NodeName
	node, conn, d := r.node(ctx, m, shell)
	diags.Append(d...)
	if diags.HasError() {
		return nil, diags
	}
	at := pathInstall.AtName("release")
	if install == nil {
		at = path.Root("host")
	}
	diags.Append(checkSkew(manifest, conn.facts.Version, at)...)
	// An existing server may be outside Azure, where no cloud provider's node manager can
	// initialize its node: kubelet_extra_args says cloud-provider = "external" for one on Azure.
	cf := conn.facts
	cf.ExternalCloudProvider = false
	cfg, d := m.settings().nodeConfig(ctx, manifest.Runtime.Name, cf)
	diags.Append(d...)
	if known(m.InterfaceName) {
		cfg.Network.InterfaceName = m.InterfaceName.ValueString()
	}
	cfg.Node.Name = m.ID.ValueString()
	cfg.Cluster.BootstrapToken = placeholderToken
	diags.Append(checkNodeConfig(cfg, manifest, m.attributeOf)...)
	if diags.HasError() {
		return nil, diags
	}
	node.Config, node.Install = *cfg, install
	m.Ready, m.WindowsBuild = types.BoolValue(false), types.Int64Value(int64(facts.Build))
	m.KubernetesVer, m.Runtime = types.StringValue(manifest.KubernetesVersion), types.StringValue(string(manifest.Runtime.Name))
	return node, diags
}

func (r *windowsNodeResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m windowsNodeModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	ready := false
	conn, err := r.data.connect(ctx, m.ClusterID)
	if err == nil {
		var client kubernetes.Interface
		if client, err = kubernetes.NewForConfig(conn.rest); err == nil {
			_, ready, err = servers.Observe(ctx, client, m.ID.ValueString())
		}
	}
	if err != nil && !r.data.localClusterGone(m.ClusterID) {
		resp.Diagnostics.AddError("Cannot Read the Node", err.Error())
		return
	}
	// A node that is gone, NotReady or whose local cluster is gone plans as a replacement.
	m.Ready = types.BoolValue(ready)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *windowsNodeResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	// Only settings that live in the state change in place (connection, drain, token
	// lifetime, timeouts); everything the node joined with replaces it.
	var plan, state windowsNodeModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	plan.Ready, plan.WindowsBuild = state.Ready, state.WindowsBuild
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *windowsNodeResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m windowsNodeModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	timeout, d := m.Timeouts.Delete(ctx, 30*time.Minute)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	secret, d := m.secret(ctx, nil)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := serverContext(ctx, &m, secret, timeout)
	defer cancel()
	shell, closeShell, err := m.connect(ctx, secret)
	if err != nil {
		resp.Diagnostics.Append(m.connectionError(err)...)
		return
	}
	defer closeShell()
	removal := servers.Removal{}
	if m.Install != nil {
		removal.Installed = v1alpha1.RuntimeName(m.Runtime.ValueString())
	}
	if r.data.localClusterGone(m.ClusterID) {
		// The cluster went first, its Node with it: only the server is left to reset.
		n := &servers.Node{Server: shell, Name: m.ID.ValueString()}
		if err := n.ResetServer(ctx, removal); err != nil {
			resp.Diagnostics.Append(commandError(err)...)
		}
		return
	}
	node, _, d := r.node(ctx, &m, shell)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := node.Remove(ctx, removal); err != nil {
		resp.Diagnostics.Append(commandError(err)...)
	}
}
