// Package provider implements the kubewin Terraform provider.
package provider

import (
	"context"
	"os"
	"path/filepath"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/ephemeral"
	"github.com/hashicorp/terraform-plugin-framework/function"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/client-go/rest"

	"github.com/kubewin/kubewin/provider/internal/local"
)

var (
	_ provider.Provider                       = (*kubewinProvider)(nil)
	_ provider.ProviderWithEphemeralResources = (*kubewinProvider)(nil)
	_ provider.ProviderWithFunctions          = (*kubewinProvider)(nil)
)

type kubewinProvider struct {
	version string
}

// New returns a constructor of the provider at the given version.
func New(version string) func() provider.Provider {
	return func() provider.Provider { return &kubewinProvider{version: version} }
}

type providerModel struct {
	Local      *localModel      `tfsdk:"local"`
	Kubernetes *kubernetesModel `tfsdk:"kubernetes"`
	Azure      *azureModel      `tfsdk:"azure"`
}

type localModel struct {
	StateDir types.String `tfsdk:"state_dir"`
	BinPath  types.List   `tfsdk:"bin_path"`
}

// override sets what the provider's local block (if any) sets of the local backend's settings.
func (l *localModel) override(ctx context.Context, stateDir *string, binPath *[]string) diag.Diagnostics {
	var diags diag.Diagnostics
	if l == nil {
		return diags
	}
	if !l.StateDir.IsNull() && !l.StateDir.IsUnknown() {
		*stateDir = l.StateDir.ValueString()
	}
	if !l.BinPath.IsNull() && !l.BinPath.IsUnknown() {
		*binPath = nil
		diags.Append(l.BinPath.ElementsAs(ctx, binPath, false)...)
	}
	return diags
}

// Environment variables the local backend's settings default to.
const (
	EnvStateDir = "KUBEWIN_STATE_DIR"
	EnvBinPath  = "KUBEWIN_BIN_PATH"
)

// providerData is what resources get from Configure.
type providerData struct {
	local *local.Backend
	// kube is the connection to an existing cluster, or nil; kubeNetworks are its networks when
	// the kubernetes block sets them.
	kube         *rest.Config
	kubeNetworks clusterNetworks
	azureConn    *azureConn
	// azureClusters holds the admin credentials of azure clusters taken in this process.
	azureClusters azureAccesses
}

func (p *kubewinProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "kubewin"
	resp.Version = p.version
}

func (p *kubewinProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "The kubewin provider makes Kubernetes clusters with Windows Server worker nodes, with two backends: `azure` — an acs-engine-style " +
			"cluster (`kubewin_cluster`: Linux control planes by kubeadm, a Linux agent pool, the network; `provider::kubewin::acs_apimodel` reads " +
			"acs-engine api models), Windows pools on virtual machine scale sets and pod routes in route tables — and `local`, which runs everything " +
			"on one machine — a real control plane as processes on 127.0.0.1, and each node a nodeboot process on a **simulated** Windows machine " +
			"whose simulated kubelet runs no containers — for development, demos and CI. Windows pools also join clusters kubewin did not make " +
			"(the `kubernetes` block): kubeadm clusters, or others — AKS, EKS, GKE — whose pod and service networks the block names; " +
			"simulated nodes join only clusters of the local backend, unless a pool opts in by name." + verifiedAzure,
		Blocks: map[string]schema.Block{
			"azure":      azureBlock(),
			"kubernetes": kubernetesBlock(),
			"local": schema.SingleNestedBlock{
				Description: "Settings of the local backend.",
				Attributes: map[string]schema.Attribute{
					"state_dir": schema.StringAttribute{
						Optional: true,
						Description: "Directory holding the local backend's clusters and simulated machines; they outlive the terraform run. " +
							"Defaults to `$" + EnvStateDir + "`, else `.kubewin` in the working directory.",
					},
					"bin_path": schema.ListAttribute{
						Optional:    true,
						ElementType: types.StringType,
						Description: "Directories searched for the control plane's programs (kube-apiserver, kube-controller-manager, kube-scheduler, kubeadm, " +
							"etcd) and `nodeboot`, " +
							"before `PATH`. Defaults to `$" + EnvBinPath + "` (a `:`-separated list). `make build testenv` puts them in `bin/` and `.testbin/`.",
					},
				},
			},
		},
	}
}

func (p *kubewinProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var cfg providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	stateDir := os.Getenv(EnvStateDir)
	if stateDir == "" {
		stateDir = ".kubewin"
	}
	binPath := filepath.SplitList(os.Getenv(EnvBinPath))
	resp.Diagnostics.Append(cfg.Local.override(ctx, &stateDir, &binPath)...)
	b, err := local.New(stateDir, binPath)
	if err != nil {
		resp.Diagnostics.AddAttributeError(pathLocalStateDir, "Invalid Local State Directory", err.Error())
		return
	}
	data := &providerData{local: b}
	kube, diags := cfg.Kubernetes.restConfig()
	resp.Diagnostics.Append(diags...)
	nets, diags := cfg.Kubernetes.networks()
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	data.kube, data.kubeNetworks = kube, nets
	az, known, diags := cfg.Azure.config()
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	data.azureConn = &azureConn{config: az, known: known}
	resp.ResourceData, resp.DataSourceData, resp.EphemeralResourceData = data, data, data
}

func (p *kubewinProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{
		newClusterResource, newNodePoolResource, newPodRouteResource,
		newWindowsNodeResource, // existing servers over WinRM or SSH
	}
}

func (p *kubewinProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{newImageManifestDataSource}
}

func (p *kubewinProvider) Functions(context.Context) []func() function.Function {
	return []func() function.Function{newACSAPIModelFunction}
}

func (p *kubewinProvider) EphemeralResources(context.Context) []func() ephemeral.EphemeralResource {
	return []func() ephemeral.EphemeralResource{newClusterCredentialsEphemeral}
}
