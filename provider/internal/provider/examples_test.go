package provider

import (
	"context"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"

	"github.com/kubewin/kubewin/internal/controlplane"
	"github.com/kubewin/kubewin/internal/sim/simmachine"
	"github.com/kubewin/kubewin/internal/testkit/testenv"
)

// repoRoot is the repository, from this package's directory.
const repoRoot = "../../.."

// The examples that can run here run as written: a configuration directory is copied into a
// scratch tree that has bin/ and .testbin/ where the repository has them, with what the example
// expects from outside (images, manifests, a cluster, Azure) made by its setup, which returns
// the -var arguments and environment to run it with.
type exampleSetup func(t *testing.T, work, dst string) (vars, env []string)

var runnableExamples = map[string]exampleSetup{
	"examples/local": func(t *testing.T, work, _ string) ([]string, []string) {
		return []string{"image=" + exampleImage(t, work), "node_count=2"}, nil
	},
	"examples/resources/kubewin_cluster": nil,
	"examples/resources/kubewin_windows_node_pool": func(t *testing.T, work, dst string) ([]string, []string) {
		copyDir(t, exampleImage(t, work), filepath.Join(dst, "output", "kubewin-local"))
		return nil, nil
	},
	"examples/resources/kubewin_pod_route": nil,
	"examples/data-sources/kubewin_image_manifest": func(t *testing.T, work, dst string) ([]string, []string) {
		copyFile(t, filepath.Join(exampleImage(t, work), simmachine.ImageManifestFile), filepath.Join(dst, "output", "kubewin-manifest.json"))
		return nil, nil
	},
	"examples/ephemeral-resources/kubewin_cluster_credentials": nil,
	"examples/functions/acs_apimodel":                          nil,
	// The guides' acs-engine api model: an azure cluster through the ARM test server.
	"examples/acs-engine": acsEngineExample,
	// Through the ARM test server, into a cluster kubewin did not create.
	"examples/azure": func(t *testing.T, work, _ string) ([]string, []string) {
		f := newAzureFixture(t, filepath.Join(work, "state"))
		bin, _ := testenv.BinDir()
		cp, err := controlplane.Start(context.Background(), controlplane.Config{Dir: filepath.Join(work, "existing"), BinDir: bin, ClusterName: "existing"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cp.Destroy(context.Background()) })
		return []string{"kubeconfig=" + cp.AdminKubeconfig(), "resource_group_name=" + f.group, "location=" + armServer.Location(),
			"subnet_id=" + f.subnetID, "route_table_id=" + f.routeTableID, "image_id=" + f.imageA, "node_count=2"}, armServer.Env()
	},
}

// exampleChecks check what a runnable example made, after its apply and after its destroy.
var exampleChecks = map[string]struct {
	applied   func(t *testing.T, c *cli)
	destroyed func(t *testing.T)
}{
	"examples/acs-engine": {applied: checkACSEngineExample, destroyed: checkACSEngineDestroyed},
}

// exampleImage writes a test image into the scratch tree.
func exampleImage(t *testing.T, work string) string {
	return testImage(t, testBackend(t, filepath.Join(work, "state")), "example")
}

// Every Terraform example validates — each directory of examples/ and each terraform block of
// docs/ — and every example that can run here applies and destroys.
func TestAccExamples(t *testing.T) {
	t.Parallel()
	dirs := exampleDirs(t)
	for _, name := range slices.Sorted(maps.Keys(runnableExamples)) {
		if !slices.Contains(dirs, name) {
			t.Errorf("%s is listed to apply but is not an example directory", name)
		}
	}
	for _, dir := range dirs {
		t.Run(dir, func(t *testing.T) {
			t.Parallel()
			work := scratchTree(t)
			dst := filepath.Join(work, dir)
			copyDir(t, filepath.Join(repoRoot, dir), dst)
			c := exampleCLI(t, work, dst)
			c.run(t, "validate", "-no-color")
			setup, ok := runnableExamples[dir]
			if !ok {
				return
			}
			var vars, env []string
			if setup != nil {
				vars, env = setup(t, work, dst)
			}
			c.env = append(c.env, env...)
			args := []string{"-auto-approve", "-input=false", "-no-color"}
			for _, v := range vars {
				args = append(args, "-var", v)
			}
			t.Cleanup(func() { stopLeftovers(filepath.Join(work, "state")) })
			c.run(t, append([]string{"apply"}, args...)...)
			check := exampleChecks[dir]
			if check.applied != nil {
				check.applied(t, c)
			}
			c.run(t, append([]string{"destroy"}, args...)...)
			if check.destroyed != nil {
				check.destroyed(t)
			}
		})
	}
	exampleFiles := exampleFileDirs(t, dirs)
	for i, block := range docBlocks(t) {
		t.Run(block.source, func(t *testing.T) {
			t.Parallel()
			work := scratchTree(t)
			dst := filepath.Join(work, "doc", strings.ReplaceAll(block.source, "/", "_")+"_"+string(rune('a'+i%26)))
			name := "main.tf"
			// A block rendered from an example file is validated next to that example's other
			// files (the api model a function reads, say).
			if from, ok := exampleFiles[strings.TrimSpace(block.text)]; ok {
				copyDir(t, filepath.Join(repoRoot, filepath.Dir(from)), dst)
				name = filepath.Base(from)
			} else if err := os.MkdirAll(dst, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dst, name), []byte(block.text), 0o644); err != nil {
				t.Fatal(err)
			}
			exampleCLI(t, work, dst).run(t, "validate", "-no-color")
		})
	}
}

