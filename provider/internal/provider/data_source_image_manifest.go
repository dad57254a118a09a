package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/datasourcevalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/kubewin/kubewin/internal/api"
	"github.com/kubewin/kubewin/internal/api/v1alpha1"
)

var (
	_ datasource.DataSource                     = (*imageManifestDataSource)(nil)
	_ datasource.DataSourceWithConfigValidators = (*imageManifestDataSource)(nil)
)

func newImageManifestDataSource() datasource.DataSource { return &imageManifestDataSource{} }

type imageManifestDataSource struct{}

type imageManifestModel struct {
	Path              types.String `tfsdk:"path"`
	Content           types.String `tfsdk:"content"`
	ID                types.String `tfsdk:"id"`
	WindowsBuild      types.Int64  `tfsdk:"windows_build"`
	WindowsRelease    types.String `tfsdk:"windows_release"`
	KubernetesVersion types.String `tfsdk:"kubernetes_version"`
	Runtime           types.String `tfsdk:"runtime"`
	RuntimeVersion    types.String `tfsdk:"runtime_version"`
	CRIDockerdVersion types.String `tfsdk:"cri_dockerd_version"`
	PauseImage        types.String `tfsdk:"pause_image"`
	PauseImageDigest  types.String `tfsdk:"pause_image_digest"`
	NodebootVersion   types.String `tfsdk:"nodeboot_version"`
	Files             types.List   `tfsdk:"files"`
	WorkloadImages    types.List   `tfsdk:"workload_images"`
}

var (
	fileAttrTypes          = map[string]attr.Type{"path": types.StringType, "sha256": types.StringType, "size": types.Int64Type}
	workloadImageAttrTypes = map[string]attr.Type{"reference": types.StringType, "digest": types.StringType, "os_version": types.StringType,
		"size": types.Int64Type, "hyperv_only": types.BoolType}
)

func (d *imageManifestDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_image_manifest"
}

func (d *imageManifestDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "Reads and validates the manifest of an image baked by the kubewin Packer plugin: " +
			"its Windows build, Kubernetes version, container runtime, pause image, pre-pulled workload images and every file with its sha256. " +
			"Use it to check an image before creating nodes from it." + verifiedWindowsLine,
		Attributes: map[string]schema.Attribute{
			"path": schema.StringAttribute{
				Description: "Path of the manifest file (JSON or YAML) that `packer build` wrote. Exactly one of `path` and `content` must be set.",
				Optional:    true,
				Validators:  []validator.String{stringvalidator.LengthAtLeast(1)},
			},
			"content": schema.StringAttribute{
				Description: "The manifest itself (JSON or YAML), for example from an artifact store. Exactly one of `path` and `content` must be set.",
				Optional:    true,
				Validators:  []validator.String{stringvalidator.LengthAtLeast(1)},
			},
			"id": schema.StringAttribute{
				Computed:    true,
				Description: "sha256 of the manifest document: it changes whenever the image's contents do.",
			},
			"windows_build": schema.Int64Attribute{
				Computed:    true,
				Description: "Windows Server build of the image: one of " + windowsBuildList() + ".",
			},
			"windows_release": schema.StringAttribute{
				Computed:    true,
				Description: "Windows Server release of the image: `2019`, `2022` or `2025`.",
			},
			"kubernetes_version": schema.StringAttribute{
				Computed:    true,
				Description: "Version of the kubelet and kube-proxy in the image, e.g. `v1.36.2`.",
			},
			"runtime": schema.StringAttribute{
				Computed:    true,
				Description: "Container runtime of the image: `containerd` or `docker`.",
			},
			"runtime_version": schema.StringAttribute{
				Computed:    true,
				Description: "Version of the container runtime.",
			},
			"cri_dockerd_version": schema.StringAttribute{
				Computed:    true,
				Description: "Version of cri-dockerd, with the `docker` runtime; null otherwise.",
			},
			"pause_image": schema.StringAttribute{
				Computed:    true,
				Description: "Reference of the pause (sandbox) image imported into the runtime.",
			},
			"pause_image_digest": schema.StringAttribute{
				Computed:    true,
				Description: "Digest of the imported pause image.",
			},
			"nodeboot_version": schema.StringAttribute{
				Computed:    true,
				Description: "Version of nodeboot in the image.",
			},
			"files": schema.ListNestedAttribute{
				Computed:    true,
				Description: "Every file of the image's payload.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{"path": schema.StringAttribute{
					Computed:    true,
					Description: "Path relative to the payload root.",
				}, "sha256": schema.StringAttribute{
					Computed:    true,
					Description: "Lower-case hex sha256 of the content.",
				}, "size": schema.Int64Attribute{
					Computed:    true,
					Description: "Size in bytes.",
				}}},
			},
			"workload_images": schema.ListNestedAttribute{
				Computed: true,
				Description: "The workload container images pre-pulled into the runtime's image store when the image was baked " +
					"(the Packer provisioner's `images`): pods using them start without a pull. Each is the windows/amd64 image of the " +
					"image's Windows build, which a process-isolated container must match, or, in an image with Hyper-V isolation, of " +
					"an earlier build (`hyperv_only`).",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{"reference": schema.StringAttribute{
					Computed:    true,
					Description: "The image as the bake was given it, by tag or by digest.",
				}, "digest": schema.StringAttribute{
					Computed:    true,
					Description: "Digest of the windows/amd64 image imported (not of a multi-platform index): pin pods to `<repository>@<digest>`.",
				}, "os_version": schema.StringAttribute{
					Computed:    true,
					Description: "The image's `os.version`, e.g. `10.0.20348.2849`: its Windows build is the image's.",
				}, "size": schema.Int64Attribute{
					Computed:    true,
					Description: "What a pull of the image downloads, in bytes: manifest, config and compressed layers.",
				}, "hyperv_only": schema.BoolAttribute{
					Computed: true,
					Description: "Whether the image is of an earlier Windows build than the image's: its containers run Hyper-V " +
						"isolated only, so its pods set `runtimeClassName: " + v1alpha1.RuntimeClassHyperV + "`.",
				}}},
			},
		},
	}
}

