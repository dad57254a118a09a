package nodecmd

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
)

// containerdMinors are the containerd releases whose configuration loader reads what
// ContainerdConfig renders: one per minor that reads the CNI settings differently (2.2 and 2.3
// read them as 2.1 does). The loader is containerd's own, built at that release
// (internal/testkit/containerdconfig: dir, and -modfile when not the directory's go.mod).
var containerdMinors = []struct {
	version, dir, modfile string
	// plugin is the CRI plugin section that holds cni; images the one that holds the sandbox
	// image, under key sandbox.
	plugin, images, sandbox string
	// binDirs: the CNI binaries' directories are a list (bin_dirs), not a string (bin_dir).
	binDirs bool
}{
	{"1.7.27", "v1", "", "io.containerd.grpc.v1.cri", "io.containerd.grpc.v1.cri", "sandboxImage", false},
	{"2.0.14", "v2", "go.2.0.mod", "io.containerd.cri.v1.runtime", "io.containerd.cri.v1.images", "pinned_images.sandbox", false},
	{"2.1.4", "v2", "", "io.containerd.cri.v1.runtime", "io.containerd.cri.v1.images", "pinned_images.sandbox", true},
	{"2.4.2", "v2", "go.2.4.mod", "io.containerd.cri.v1.runtime", "io.containerd.cri.v1.images", "pinned_images.sandbox", true},
}

// TestContainerdLoadsRenderedConfig has containerd's own configuration loader, of each minor,
// read the config.toml rendered for it, and checks what containerd would run with: the CNI
// binaries and configuration directories, the sandbox image and, for an image with Hyper-V
// isolation, both runtime handlers. A key a minor does not read is dropped by containerd with
// only a log line; this catches it.
func TestContainerdLoadsRenderedConfig(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatal("the go command builds containerd's loader: ", err)
	}
	for _, minor := range containerdMinors {
		t.Run(minor.version, func(t *testing.T) {
			in := testInput(t, 36, v1alpha1.RuntimeContainerd)
			in.Manifest.Runtime.Version = minor.version
			in.Manifest.Isolation = []v1alpha1.Isolation{v1alpha1.IsolationProcess, v1alpha1.IsolationHyperV}
			c, err := ContainerdConfig(in.Manifest, in.Paths)
			if err != nil {
				t.Fatal(err)
			}
			conf := filepath.Join(t.TempDir(), "config.toml")
			if err := os.WriteFile(conf, c.Files[in.Paths.ContainerdConfigFile], 0o644); err != nil {
				t.Fatal(err)
			}
			loaded := loadContainerdConfig(t, minor.dir, minor.modfile, conf)

			cni, _ := lookup(loaded, minor.plugin, "cni").(map[string]any)
			var bins []string
			if minor.binDirs {
				for _, d := range asSlice(cni["binDirs"]) {
					s, ok := d.(string)
					if !ok {
						t.Fatalf("cni binDirs holds %v (%T), not a string", d, d)
					}
					bins = append(bins, s)
				}
			} else if d, _ := cni["binDir"].(string); d != "" {
				bins = []string{d}
			}
			if !slices.Equal(bins, []string{in.Paths.CNIBinDir}) {
				t.Errorf("containerd %s reads CNI binaries from %q, want %q (cni section: %v)", minor.version, bins, in.Paths.CNIBinDir, cni)
			}
			if got := cni["confDir"]; got != in.Paths.CNIConfDir {
				t.Errorf("containerd %s reads CNI configuration from %v, want %q", minor.version, got, in.Paths.CNIConfDir)
			}
			path := append([]string{minor.images}, strings.Split(minor.sandbox, ".")...)
			if got := lookup(loaded, path...); got != in.Manifest.PauseImage.Reference {
				t.Errorf("containerd %s runs sandboxes from %v, want %q", minor.version, got, in.Manifest.PauseImage.Reference)
			}
			checkRuntimeHandlers(t, minor.version, lookup(loaded, minor.plugin, "containerd"))
		})
	}
}

// checkRuntimeHandlers checks the CRI plugin's containerd section as containerd decoded it: the
// process handler is the default, and the Hyper-V handler is the runhcs shim with
// SandboxIsolation 1 (HYPERVISOR), as a RuntimeClass with handler runhcs-wcow-hypervisor needs.
func checkRuntimeHandlers(t *testing.T, version string, section any) {
	t.Helper()
	c, _ := section.(map[string]any)
	if got := c["defaultRuntimeName"]; got != ProcessHandler {
		t.Errorf("containerd %s runs pods without a RuntimeClass with %v, want %s", version, got, ProcessHandler)
	}
	process, _ := lookup(c, "runtimes", ProcessHandler).(map[string]any)
	hyperv, _ := lookup(c, "runtimes", HyperVHandler).(map[string]any)
	for name, h := range map[string]map[string]any{ProcessHandler: process, HyperVHandler: hyperv} {
		if got := h["runtimeType"]; got != "io.containerd.runhcs.v1" {
			t.Errorf("containerd %s: handler %s has runtime type %v, want io.containerd.runhcs.v1 (section: %v)", version, name, got, c)
		}
	}
	if got := lookup(process, "options", "SandboxIsolation"); got != nil && got != float64(0) {
		t.Errorf("containerd %s: %s has SandboxIsolation %v, want none (process)", version, ProcessHandler, got)
	}
	if got := lookup(hyperv, "options", "SandboxIsolation"); got != float64(1) {
		t.Errorf("containerd %s: %s has SandboxIsolation %v (%T), want 1 (HYPERVISOR)", version, HyperVHandler, got, got)
	}
	if got := lookup(hyperv, "options", "ScaleCpuLimitsToSandbox"); got != true {
		t.Errorf("containerd %s: %s has ScaleCpuLimitsToSandbox %v, want true", version, HyperVHandler, got)
	}
}

// loadContainerdConfig builds containerd's loader in dir (with modfile) and returns what it
// decoded from conf.
func loadContainerdConfig(t *testing.T, dir, modfile, conf string) map[string]any {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "containerdconfig")
	args := []string{"build", "-o", bin}
	if modfile != "" {
		args = append(args, "-modfile="+modfile)
	}
	build := exec.Command("go", append(args, ".")...)
	build.Dir = filepath.Join("..", "testkit", "containerdconfig", dir)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build containerd's loader (%s %s): %v\n%s", dir, modfile, err, out)
	}
	out, err := exec.Command(bin, conf).Output()
	if err != nil {
		t.Fatalf("containerd cannot load the rendered config: %v\n%s", err, stderr(err))
	}
	var loaded map[string]any
	if err := json.Unmarshal(out, &loaded); err != nil {
		t.Fatal(err)
	}
	return loaded
}

func stderr(err error) string {
	if e, ok := err.(*exec.ExitError); ok {
		return string(e.Stderr)
	}
	return ""
}

func lookup(m map[string]any, path ...string) any {
	var v any = m
	for _, k := range path {
		obj, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = obj[k]
	}
	return v
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}
