package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
)

const examplesDir = "../../examples/packer"

// TestExamplesValidate runs packer validate on every template of examples/packer with the
// plugin installed. The azure-arm plugin is not available here, so azure templates are checked
// twice: as they are with -syntax-only, and fully with their azure-arm sources swapped for null
// sources — everything else, kubewin's blocks and packer's own provisioners, validated as
// written.
func TestExamplesValidate(t *testing.T) {
	e := testEnv(t)
	templates, err := filepath.Glob(filepath.Join(examplesDir, "*.pkr.hcl"))
	if err != nil || len(templates) < 4 {
		t.Fatalf("examples: %v %v", templates, err)
	}
	for _, tpl := range templates {
		t.Run(filepath.Base(tpl), func(t *testing.T) {
			if out, err := e.command("validate", "-syntax-only", tpl).CombinedOutput(); err != nil {
				t.Fatalf("packer validate -syntax-only: %v\n%s", err, out)
			}
			src, err := os.ReadFile(tpl)
			if err != nil {
				t.Fatal(err)
			}
			vars := []string{"-var", "nodeboot_path=" + e.nodeboot}
			if strings.Contains(string(src), `"azure-arm"`) {
				tpl = withNullSources(t, src)
				vars = []string{"-var", "subscription_id=x", "-var", "resource_group=x", "-var", "gallery_name=x"}
			}
			out, err := e.command(append(append([]string{"validate"}, vars...), tpl)...).CombinedOutput()
			if err != nil {
				t.Fatalf("packer validate: %v\n%s", err, out)
			}
		})
	}
}

// withNullSources writes a copy of an azure template whose azure-arm sources are null sources.
func withNullSources(t *testing.T, src []byte) string {
	t.Helper()
	f, diags := hclwrite.ParseConfig(src, "template.pkr.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	body := f.Body()
	for _, b := range body.Blocks() {
		switch {
		case b.Type() == "packer":
			for _, rp := range b.Body().Blocks() {
				rp.Body().RemoveAttribute("azure")
			}
		case b.Type() == "source" && b.Labels()[0] == "azure-arm":
			name := b.Labels()[1]
			body.RemoveBlock(b)
			body.AppendNewBlock("source", []string{"null", name}).Body().SetAttributeValue("communicator", ctyString("none"))
		}
	}
	out := strings.ReplaceAll(string(f.Bytes()), "source.azure-arm.", "source.null.")
	path := filepath.Join(t.TempDir(), "template.pkr.hcl")
	if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func ctyString(s string) cty.Value { return cty.StringVal(s) }
