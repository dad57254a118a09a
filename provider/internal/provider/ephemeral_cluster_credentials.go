package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/ephemeral"
	"github.com/hashicorp/terraform-plugin-framework/ephemeral/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubewin/kubewin/provider/internal/azure"
)

var (
	_ ephemeral.EphemeralResource              = (*clusterCredentialsEphemeral)(nil)
	_ ephemeral.EphemeralResourceWithConfigure = (*clusterCredentialsEphemeral)(nil)
)

func newClusterCredentialsEphemeral() ephemeral.EphemeralResource {
	return &clusterCredentialsEphemeral{}
}

type clusterCredentialsEphemeral struct{ data *providerData }

type clusterCredentialsModel struct {
	ClusterID            types.String `tfsdk:"cluster_id"`
	Host                 types.String `tfsdk:"host"`
	ClusterCACertificate types.String `tfsdk:"cluster_ca_certificate"`
	ClientCertificate    types.String `tfsdk:"client_certificate"`
	ClientKey            types.String `tfsdk:"client_key"`
}

func (e *clusterCredentialsEphemeral) Metadata(_ context.Context, req ephemeral.MetadataRequest, resp *ephemeral.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_cluster_credentials"
}

func (e *clusterCredentialsEphemeral) Schema(_ context.Context, _ ephemeral.SchemaRequest, resp *ephemeral.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "The cluster-admin credential of a `kubewin_cluster`, for other providers (kubernetes, helm) to use during a run. " +
			"Being ephemeral, it is never written to the plan or the state (Terraform 1.10 or later). For an azure cluster it is a client " +
			"certificate valid for an hour, signed for a key made in the provider's memory by the cluster's CSR API through a run command " +
			"on a control plane (in group `kubeadm:cluster-admins`)." + verifiedAzure,
		Attributes: map[string]schema.Attribute{
			"cluster_id": schema.StringAttribute{
				Required:    true,
				Description: "The `id` of the `kubewin_cluster`.",
			},
			"host": schema.StringAttribute{
				Computed:    true,
				Description: "API server URL.",
			},
			"cluster_ca_certificate": schema.StringAttribute{
				Computed:    true,
				Description: "Cluster CA certificate (PEM).",
			},
			"client_certificate": schema.StringAttribute{
				Computed:    true,
				Description: "Client certificate (PEM) of the admin credential.",
			},
			"client_key": schema.StringAttribute{
				Computed:    true,
				Sensitive:   true,
				Description: "Client key (PEM) of the admin credential.",
			},
		},
	}
}

func (e *clusterCredentialsEphemeral) Configure(_ context.Context, req ephemeral.ConfigureRequest, resp *ephemeral.ConfigureResponse) {
	e.data = configuredData(req.ProviderData, &resp.Diagnostics)
}

func (e *clusterCredentialsEphemeral) Open(ctx context.Context, req ephemeral.OpenRequest, resp *ephemeral.OpenResponse) {
	var m clusterCredentialsModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if id := m.ClusterID.ValueString(); azure.IsClusterID(id) {
		access, err := e.data.azureAccess(ctx, id)
		if err != nil {
			resp.Diagnostics.Append(connectError(m.ClusterID, "the", err))
			return
		}
		m.Host = types.StringValue("https://" + access.Endpoint)
		m.ClusterCACertificate = types.StringValue(string(access.CACert))
		m.ClientCertificate = types.StringValue(string(access.Cert))
		m.ClientKey = types.StringValue(string(access.Key))
		resp.Diagnostics.Append(resp.Result.Set(ctx, &m)...)
		return
	}
	cp, err := e.data.local.Cluster(m.ClusterID.ValueString())
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("cluster_id"), "Cluster Not Found", fmt.Sprintf("cluster_id = %q: %s.\n\n"+
			"Set cluster_id to a kubewin_cluster's id (kubewin_cluster.<name>.id): a cluster of the provider's local state_dir, or the "+
			"resource ID of an azure cluster's API server load balancer.", m.ClusterID.ValueString(), err))
		return
	}
	kc, err := clientcmd.LoadFromFile(cp.AdminKubeconfig())
	if err != nil {
		resp.Diagnostics.AddError("Cannot Read Cluster Credential", err.Error())
		return
	}
	ctxName := kc.Contexts[kc.CurrentContext]
	if ctxName == nil || kc.AuthInfos[ctxName.AuthInfo] == nil || kc.Clusters[ctxName.Cluster] == nil {
		resp.Diagnostics.AddError("Cannot Read Cluster Credential", fmt.Sprintf("%s has no usable current context", cp.AdminKubeconfig()))
		return
	}
	user, cluster := kc.AuthInfos[ctxName.AuthInfo], kc.Clusters[ctxName.Cluster]
	m.Host = types.StringValue(cp.Endpoint())
	m.ClusterCACertificate = types.StringValue(string(cluster.CertificateAuthorityData))
	m.ClientCertificate = types.StringValue(string(user.ClientCertificateData))
	m.ClientKey = types.StringValue(string(user.ClientKeyData))
	resp.Diagnostics.Append(resp.Result.Set(ctx, &m)...)
}
