package provider

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// kubernetesModel is the provider's connection to a cluster kubewin did not create.
type kubernetesModel struct {
	Host                 types.String `tfsdk:"host"`
	ClusterCACertificate types.String `tfsdk:"cluster_ca_certificate"`
	Token                types.String `tfsdk:"token"`
	ClientCertificate    types.String `tfsdk:"client_certificate"`
	ClientKey            types.String `tfsdk:"client_key"`
	ConfigPath           types.String `tfsdk:"config_path"`
	ConfigContext        types.String `tfsdk:"config_context"`
	ClusterCIDR          types.String `tfsdk:"cluster_cidr"`
	ServiceCIDR          types.String `tfsdk:"service_cidr"`
}

func kubernetesBlock() schema.Block {
	return schema.SingleNestedBlock{
		Description: "Connection to an existing cluster (one kubewin did not create), for node pools without `cluster_id`: either `host` with " +
			"`cluster_ca_certificate` and a `token` or a client certificate, or a kubeconfig file (`config_path`, `config_context`). " +
			"The credential needs to create bootstrap tokens, ConfigMaps and RBAC objects, and to drain and delete Nodes. " +
			"The cluster must be a kubeadm cluster (kubewin reads its pod and service networks from `kube-system/kubeadm-config`), or " +
			"`cluster_cidr` and `service_cidr` must say what they are: managed clusters such as AKS have no `kubeadm-config`. " +
			"The local backend's simulated machines join such a cluster only with the pool's explicit opt-in " +
			"(`local.join_simulated_nodes_to_existing_cluster`).",
		Attributes: map[string]schema.Attribute{
			"host": schema.StringAttribute{
				Optional:    true,
				Description: "API server URL, `https://<host>:<port>`.",
			},
			"cluster_ca_certificate": schema.StringAttribute{
				Optional:    true,
				Description: "Cluster CA certificate (PEM). Nodes pin it when they join.",
			},
			"token": schema.StringAttribute{
				Optional:    true,
				Sensitive:   true,
				Description: "Bearer token.",
			},
			"client_certificate": schema.StringAttribute{
				Optional:    true,
				Description: "Client certificate (PEM).",
			},
			"client_key": schema.StringAttribute{
				Optional:    true,
				Sensitive:   true,
				Description: "Client key (PEM).",
			},
			"config_path": schema.StringAttribute{
				Optional:    true,
				Description: "Path of a kubeconfig file, instead of `host`. A leading `~` is the home directory.",
			},
			"config_context": schema.StringAttribute{
				Optional:    true,
				Description: "Context of the kubeconfig to use. Default: its current context.",
			},
			"cluster_cidr": schema.StringAttribute{
				Optional: true,
				Description: "The cluster's pod network, e.g. `10.244.0.0/16`, for a cluster without `kube-system/kubeadm-config` (AKS: " +
					"`networkProfile.podCidr`). Set with `service_cidr`; when set, `kubeadm-config` is not read.",
			},
			"service_cidr": schema.StringAttribute{
				Optional: true,
				Description: "The cluster's service network, e.g. `10.96.0.0/12`, for a cluster without `kube-system/kubeadm-config` (AKS: " +
					"`networkProfile.serviceCidr`). Set with `cluster_cidr`.",
			},
		},
	}
}

