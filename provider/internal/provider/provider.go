// Package provider implements the kubewin Terraform provider.
package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
)

var _ provider.Provider = (*kubewinProvider)(nil)

type kubewinProvider struct {
	version string
}

// New returns a constructor of the provider at the given version.
func New(version string) func() provider.Provider {
	return func() provider.Provider { return &kubewinProvider{version: version} }
}

func (p *kubewinProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "kubewin"
	resp.Version = p.version
}

func (p *kubewinProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "The kubewin provider adds Windows Server worker nodes to Kubernetes clusters: " +
			"it reads the manifests of images baked by the kubewin Packer plugin and checks them before anything is created.",
	}
}

func (p *kubewinProvider) Configure(context.Context, provider.ConfigureRequest, *provider.ConfigureResponse) {
}

func (p *kubewinProvider) Resources(context.Context) []func() resource.Resource { return nil }

func (p *kubewinProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{newImageManifestDataSource}
}