func (d *imageManifestDataSource) ConfigValidators(context.Context) []datasource.ConfigValidator {
	return []datasource.ConfigValidator{datasourcevalidator.ExactlyOneOf(path.MatchRoot("path"), path.MatchRoot("content"))}
}

func (d *imageManifestDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var data imageManifestModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &data)...)
	if resp.Diagnostics.HasError() {
		return
	}
	raw := []byte(data.Content.ValueString())
	attrPath := path.Root("content")
	if !data.Path.IsNull() {
		attrPath = path.Root("path")
		b, err := os.ReadFile(data.Path.ValueString())
		if err != nil {
			resp.Diagnostics.AddAttributeError(attrPath, "Cannot Read Image Manifest",
				fmt.Sprintf("Reading %q failed: %s. Point `path` at the manifest file `packer build` wrote next to the image.", data.Path.ValueString(), err))
			return
		}
		raw = b
	}
	m, err := api.LoadImageManifest(raw)
	if err != nil {
		resp.Diagnostics.AddAttributeError(attrPath, "Invalid Image Manifest",
			fmt.Sprintf("The image manifest cannot be used: %s\n\nRebuild the image with the kubewin Packer plugin, or fix the fields named above.", err))
		return
	}
	sum := sha256.Sum256(raw)
	data.ID = types.StringValue(hex.EncodeToString(sum[:]))
	data.WindowsBuild = types.Int64Value(int64(m.WindowsBuild))
	data.WindowsRelease = types.StringValue(m.WindowsBuild.Release())
	data.KubernetesVersion = types.StringValue(m.KubernetesVersion)
	data.Runtime = types.StringValue(string(m.Runtime.Name))
	data.RuntimeVersion = types.StringValue(m.Runtime.Version)
	data.CRIDockerdVersion = types.StringNull()
	if m.Runtime.CRIDockerdVersion != "" {
		data.CRIDockerdVersion = types.StringValue(m.Runtime.CRIDockerdVersion)
	}
	data.PauseImage = types.StringValue(m.PauseImage.Reference)
	data.PauseImageDigest = types.StringValue(m.PauseImage.Digest)
	data.NodebootVersion = types.StringValue(m.NodebootVersion)
	files := make([]map[string]attr.Value, len(m.Files))
	for i, f := range m.Files {
		files[i] = map[string]attr.Value{"path": types.StringValue(f.Path), "sha256": types.StringValue(f.SHA256), "size": types.Int64Value(f.Size)}
	}
	data.Files = objectList(fileAttrTypes, files, &resp.Diagnostics)
	images := make([]map[string]attr.Value, len(m.WorkloadImages))
	for i, w := range m.WorkloadImages {
		images[i] = map[string]attr.Value{"reference": types.StringValue(w.Reference), "digest": types.StringValue(w.Digest),
			"os_version": types.StringValue(w.OSVersion), "size": types.Int64Value(w.Size), "hyperv_only": types.BoolValue(w.HyperVOnly(m.WindowsBuild))}
	}
	data.WorkloadImages = objectList(workloadImageAttrTypes, images, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &data)...)
}

// objectList is a list of objects of the given attribute types.
func objectList(attrTypes map[string]attr.Type, objects []map[string]attr.Value, diags *diag.Diagnostics) types.List {
	values := make([]attr.Value, len(objects))
	for i, o := range objects {
		var d diag.Diagnostics
		values[i], d = types.ObjectValue(attrTypes, o)
		diags.Append(d...)
	}
	list, d := types.ListValue(types.ObjectType{AttrTypes: attrTypes}, values)
	diags.Append(d...)
	return list
}

// windowsBuildList is the supported Windows builds for a description: `17763`, `20348` or `26100`.
func windowsBuildList() string {
	builds := make([]string, len(v1alpha1.WindowsBuilds))
	for i, b := range v1alpha1.WindowsBuilds {
		builds[i] = fmt.Sprintf("`%d`", b)
	}
	return strings.Join(builds[:len(builds)-1], ", ") + " or " + builds[len(builds)-1]
}
