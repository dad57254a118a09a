package provider

import (
	"context"
	"errors"
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
	"github.com/kubewin/kubewin/provider/internal/pool"
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
	TokenTTL         types.String    `tfsdk:"token_ttl"`
	Drain            types.Object    `tfsdk:"drain"`
	Timeouts         timeouts.Value  `tfsdk:"timeouts"`
	ID               types.String    `tfsdk:"id"`
	Ready            types.Bool      `tfsdk:"ready"`
	WindowsBuild     types.Int64     `tfsdk:"windows_build"`
	KubernetesVer    types.String    `tfsdk:"kubernetes_version"`
	Runtime          types.String    `tfsdk:"runtime"`
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

// Defaults of the connections. Terraform gives a resource no configuration when it destroys
// it, so the secret a destroy connects with comes from the environment.
const (
	defaultPasswordEnv   = "KUBEWIN_WINRM_PASSWORD"
	defaultPrivateKeyEnv = "KUBEWIN_SSH_PRIVATE_KEY"
	winrmHTTPSPort       = 5986
	winrmHTTPPort        = 5985
	sshPort              = 22
)

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
		return schema.StringAttribute{Optional: true, Description: desc}
	}
	flag := func(desc string) schema.BoolAttribute { return schema.BoolAttribute{Optional: true, Description: desc} }
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
			defaultPrivateKeyEnv + "`), which also stands in for the write-only attribute when that is not set.",
		Blocks: map[string]schema.Block{
			"winrm": schema.SingleNestedBlock{
				Description: "Reach the server over WinRM: HTTPS with the certificate checked, unless an insecure_ option says otherwise. Set this block or `ssh`.",
				Attributes: map[string]schema.Attribute{
					"port": schema.Int64Attribute{Optional: true, Validators: []validator.Int64{int64validator.Between(1, 65535)},
						Description: fmt.Sprintf("WinRM port. Default `%d`, or `%d` with `insecure_use_http`.", winrmHTTPSPort, winrmHTTPPort)},
					"user": optional("User to log in as (required), an administrator of the server: `Administrator`, `SERVER\\user` or `DOMAIN\\user`."),
					"password_wo": schema.StringAttribute{Optional: true, Sensitive: true, WriteOnly: true,
						Description: "The user's password, write-only: never in the plan or state. Default: the environment variable named by `password_env`, which a destroy always reads."},
					"password_env": optional("Environment variable holding the password, for a destroy (Terraform gives it no configuration) and when `password_wo` is not set. Default `" + defaultPasswordEnv + "`."),
					"auth": schema.StringAttribute{Optional: true, Validators: []validator.String{stringvalidator.OneOf(remote.AuthNTLM, remote.AuthBasic)},
						Description: "`ntlm` (default: WinRM's Negotiate for local accounts, the password never sent) or `basic` (the server must allow Basic authentication; refused over plain HTTP)."},
					"ca_certificate":           optional("PEM certificates of the CAs that may sign the server's certificate. Default: the system's trusted CAs."),
					"tls_server_name":          optional("Name the server's certificate must carry, when it is not `host` (connecting by IP address to a certificate with a DNS name)."),
					"insecure_skip_tls_verify": flag("Accept any certificate from the server, so that anyone on the network path can pose as it and read the password and bootstrap token. For test networks only."),
					"insecure_use_http":        flag("Use plain HTTP (`winrm quickconfig` without `-transport:https`): nothing is encrypted, the bootstrap token travels in the clear. Basic authentication is refused over it. For test networks only."),
				},
			},
			"ssh": schema.SingleNestedBlock{
				Description: "Reach the server over SSH (Windows Server's OpenSSH) with a key, the server's host key checked. Set this block or `winrm`.",
				Attributes: map[string]schema.Attribute{
					"port": schema.Int64Attribute{Optional: true, Validators: []validator.Int64{int64validator.Between(1, 65535)}, Description: fmt.Sprintf("SSH port. Default `%d`.", sshPort)},
					"user": optional("User to log in as (required), an administrator of the server."),
					"private_key_wo": schema.StringAttribute{Optional: true, Sensitive: true, WriteOnly: true,
						Description: "The user's private key (PEM or OpenSSH format), write-only: never in the plan or state. Default: the environment variable named by `private_key_env`, which a destroy always reads."},
					"private_key_env":          optional("Environment variable holding the private key, for a destroy (Terraform gives it no configuration) and when `private_key_wo` is not set. Default `" + defaultPrivateKeyEnv + "`."),
					"host_key":                 optional("The server's public host key, as in known_hosts without the host name (`ssh-ed25519 AAAA...`; `ssh-keyscan -t ed25519 <host>` prints it). Required unless `insecure_ignore_host_key`."),
					"insecure_ignore_host_key": flag("Accept any host key, so that anyone on the network path can pose as the server. For test networks only."),
				},
			},
			"install": schema.SingleNestedBlock{
				Description: "Install the kubewin payload on the server, as the Packer provisioner bakes an image: every file verified by its sha256, then " +
					"`nodeboot bake`. Destroying the node removes it again. Without this block the server must have been created from a kubewin image.",
				Attributes: map[string]schema.Attribute{
					"release": optional("The bake plan (required): an image manifest in JSON whose files carry their source URLs, as the `kubewin-release` Packer data source's `manifest` resolves it. Its Windows build must be the server's."),
					"transfer": schema.StringAttribute{Optional: true, Validators: []validator.String{stringvalidator.OneOf(guest.GuestFetch, guest.HostCache)},
						Description: "`guest-fetch` (default: the server downloads every file itself, from its source or `mirror`) or `host-cache` (the Terraform host downloads into `cache_dir` and uploads: for servers without Internet access)."},
					"mirror":    optional("With `guest-fetch`, fetch every file from `<mirror>/<path>` instead of its source URL."),
					"parallel":  schema.Int64Attribute{Optional: true, Validators: []validator.Int64{int64validator.Between(1, 64)}, Description: "With `guest-fetch`, how many files the server downloads at once. Default `4`."},
					"cache_dir": optional("With `host-cache`, the cache directory. Default: `kubewin/terraform` in the user's cache directory."),
				},
			},
			"simulated": schema.SingleNestedBlock{
				Description: "The server is a **simulated** Windows machine (nodeboot's sim platform, as the local backend's) in a directory of a POSIX host reached over `ssh`: " +
					"for development and tests. It runs no containers, so it joins only a `kubewin_cluster` of the local backend unless `" + simulatedOptIn + "` is set.",
				Attributes: map[string]schema.Attribute{
					"root":         optional("The simulated machine's directory on the host (required): its system drive, with its description in `sim/machine.json`."),
					"nodeboot":     optional("The nodeboot binary on the host that runs the simulated machine (required)."),
					simulatedOptIn: flag("Let the simulated node join the cluster of the provider's `kubernetes` block, a cluster kubewin did not create, whose scheduler will place pods on it that never run. For scratch clusters only."),
				},
			},
		},
		Attributes: attributes(nodeAttributes(), map[string]schema.Attribute{
			"host": schema.StringAttribute{Required: true, Validators: []validator.String{stringvalidator.LengthAtLeast(1)},
				Description: "The server's address: a DNS name or an IP address. Changing it replaces the node."},
			"cluster_id": schema.StringAttribute{Optional: true,
				Description: "The `id` of the `kubewin_cluster` the node joins. Without it the node joins the cluster of the provider's `kubernetes` block."},
			"node_name": schema.StringAttribute{Optional: true, Computed: true, PlanModifiers: computed,
				Description: "The Node's name, a DNS label. Default: the server's computer name, lower-cased."},
			"interface_name": schema.StringAttribute{Optional: true,
				Description: "The server's network adapter the pod network binds to and the node's address is taken from (`Get-NetAdapter` lists them). Default `" + v1alpha1.DefaultInterfaceName + "`."},
			"timeouts":      timeouts.Attributes(ctx, timeouts.Opts{Create: true, Delete: true}),
			"id":            schema.StringAttribute{Computed: true, PlanModifiers: computed, Description: "The node's name."},
			"ready":         schema.BoolAttribute{Computed: true, Description: "Whether the Node is Ready: false (a replacement on the next plan) when it is gone or NotReady."},
			"windows_build": schema.Int64Attribute{Computed: true, Description: "The server's Windows build."},
			"kubernetes_version": schema.StringAttribute{Computed: true, PlanModifiers: computed,
				Description: "The Kubernetes version of the node's kubelet (the image's)."},
			"runtime": schema.StringAttribute{Computed: true, PlanModifiers: computed, Description: "The node's container runtime."},
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
	switch {
	case m.WinRM == nil && m.SSH == nil:
		diags.AddAttributeError(pathWinRM, "Missing Connection", "Say how to reach the server: a winrm block (WinRM over HTTPS, user and password) or an ssh block (OpenSSH, user and key).")
	case m.WinRM != nil && m.SSH != nil:
		diags.AddAttributeError(pathSSH, "Conflicting Connections", "Set either the winrm block or the ssh block, not both.")
	}
	if w := m.WinRM; w != nil {
		if w.User.IsNull() {
			diags.AddAttributeError(pathWinRM.AtName("user"), "Missing User", "Set winrm.user to an administrator of the server, such as \"Administrator\".")
		}
		http := w.InsecureUseHTTP.ValueBool()
		if http && w.Auth.ValueString() == remote.AuthBasic {
			diags.AddAttributeError(pathWinRM.AtName("auth"), "Basic Authentication Over Plain HTTP",
				"With insecure_use_http, auth = \"basic\" would send the user's password in the clear. Use auth = \"ntlm\" (the default), or HTTPS.")
		}
		if http && (known(w.CACertificate) || known(w.TLSServerName) || w.InsecureSkipTLSVerify.ValueBool()) {
			diags.AddAttributeError(pathWinRM.AtName("insecure_use_http"), "TLS Settings Without TLS",
				"insecure_use_http turns TLS off, so ca_certificate, tls_server_name and insecure_skip_tls_verify have nothing to apply to. Remove them, or remove insecure_use_http.")
		}
		if w.InsecureSkipTLSVerify.ValueBool() && known(w.CACertificate) {
			diags.AddAttributeError(pathWinRM.AtName("insecure_skip_tls_verify"), "Conflicting Certificate Settings",
				"insecure_skip_tls_verify accepts any certificate, so ca_certificate would not be checked. Remove insecure_skip_tls_verify.")
		}
	}
	if s := m.SSH; s != nil {
		if s.User.IsNull() {
			diags.AddAttributeError(pathSSH.AtName("user"), "Missing User", "Set ssh.user to an administrator of the server.")
		}
		switch ignore := s.InsecureIgnoreHostKey.ValueBool(); {
		case s.HostKey.IsNull() && !ignore && !s.InsecureIgnoreHostKey.IsUnknown():
			diags.AddAttributeError(pathSSH.AtName("host_key"), "Missing Host Key",
				"Set ssh.host_key to the server's public host key, which `ssh-keyscan -t ed25519 <host>` prints (without the host name), so that "+
					"kubewin knows it talks to the server and not to someone posing as it. On a test network, ssh.insecure_ignore_host_key = true accepts any key.")
		case known(s.HostKey) && ignore:
			diags.AddAttributeError(pathSSH.AtName("insecure_ignore_host_key"), "Conflicting Host Key Settings", "host_key is set and insecure_ignore_host_key would not check it. Remove one.")
		}
	}
	if in := m.Install; in != nil {
		switch {
		case in.Release.IsNull():
			diags.AddAttributeError(pathInstall.AtName("release"), "Missing Release", "Set install.release to a bake plan: the manifest a kubewin-release data source resolves (an image manifest in JSON).")
		case known(in.Release):
			if _, err := api.LoadImageManifest([]byte(in.Release.ValueString())); err != nil {
				diags.AddAttributeError(pathInstall.AtName("release"), "Invalid Release", fmt.Sprintf("install.release is not a kubewin bake plan: %s.", err))
			}
		}
		if known(in.Mirror) && in.Transfer.ValueString() == guest.HostCache {
			diags.AddAttributeError(pathInstall.AtName("mirror"), "Mirror Without Guest Fetch", "mirror is where the server fetches files (transfer = \"guest-fetch\"); with host-cache, point the release's URLs at the mirror instead.")
		}
	}
	if sim := m.Simulated; sim != nil {
		if sim.Root.IsNull() || sim.Nodeboot.IsNull() {
			diags.AddAttributeError(pathSimulate, "Incomplete Simulated Machine", "Set simulated.root (the machine's directory) and simulated.nodeboot (the nodeboot binary that runs it).")
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
		diags.AddAttributeError(at, "Invalid Node Name", fmt.Sprintf("Node name %q: %s. Set node_name to a lower-case DNS label, such as the server's computer name.", name, strings.Join(errs, "; ")))
	}
	return diags
}

// replacing are the attributes whose change replaces the node (it joins again).
var replacing = append([]path.Path{path.Root("host"), path.Root("cluster_id"), path.Root("node_name"), path.Root("interface_name"), pathInstall, pathSimulate}, nodeSettingsPaths...)

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
	return nodeSettings{NetworkMode: m.NetworkMode, Labels: m.Labels, Taints: m.Taints, MaxPods: m.MaxPods, KubeletExtraArgs: m.KubeletExtraArgs}
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

// secret returns the connection's secret: the write-only attribute from the configuration
// when there is one, else the environment variable.
func (m *windowsNodeModel) secret(ctx context.Context, config tfconfig) (string, diag.Diagnostics) {
	var diags diag.Diagnostics
	at, envAttr, env := pathWinRM.AtName("password_wo"), m.winrmEnv(), "password"
	if m.SSH != nil {
		at, envAttr, env = pathSSH.AtName("private_key_wo"), m.sshEnv(), "private key"
	}
	if config != nil {
		var v types.String
		diags.Append(config.GetAttribute(ctx, at, &v)...)
		if known(v) && v.ValueString() != "" {
			return v.ValueString(), diags
		}
	}
	if s := os.Getenv(envAttr); s != "" {
		return s, diags
	}
	detail := fmt.Sprintf("No %s to connect with: set %s, or the environment variable %s.", env, at, envAttr)
	if config == nil {
		detail = fmt.Sprintf("Destroying the node needs the %s to connect to the server, and Terraform gives a destroy no configuration "+
			"(so %s is not available): set the environment variable %s.", env, at, envAttr)
	}
	diags.AddAttributeError(at, "Missing Credential", detail)
	return "", diags
}

func (m *windowsNodeModel) winrmEnv() string {
	if m.WinRM != nil && known(m.WinRM.PasswordEnv) {
		return m.WinRM.PasswordEnv.ValueString()
	}
	return defaultPasswordEnv
}

func (m *windowsNodeModel) sshEnv() string {
	if m.SSH != nil && known(m.SSH.PrivateKeyEnv) {
		return m.SSH.PrivateKeyEnv.ValueString()
	}
	return defaultPrivateKeyEnv
}

// connect opens the connection to the server and returns it with a function that closes it.
func (m *windowsNodeModel) connect(ctx context.Context, secret string) (guest.Shell, func(), error) {
	host := m.Host.ValueString()
	if s := m.SSH; s != nil {
		port := int(s.Port.ValueInt64())
		if s.Port.IsNull() {
			port = sshPort
		}
		c, err := remote.SSH{Host: host, Port: port, User: s.User.ValueString(), PrivateKey: []byte(secret),
			HostKey: s.HostKey.ValueString(), InsecureIgnoreHostKey: s.InsecureIgnoreHostKey.ValueBool()}.Dial(ctx)
		if err != nil {
			return guest.Shell{}, nil, err
		}
		var lang guest.Lang = guest.Windows{SSH: true}
		if sim := m.Simulated; sim != nil {
			lang = guest.Sim{Root: sim.Root.ValueString(), Binary: sim.Nodeboot.ValueString()}
		}
		return guest.Shell{Runner: c, Lang: lang}, func() { c.Close() }, nil
	}
	w := m.WinRM
	http := w.InsecureUseHTTP.ValueBool()
	port := int(w.Port.ValueInt64())
	if w.Port.IsNull() {
		port = winrmHTTPSPort
		if http {
			port = winrmHTTPPort
		}
	}
	auth := w.Auth.ValueString()
	if auth == "" {
		auth = remote.AuthNTLM
	}
	c, err := remote.WinRM{Host: host, Port: port, HTTP: http, User: w.User.ValueString(), Password: secret, Auth: auth,
		CACertificates: []byte(w.CACertificate.ValueString()), TLSServerName: w.TLSServerName.ValueString(),
		InsecureSkipVerify: w.InsecureSkipTLSVerify.ValueBool()}.Client()
	if err != nil {
		return guest.Shell{}, nil, err
	}
	return guest.Shell{Runner: c, Lang: guest.Windows{}}, func() {}, nil
}

// connectionError turns a failure to reach or log in to the server into a diagnostic that
// names the attribute to fix.
func (m *windowsNodeModel) connectionError(err error) diag.Diagnostics {
	var diags diag.Diagnostics
	conn, ssh := pathWinRM, m.SSH != nil
	if ssh {
		conn = pathSSH
	}
	switch remote.KindOf(err) {
	case remote.Unreachable:
		fix := "that the WinRM listener runs (`winrm quickconfig -transport:https` creates an HTTPS one, port 5986)"
		if ssh {
			fix = "that the OpenSSH server runs (`Add-WindowsCapability -Online -Name OpenSSH.Server~~~~0.0.1.0; Start-Service sshd`)"
		}
		diags.AddAttributeError(path.Root("host"), "Cannot Reach the Server", fmt.Sprintf("%s.\n\nCheck host and %s.port, that the server is up, %s, and that no firewall is in the way. Nothing was changed on the server.", err, conn, fix))
	case remote.Unauthorized:
		fix := fmt.Sprintf("Check winrm.user and the password (winrm.password_wo, or $%s). With auth = \"basic\" the server must allow it "+
			"(`winrm set winrm/config/service/auth @{Basic=\"true\"}`); a local account other than the built-in Administrator also needs "+
			"LocalAccountTokenFilterPolicy = 1 for remote administration.", m.winrmEnv())
		if ssh {
			fix = fmt.Sprintf("Check ssh.user and the key (ssh.private_key_wo, or $%s): its public key must be in the user's authorized keys "+
				"(for administrators, C:\\ProgramData\\ssh\\administrators_authorized_keys).", m.sshEnv())
		}
		diags.AddAttributeError(conn.AtName("user"), "Server Refused the Credentials", fmt.Sprintf("%s.\n\n%s Nothing was changed on the server.", err, fix))
	case remote.Untrusted:
		if ssh {
			diags.AddAttributeError(conn.AtName("host_key"), "Unexpected Host Key", fmt.Sprintf("%s.\n\nIf the server's key changed on purpose, "+
				"set ssh.host_key to the new one (`ssh-keyscan -t ed25519 <host>`); otherwise something poses as the server. Nothing was changed on it.", err))
		} else {
			diags.AddAttributeError(conn.AtName("ca_certificate"), "Untrusted Server Certificate", fmt.Sprintf("%s.\n\nSet winrm.ca_certificate to the PEM "+
				"certificate of the CA that signed the server's WinRM certificate (or to the certificate itself when it is self-signed), and "+
				"winrm.tls_server_name when connecting by a name the certificate does not carry. Only on a network you trust, "+
				"winrm.insecure_skip_tls_verify = true accepts any certificate. Nothing was changed on the server.", err))
		}
	default:
		diags.AddAttributeError(conn, "Cannot Connect to the Server", err.Error())
	}
	return diags
}

// node is the node's lifecycle on its server and cluster.
func (r *windowsNodeResource) node(ctx context.Context, m *windowsNodeModel, shell guest.Shell) (*servers.Node, *clusterConn, diag.Diagnostics) {
	var diags diag.Diagnostics
	conn, err := r.data.connect(ctx, m.ClusterID)
	if err != nil {
		diags.AddAttributeError(path.Root("cluster_id"), "Cannot Reach the Node's Cluster", err.Error())
		return nil, nil, diags
	}
	cfg := conn.rest
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		diags.AddError("Cannot Reach the Node's Cluster", err.Error())
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
	out := &guest.Install{Plan: *plan, Transfer: in.Transfer.ValueString(), Mirror: in.Mirror.ValueString(), Parallel: int(in.Parallel.ValueInt64()), CacheDir: in.CacheDir.ValueString()}
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

// tfconfig is the configuration a request carries; nil for a destroy, which has none.
type tfconfig interface {
	GetAttribute(ctx context.Context, p path.Path, target any) diag.Diagnostics
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
	ctx = tflog.MaskAllFieldValuesStrings(tflog.MaskMessageStrings(ctx, secret), secret)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ctx = tflog.SetField(ctx, "host", m.Host.ValueString())

	// Connect and check the server: every problem at once, before anything changes.
	shell, closeShell, err := m.connect(ctx, secret)
	if err != nil {
		resp.Diagnostics.Append(m.connectionError(err)...)
		return
	}
	defer closeShell()
	facts, err := servers.Inspect(ctx, shell)
	if err != nil {
		if remote.KindOf(err) != 0 {
			resp.Diagnostics.Append(m.connectionError(err)...)
		} else {
			resp.Diagnostics.AddAttributeError(path.Root("host"), "Cannot Inspect the Server", err.Error())
		}
		return
	}
	install, err := m.install()
	if err != nil {
		resp.Diagnostics.AddAttributeError(pathInstall.AtName("release"), "Invalid Release", err.Error())
		return
	}
	var plan *v1alpha1.ImageManifest
	if install != nil {
		plan = &install.Plan
	}
	if problems := servers.Check(facts, plan); len(problems) > 0 {
		for _, p := range problems {
			resp.Diagnostics.AddAttributeError(path.Root("host"), p.Summary, p.Detail+" Nothing was changed on the server.")
		}
		return
	}
	manifest := plan
	if manifest == nil {
		if manifest, err = servers.ReadManifest(ctx, shell); err != nil {
			resp.Diagnostics.AddAttributeError(path.Root("host"), "Cannot Read the Server's Image", err.Error())
			return
		}
	}
	if !known(m.NodeName) {
		m.NodeName = types.StringValue(strings.ToLower(facts.ComputerName))
		if resp.Diagnostics.Append(checkNodeName(m.NodeName.ValueString(), path.Root("node_name"))...); resp.Diagnostics.HasError() {
			return
		}
	}
	m.ID = m.NodeName
	node, conn, d := r.node(ctx, &m, shell)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	at := pathInstall.AtName("release")
	if install == nil {
		at = path.Root("host")
	}
	resp.Diagnostics.Append(checkSkew(manifest, conn.facts.Version, at)...)
	cfg, d := m.settings().nodeConfig(ctx, manifest.Runtime.Name, conn.facts)
	resp.Diagnostics.Append(d...)
	if known(m.InterfaceName) {
		cfg.Network.InterfaceName = m.InterfaceName.ValueString()
	}
	cfg.Node.Name = m.ID.ValueString()
	cfg.Cluster.BootstrapToken = placeholderToken
	resp.Diagnostics.Append(checkNodeConfig(cfg, manifest, m.attributeOf)...)
	if resp.Diagnostics.HasError() {
		return
	}
	node.Config, node.Install = *cfg, install
	m.Ready, m.WindowsBuild = types.BoolValue(false), types.Int64Value(int64(facts.Build))
	m.KubernetesVer, m.Runtime = types.StringValue(manifest.KubernetesVersion), types.StringValue(string(manifest.Runtime.Name))

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

// commandError turns a failure on the server or in the cluster into a diagnostic.
func commandError(err error) diag.Diagnostics {
	var diags diag.Diagnostics
	var je *pool.JoinError
	var exit *guest.ExitError
	switch {
	case errors.As(err, &je):
		detail := je.Error()
		if je.Log != "" {
			detail += "\n\nLast lines of nodeboot's output:\n" + je.Log
		}
		diags.AddError("Node Failed to Join", detail)
	case errors.As(err, &exit):
		diags.AddError("Command Failed on the Server", err.Error())
	case remote.KindOf(err) != 0:
		diags.AddError("Lost the Connection to the Server", err.Error())
	default:
		diags.AddError("Cannot Join the Server", err.Error())
	}
	return diags
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
	ctx = tflog.MaskAllFieldValuesStrings(tflog.MaskMessageStrings(ctx, secret), secret)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ctx = tflog.SetField(ctx, "host", m.Host.ValueString())
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
