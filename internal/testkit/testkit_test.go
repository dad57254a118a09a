package testkit_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const module = "github.com/kubewin/kubewin"

// products are the binaries kubewin ships: the name design/packages.md gives each, its main
// package and the platform it is built for.
var products = []struct{ name, pkg, goos string }{
	{"provider", "./provider", ""},
	{"packer plugin", "./packer/packer-plugin-kubewin", ""},
	{"nodeboot", "./nodeboot", ""},
	{"nodeboot.exe", "./nodeboot", "windows"},
}

// goList runs go list in the module's root and returns the module's packages it printed,
// relative to the module ("" for the root).
func goList(t *testing.T, root, goos string, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = root
	if goos != "" {
		cmd.Env = append(cmd.Environ(), "GOOS="+goos, "GOARCH=amd64")
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s (GOOS=%q): %v", strings.Join(args, " "), goos, err)
	}
	var mine []string
	for _, p := range strings.Fields(string(out)) {
		if p == module || strings.HasPrefix(p, module+"/") {
			mine = append(mine, strings.TrimPrefix(strings.TrimPrefix(p, module), "/"))
		}
	}
	return mine
}

func harness(pkg string) bool {
	return pkg == "internal/testkit" || strings.HasPrefix(pkg, "internal/testkit/")
}

// shippedIn maps each of the module's packages to the products whose import graph holds it.
func shippedIn(t *testing.T, root string) map[string][]string {
	t.Helper()
	in := map[string][]string{}
	for _, p := range products {
		for _, d := range goList(t, root, p.goos, "-deps", p.pkg) {
			in[d] = append(in[d], p.name)
		}
	}
	return in
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// TestProductsDoNotImportTestkit keeps the harness out of what ships, and checks that every
// package below internal/ (but testkit's) ships in at least one product binary.
func TestProductsDoNotImportTestkit(t *testing.T) {
	root := moduleRoot(t)
	in := shippedIn(t, root)
	for pkg, products := range in {
		if harness(pkg) {
			t.Errorf("%s import the test harness package %s", strings.Join(products, ", "), pkg)
		}
	}
	n := 0
	for _, pkg := range goList(t, root, "", "./internal/...") {
		if harness(pkg) {
			continue
		}
		n++
		if len(in[pkg]) == 0 {
			t.Errorf("%s is in no product binary: move it below internal/testkit if it is test infrastructure, or remove it", pkg)
		}
	}
	if n == 0 {
		t.Fatal("go list ./internal/... listed no package outside internal/testkit")
	}
}

// packageRow is a row of design/packages.md's table: | `path` | ships in | what it does | I/O |.
var packageRow = regexp.MustCompile("^\\| `([^`]+)` \\| ([^|]+) \\|")

// TestPackagesDoc checks that design/packages.md lists every package of the module once, with
// the product binaries it ships in ("—" for none), as go list computes them.
func TestPackagesDoc(t *testing.T) {
	root := moduleRoot(t)
	raw, err := os.ReadFile(filepath.Join(root, "design", "packages.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := map[string]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		if m := packageRow.FindStringSubmatch(line); m != nil {
			if _, dup := doc[m[1]]; dup {
				t.Errorf("design/packages.md lists %s twice", m[1])
			}
			doc[m[1]] = strings.TrimSpace(m[2])
		}
	}
	in := shippedIn(t, root)
	all := goList(t, root, "", "./...")
	listed := map[string]bool{}
	for _, pkg := range all {
		name := pkg
		if name == "" {
			name = "."
		}
		listed[name] = true
		want := strings.Join(in[pkg], ", ")
		if want == "" {
			want = "—"
		}
		got, ok := doc[name]
		switch {
		case !ok:
			t.Errorf("design/packages.md does not list %s (ships in: %s)", name, want)
		case got != want:
			t.Errorf("design/packages.md says %s ships in %q; it ships in %q", name, got, want)
		}
	}
	for name := range doc {
		if !listed[name] {
			t.Errorf("design/packages.md lists %s, which is not a package of the module", name)
		}
	}
}
