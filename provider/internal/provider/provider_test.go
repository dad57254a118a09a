package provider

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"

	"github.com/kubewin/kubewin/internal/testkit/testenv"
)

var testAccProtoV6ProviderFactories = map[string]func() (tfprotov6.ProviderServer, error){
	"kubewin": providerserver.NewProtocol6WithError(New("test")()),
}

// TestMain runs the acceptance tests (with TF_ACC=1, which make test sets) against the real
// terraform CLI from the test environment, or the CLI named by TF_ACC_TERRAFORM_PATH (OpenTofu's
// tofu, with TF_ACC_PROVIDER_HOST=registry.opentofu.org).
func TestMain(m *testing.M) {
	if err := pinGoCaches(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if os.Getenv("TF_ACC_TERRAFORM_PATH") == "" {
		tf, err := testenv.Binary("terraform")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if err := os.Setenv("TF_ACC_TERRAFORM_PATH", tf); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	// The node pools' machines run the nodeboot of this tree.
	dir, err := os.MkdirTemp("", "kubewin-provider-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "nodeboot"), "../../../nodeboot")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build nodeboot: %v\n%s", err, out)
		os.Exit(1)
	}
	nodebootDir = dir
	// Failed joins save their diagnostics bundle in the user's cache directory: the tests' is
	// removed with dir.
	if err := os.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := startARM(dir); err != nil {
		fmt.Fprintf(os.Stderr, "the azure target: %v\n", err)
		os.Exit(1)
	}
	// A CLI configuration file that does not exist only adds warnings to every run.
	if f := os.Getenv("TF_CLI_CONFIG_FILE"); f != "" {
		if _, err := os.Stat(f); err != nil {
			if err := os.Unsetenv("TF_CLI_CONFIG_FILE"); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		}
	}
	code := m.Run()
	if armServer != nil {
		if err := armServer.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "the ARM test server: %v\n", err)
			code = max(code, 1)
		}
	}
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// pinGoCaches sets GOCACHE and GOMODCACHE to the go command's current values, so that the builds
// the tests run (nodeboot, the provider) use the user's caches after XDG_CACHE_HOME (below) or
// HOME (some tests) moves: otherwise go would build the provider from an empty cache, minutes on
// two cores.
func pinGoCaches() error {
	out, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE").Output()
	if err != nil {
		return fmt.Errorf("go env: %w", err)
	}
	vals := strings.Split(strings.TrimSpace(string(out)), "\n")
	for i, k := range []string{"GOCACHE", "GOMODCACHE"} {
		if i < len(vals) && vals[i] != "" {
			if err := os.Setenv(k, vals[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// nodebootDir holds the nodeboot binary built for the tests.
var nodebootDir string