// exampleCLI is the CLI for an example copied to dst, with the provider's source declared when
// the example (a documentation snippet) does not, and the local backend's state and programs
// in the scratch tree for examples without a provider block.
func exampleCLI(t *testing.T, work, dst string) *cli {
	t.Helper()
	if !strings.Contains(readAll(t, dst), "required_providers") {
		source := "terraform {\n  required_providers {\n    kubewin = { source = \"kubewin/kubewin\" }\n  }\n}\n"
		if err := os.WriteFile(filepath.Join(dst, "zz_provider_source.tf"), []byte(source), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := newCLI(t, dst, "")
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	c.env = append(c.env, EnvStateDir+"="+filepath.Join(work, "state"), EnvBinPath+"="+nodebootDir+string(os.PathListSeparator)+bin)
	return c
}

// scratchTree is a directory laid out like the repository where examples look for programs:
// bin/ (nodeboot) and .testbin/ (the control plane).
func scratchTree(t *testing.T) string {
	t.Helper()
	work := t.TempDir()
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"bin": nodebootDir, ".testbin": bin} {
		if err := os.Symlink(target, filepath.Join(work, link)); err != nil {
			t.Fatal(err)
		}
	}
	return work
}

// exampleDirs lists the directories of examples/ that hold Terraform files, relative to the
// repository.
func exampleDirs(t *testing.T) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(filepath.Join(repoRoot, "examples"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(p) != ".tf" {
			return err
		}
		rel, err := filepath.Rel(repoRoot, filepath.Dir(p))
		if err == nil && !slices.Contains(dirs, rel) {
			dirs = append(dirs, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 5 {
		t.Fatalf("found %d example directories: the walk is broken", len(dirs))
	}
	return dirs
}

// exampleFileDirs maps the text of each Terraform file of the example directories (trimmed) to
// its path, relative to the repository.
func exampleFileDirs(t *testing.T, dirs []string) map[string]string {
	t.Helper()
	files := map[string]string{}
	for _, dir := range dirs {
		tfs, err := filepath.Glob(filepath.Join(repoRoot, dir, "*.tf"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range tfs {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			files[strings.TrimSpace(string(data))] = filepath.Join(dir, filepath.Base(f))
		}
	}
	return files
}

type docBlock struct{ source, text string }

var terraformBlock = regexp.MustCompile("(?s)```(?:terraform|hcl)\n(.*?)```")

// docBlocks returns the terraform code blocks of docs/.
func docBlocks(t *testing.T) []docBlock {
	t.Helper()
	var out []docBlock
	err := filepath.WalkDir(filepath.Join(repoRoot, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(p) != ".md" {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, p)
		for _, m := range terraformBlock.FindAllStringSubmatch(string(data), -1) {
			out = append(out, docBlock{source: rel, text: m[1]})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 5 {
		t.Fatalf("found %d terraform blocks in docs/: the walk is broken", len(out))
	}
	return out
}

func readAll(t *testing.T, dir string) string {
	t.Helper()
	var all strings.Builder
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if filepath.Ext(e.Name()) == ".tf" {
			data, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			all.Write(data)
		}
	}
	return all.String()
}

func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			if d.Name() == ".terraform" || d.Name() == ".kubewin" {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		copyFile(t, p, filepath.Join(dst, rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, fi.Mode().Perm()); err != nil {
		t.Fatal(err)
	}
}

// The acs_apimodel page's "Return value" names every attribute the function returns.
func TestACSAPIModelReturnDocumented(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "templates", "functions", "acs_apimodel.md.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	_, doc, _ := strings.Cut(string(raw), "## Return value")
	var check func(prefix string, types map[string]attr.Type)
	check = func(prefix string, types map[string]attr.Type) {
		for name, typ := range types {
			if !strings.Contains(doc, "`"+name+"`") {
				t.Errorf("the acs_apimodel page's return value does not name %s%s", prefix, name)
			}
			if o, ok := typ.(basetypes.ObjectType); ok {
				check(prefix+name+".", o.AttrTypes)
			}
			if l, ok := typ.(basetypes.ListType); ok {
				if o, ok := l.ElemType.(basetypes.ObjectType); ok {
					check(prefix+name+".", o.AttrTypes)
				}
			}
		}
	}
	check("", acsResultTypes)
}
