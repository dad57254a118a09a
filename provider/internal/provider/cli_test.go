package provider

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// cli runs the real terraform (or tofu) CLI on a configuration directory with this tree's
// provider (a dev override), as a user does.
type cli struct {
	tf, dir string
	env     []string
}

var providerBuild struct {
	once sync.Once
	dir  string
	err  error
}

// providerBinDir builds this tree's provider once per test binary.
func providerBinDir(t testing.TB) string {
	t.Helper()
	providerBuild.once.Do(func() {
		providerBuild.dir = filepath.Join(nodebootDir, "provider")
		out, err := exec.Command("go", "build", "-o", filepath.Join(providerBuild.dir, "terraform-provider-kubewin"), "../../../provider").CombinedOutput()
		if err != nil {
			providerBuild.err = fmt.Errorf("build the provider: %v\n%s", err, out)
		}
	})
	if providerBuild.err != nil {
		t.Fatal(providerBuild.err)
	}
	return providerBuild.dir
}

// newCLI prepares dir for the CLI of TF_ACC_TERRAFORM_PATH; config, when not empty, is written
// to main.tf with the provider's source.
func newCLI(t testing.TB, dir, config string) *cli {
	t.Helper()
	rc := filepath.Join(t.TempDir(), "terraformrc")
	// "kubewin/kubewin" is the provider's address under each CLI's own registry host.
	overrides := fmt.Sprintf("provider_installation {\n  dev_overrides {\n    \"kubewin/kubewin\" = %q\n  }\n  direct {}\n}\n", providerBinDir(t))
	if err := os.WriteFile(rc, []byte(overrides), 0o644); err != nil {
		t.Fatal(err)
	}
	if config != "" {
		config = "terraform {\n  required_providers {\n    kubewin = { source = \"kubewin/kubewin\" }\n  }\n}\n\n" + config
		if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(config), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return &cli{tf: os.Getenv("TF_ACC_TERRAFORM_PATH"), dir: dir, env: append(os.Environ(), "TF_CLI_CONFIG_FILE="+rc, "TF_IN_AUTOMATION=1",
		"CHECKPOINT_DISABLE=1")}
}

// run runs a CLI command, fails the test if it fails, and returns how long it took.
func (c *cli) run(t testing.TB, args ...string) time.Duration {
	t.Helper()
	took, out, err := c.try(args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(c.tf), strings.Join(args, " "), err, out)
	}
	return took
}

// try runs a CLI command and returns its output.
func (c *cli) try(args ...string) (time.Duration, string, error) {
	cmd := exec.Command(c.tf, append([]string{"-chdir=" + c.dir}, args...)...)
	cmd.Env = c.env
	start := time.Now()
	out, err := cmd.CombinedOutput()
	return time.Since(start), string(out), err
}
