package testkit_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/kubewin/kubewin"

// products are the binaries kubewin ships, with the platforms they are built for.
var products = []struct{ pkg, goos string }{
	{"./provider", ""},
	{"./packer/packer-plugin-kubewin", ""},
	{"./nodeboot", ""},
	{"./nodeboot", "windows"},
}

// deps lists the module's packages in pkg's import graph, built for goos ("" for the host).
func deps(t *testing.T, root, pkg, goos string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", pkg)
	cmd.Dir = root
	if goos != "" {
		cmd.Env = append(cmd.Environ(), "GOOS="+goos, "GOARCH=amd64")
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s (GOOS=%q): %v", pkg, goos, err)
	}
	var mine []string
	for _, p := range strings.Fields(string(out)) {
		if p == module || strings.HasPrefix(p, module+"/") {
			mine = append(mine, strings.TrimPrefix(strings.TrimPrefix(p, module), "/"))
		}
	}
	return mine
}

// TestProductsDoNotImportTestkit keeps the harness out of what ships, and checks that every
// package below internal/ (but testkit's) ships in at least one product binary.
func TestProductsDoNotImportTestkit(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	shipped := map[string]bool{}
	for _, p := range products {
		for _, d := range deps(t, root, p.pkg, p.goos) {
			if d == "internal/testkit" || strings.HasPrefix(d, "internal/testkit/") {
				t.Errorf("%s (GOOS=%q) imports the test harness package %s", p.pkg, p.goos, d)
			}
			shipped[d] = true
		}
	}
	cmd := exec.Command("go", "list", "./internal/...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./internal/...: %v", err)
	}
	n := 0
	for _, p := range strings.Fields(string(out)) {
		rel := strings.TrimPrefix(p, module+"/")
		if rel == "internal/testkit" || strings.HasPrefix(rel, "internal/testkit/") {
			continue
		}
		n++
		if !shipped[rel] {
			t.Errorf("%s is in no product binary: move it below internal/testkit if it is test infrastructure, or remove it", rel)
		}
	}
	if n == 0 {
		t.Fatal("go list ./internal/... listed no package outside internal/testkit")
	}
}
