// Package release is the kubewin-release data source: it resolves a Kubernetes version, a
// Windows Server release and a container runtime into the exact artifacts of a kubewin image
// (node binaries, runtime, CNI plugins, nodeboot, the pause image for that OS build, and
// optionally cloud-provider-azure's ACR credential provider), each with its URL, sha256 and size.
package release

import (
	"context"

	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/hashicorp/packer-plugin-sdk/hcl2helper"
	"github.com/hashicorp/packer-plugin-sdk/template/config"
	"github.com/zclconf/go-cty/cty"

	"github.com/kubewin/kubewin/internal/api"
	"github.com/kubewin/kubewin/internal/azureimage"
	"github.com/kubewin/kubewin/internal/ociimage"
)

// Datasource is kubewin-release.
type Datasource struct {
	config Config
}

func (d *Datasource) ConfigSpec() hcldec.ObjectSpec { return d.config.FlatMapstructure().HCL2Spec() }

func (d *Datasource) OutputSpec() hcldec.ObjectSpec {
	return (&DatasourceOutput{}).FlatMapstructure().HCL2Spec()
}

func (d *Datasource) Configure(raws ...any) error {
	if err := config.Decode(&d.config, nil, raws...); err != nil {
		return err
	}
	return d.config.prepare()
}

func (d *Datasource) Execute() (cty.Value, error) {
	m, err := d.config.Resolve(context.Background(), defaultClient(), ociimage.Options{})
	if err != nil {
		return cty.NullVal(cty.EmptyObject), err
	}
	doc, err := api.EncodeJSON(m)
	if err != nil {
		return cty.NullVal(cty.EmptyObject), err
	}
	pinned, err := ociimage.Pinned(m.PauseImage.Reference, m.PauseImage.Digest)
	if err != nil {
		return cty.NullVal(cty.EmptyObject), err
	}
	out := DatasourceOutput{
		Manifest: string(doc), KubernetesVersion: m.KubernetesVersion, WindowsBuild: int(m.WindowsBuild),
		Runtime: string(m.Runtime.Name), PauseImage: pinned, URLs: map[string]string{}, SHA256: map[string]string{},
		AzureTags: azureimage.Tags(m),
	}
	for _, f := range m.Files {
		out.URLs[f.Path], out.SHA256[f.Path] = f.Source, f.SHA256
	}
	return hcl2helper.HCL2ValueFromConfig(out, d.OutputSpec()), nil
}