// restConfig builds the connection, or returns nil when the block is absent. Every mistake is
// reported against its attribute.
func (k *kubernetesModel) restConfig() (*rest.Config, diag.Diagnostics) {
	var diags diag.Diagnostics
	if k == nil || k.unknown() {
		return nil, diags // absent, or known only at apply
	}
	at := func(name string) path.Path { return path.Root("kubernetes").AtName(name) }
	set := func(v types.String) bool { return !v.IsNull() && v.ValueString() != "" }
	if set(k.ConfigPath) {
		if set(k.Host) {
			diags.AddAttributeError(at("host"), "Conflicting Cluster Connection", "Set either config_path or host, not both.")
			return nil, diags
		}
		rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: expandHome(k.ConfigPath.ValueString())}
		overrides := &clientcmd.ConfigOverrides{CurrentContext: k.ConfigContext.ValueString()}
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
		if err != nil {
			diags.AddAttributeError(at("config_path"), "Invalid Kubeconfig", fmt.Sprintf("Loading %s: %s.", k.ConfigPath.ValueString(), err))
			return nil, diags
		}
		return cfg, diags
	}
	if !set(k.Host) {
		diags.AddAttributeError(at("host"), "Missing Cluster Connection", "Set host (with cluster_ca_certificate and a credential), or config_path.")
		return nil, diags
	}
	if !strings.HasPrefix(k.Host.ValueString(), "https://") {
		diags.AddAttributeError(at("host"), "Invalid Host", fmt.Sprintf("host %q must be an https:// URL: nodes pin the cluster CA and never join over "+
			"plain HTTP.", k.Host.ValueString()))
	}
	if !set(k.ClusterCACertificate) {
		diags.AddAttributeError(at("cluster_ca_certificate"), "Missing Cluster CA", "Set cluster_ca_certificate: nodes pin it when they join, and "+
			"kubewin verifies the API server with it.")
	}
	token, cert := set(k.Token), set(k.ClientCertificate) || set(k.ClientKey)
	switch {
	case token && cert:
		diags.AddAttributeError(at("token"), "Conflicting Credentials", "Set either token or client_certificate and client_key, not both.")
	case !token && !cert:
		diags.AddAttributeError(at("token"), "Missing Credential", "Set token, or client_certificate and client_key.")
	case cert && (!set(k.ClientCertificate) || !set(k.ClientKey)):
		diags.AddAttributeError(at("client_key"), "Incomplete Client Certificate", "Set both client_certificate and client_key.")
	}
	if diags.HasError() {
		return nil, diags
	}
	return &rest.Config{
		Host:        k.Host.ValueString(),
		BearerToken: k.Token.ValueString(),
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   []byte(k.ClusterCACertificate.ValueString()),
			CertData: []byte(k.ClientCertificate.ValueString()),
			KeyData:  []byte(k.ClientKey.ValueString()),
		},
	}, diags
}

// expandHome expands a leading ~ to the home directory, as the kubernetes provider does for its
// config_path (client-go does not).
func expandHome(p string) string {
	if p != "~" && !strings.HasPrefix(p, "~/") && !strings.HasPrefix(p, `~\`) {
		return p
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return p
	}
	return filepath.Join(home, p[1:])
}

// networks are the cluster's networks the block sets: both or neither, each a CIDR.
func (k *kubernetesModel) networks() (clusterNetworks, diag.Diagnostics) {
	var diags diag.Diagnostics
	if k == nil || k.ClusterCIDR.IsUnknown() || k.ServiceCIDR.IsUnknown() {
		return clusterNetworks{}, diags
	}
	at := func(name string) path.Path { return path.Root("kubernetes").AtName(name) }
	nets := clusterNetworks{ClusterCIDR: k.ClusterCIDR.ValueString(), ServiceCIDR: k.ServiceCIDR.ValueString()}
	for _, a := range [][2]string{{"cluster_cidr", nets.ClusterCIDR}, {"service_cidr", nets.ServiceCIDR}} {
		name, v := a[0], a[1]
		if _, err := netip.ParsePrefix(v); v != "" && err != nil {
			diags.AddAttributeError(at(name), "Invalid CIDR", fmt.Sprintf("%s = %q is not a CIDR: %s. Write it as address/prefix length, "+
				"e.g. 10.244.0.0/16.", name, v, err))
		}
	}
	if (nets.ClusterCIDR == "") != (nets.ServiceCIDR == "") {
		diags.AddAttributeError(at("cluster_cidr"), "Incomplete Cluster Networks", fmt.Sprintf("cluster_cidr = %q and service_cidr = %q: "+
			"set both (the cluster's pod and service networks), or neither to read them from kube-system/kubeadm-config.",
			nets.ClusterCIDR, nets.ServiceCIDR))
	}
	return nets, diags
}

func (k *kubernetesModel) unknown() bool {
	for _, v := range []types.String{k.Host, k.ClusterCACertificate, k.Token, k.ClientCertificate, k.ClientKey, k.ConfigPath, k.ConfigContext} {
		if v.IsUnknown() {
			return true
		}
	}
	return false
}
