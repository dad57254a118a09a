//go:generate packer-sdc struct-markdown
//go:generate packer-sdc mapstructure-to-hcl2 -type Config

package local

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/hashicorp/packer-plugin-sdk/common"
	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
)

// Config of the kubewin-local builder.
type Config struct {
	common.PackerConfig `mapstructure:",squash"`

	// The image directory to write: the payload under `payload/` and the image manifest in
	// `kubewin-manifest.json`, the form the Terraform provider's local backend takes as a node
	// pool's `image`. It must not exist, unless the build runs with `-force`. Default
	// `output-<build name>`.
	OutputDirectory string `mapstructure:"output_directory"`
	// The Windows Server release the simulated machine runs: `2019`, `2022` or `2025`. The bake
	// refuses a pause image for another build, as a real runtime would. Default `2022`.
	WindowsVersion string `mapstructure:"windows_version"`
	// The nodeboot binary for this host, which runs the bake on the simulated machine. Default:
	// `nodeboot` in `KUBEWIN_BIN_PATH` or `PATH`.
	NodebootPath string `mapstructure:"nodeboot_path"`

	build v1alpha1.WindowsBuild
}

func (c *Config) prepare() error {
	var errs *packersdk.MultiError
	add := func(format string, a ...any) { errs = packersdk.MultiErrorAppend(errs, fmt.Errorf(format, a...)) }
	if c.OutputDirectory == "" {
		c.OutputDirectory = "output-" + c.PackerBuildName
	}
	if c.WindowsVersion == "" {
		c.WindowsVersion = "2022"
	}
	c.build, _ = v1alpha1.ParseWindowsVersion(c.WindowsVersion)
	if c.build == 0 {
		add("windows_version %q is not supported: use 2019, 2022 or 2025", c.WindowsVersion)
	}
	if c.NodebootPath == "" {
		c.NodebootPath = findNodeboot()
	}
	if c.NodebootPath == "" {
		add("nodeboot_path is not set and no nodeboot is in KUBEWIN_BIN_PATH or PATH: build it (make build) and set nodeboot_path")
	} else if abs, err := filepath.Abs(c.NodebootPath); err != nil {
		add("nodeboot_path %q: %w", c.NodebootPath, err)
	} else if fi, err := os.Stat(abs); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		add("nodeboot_path %q is not an executable file: build nodeboot (make build) and point nodeboot_path at it", c.NodebootPath)
	} else {
		c.NodebootPath = abs
	}
	if errs != nil && len(errs.Errors) > 0 {
		return errs
	}
	return nil
}

func findNodeboot() string {
	for _, dir := range filepath.SplitList(os.Getenv("KUBEWIN_BIN_PATH")) {
		if p := filepath.Join(dir, "nodeboot"); dir != "" {
			if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
				return p
			}
		}
	}
	p, _ := exec.LookPath("nodeboot")
	return p
}
