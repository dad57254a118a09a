package kubewin_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubewin/kubewin/internal/testkit/testenv"
)

// localPathBlock is a shell block of the README that TestReadmeLocalPath runs.
var localPathBlock = regexp.MustCompile("(?s)<!-- TestReadmeLocalPath [^>]*-->\n```sh\n(.*?)```")

// The README's local path, run as written: its two marked shell blocks (build and start the
// release mirror, bake, apply, show the nodes; then destroy and stop the mirror) run in one bash,
// stopping at the first failing command, in a copy of this checkout whose .testbin is this one's,
// with no network needed beyond 127.0.0.1 and no packer or terraform on PATH but what the README
// puts there. Between the blocks it records the Nodes; after them it checks that the nodes
// joined, and that nothing is left: no resource in the state, no process, no mirror. Terraform's
// approval prompts are answered by TF_CLI_ARGS_apply and TF_CLI_ARGS_destroy. It takes about
// three minutes on two idle cores with a warm Go build cache: most of it linking bin/ in the
// copy, baking and starting the control plane.
func TestReadmeLocalPath(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the README's local path runs on Linux")
	}
	if os.Getenv("TF_ACC") == "" {
		t.Skip("TF_ACC is not set: the README's local path runs make, packer and terraform (make test sets it)")
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	for _, m := range localPathBlock.FindAllStringSubmatch(string(readme), -1) {
		blocks = append(blocks, m[1])
	}
	if len(blocks) != 2 {
		t.Fatalf("README.md has %d shell blocks marked <!-- TestReadmeLocalPath ... -->: want 2, the local path and its clean-up", len(blocks))
	}
	testbin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	repo := filepath.Join(work, "kubewin")
	copyCheckout(t, repo)
	if err := os.Symlink(testbin, filepath.Join(repo, ".testbin")); err != nil {
		t.Fatal(err)
	}
	env := readmeEnv(t, work, testbin)
	t.Cleanup(func() { cleanUpLocalPath(t, repo, testbin, env) })

	nodesFile := filepath.Join(work, "nodes.json")
	record := "kubectl --kubeconfig \"$(terraform -chdir=examples/local output -raw kubeconfig_path)\" get nodes -o json >'" + nodesFile + "'\n"
	// Each command is traced into the log with the seconds since the start.
	script := "set -euxo pipefail\nPS4='+ [${SECONDS}s] '\n" + blocks[0] + record + blocks[1]
	logFile := filepath.Join(work, "readme.log")
	err = run(repo, env, logFile, 20*time.Minute, "bash", "-c", script)
	out, _ := os.ReadFile(logFile)
	if err != nil {
		t.Fatalf("the README's local path failed: %v\n%s", err, tail(string(out), 6000))
	}
	for line := range strings.Lines(string(out)) {
		if strings.HasPrefix(line, "+ [") {
			t.Log(strings.TrimSpace(line))
		}
	}

	data, err := os.ReadFile(nodesFile)
	if err != nil {
		t.Fatal(err)
	}
	var nodes corev1.NodeList
	if err := json.Unmarshal(data, &nodes); err != nil {
		t.Fatalf("kubectl get nodes -o json: %v", err)
	}
	if len(nodes.Items) != 3 {
		t.Errorf("after terraform apply: %d nodes, want examples/local's 3", len(nodes.Items))
	}
	for _, n := range nodes.Items {
		ready := slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
			return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
		})
		if !ready || n.Labels[corev1.LabelOSStable] != "windows" || !strings.HasSuffix(n.Status.NodeInfo.OSImage, "(simulated)") {
			t.Errorf("node %s: Ready %v, os %q, OS image %q: want a Ready windows node whose OS image ends in (simulated)", n.Name, ready,
				n.Labels[corev1.LabelOSStable], n.Status.NodeInfo.OSImage)
		}
	}

	if left := stateResources(t, repo); left != 0 {
		t.Errorf("after terraform destroy the state holds %d resources", left)
	}
	if pids := processesOf(repo); len(pids) > 0 {
		t.Errorf("after the clean-up block, processes of the checkout still run: %v", pids)
	}
	if _, err := os.Stat(filepath.Join(repo, "bin", "release-mirror.pid")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after make release-mirror-stop, bin/release-mirror.pid: %v", err)
	}
}

// copyCheckout copies this checkout's files (tracked, and untracked but not ignored) to dst.
func copyCheckout(t *testing.T, dst string) {
	t.Helper()
	out, err := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for name := range strings.SplitSeq(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		fi, err := os.Lstat(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted, not yet committed
		}
		if err != nil {
			t.Fatal(err)
		}
		to := filepath.Join(dst, name)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(name)
			if err == nil {
				err = os.Symlink(target, to)
			}
			if err != nil {
				t.Fatal(err)
			}
			continue
		}
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, data, fi.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
}

// readmeEnv is the environment of a user's shell on a machine where only Go and the system's
// programs are on PATH: this process's, without packer, terraform or .testbin on PATH, without
// Terraform's, Packer's, kubewin's and make's variables, with Packer's plugins and configuration
// in work, Terraform's approvals given and no update checks.
func readmeEnv(t *testing.T, work, testbin string) []string {
	t.Helper()
	goPath, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	path := []string{filepath.Dir(goPath)}
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if slices.Contains(path, dir) || sameDir(dir, testbin) || isFile(filepath.Join(dir, "packer")) || isFile(filepath.Join(dir, "terraform")) {
			continue
		}
		path = append(path, dir)
	}
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name == "PATH" || strings.HasPrefix(name, "TF_") || strings.HasPrefix(name, "PACKER_") || strings.HasPrefix(name, "KUBEWIN_") ||
			slices.Contains([]string{"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES"}, name) {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "PATH="+strings.Join(path, string(os.PathListSeparator)), "CHECKPOINT_DISABLE=1",
		"PACKER_PLUGIN_PATH="+filepath.Join(work, "packer-plugins"), "PACKER_CONFIG_DIR="+filepath.Join(work, "packer-config"),
		"TF_INPUT=0", "TF_CLI_ARGS_apply=-auto-approve", "TF_CLI_ARGS_destroy=-auto-approve")
}

// cleanUpLocalPath undoes what a failed run left: the example's resources, the release mirror and
// any process still running from the copy.
func cleanUpLocalPath(t *testing.T, repo, testbin string, env []string) {
	if stateResources(t, repo) > 0 {
		env = append(env, "TF_CLI_CONFIG_FILE="+filepath.Join(repo, "bin", "terraformrc"))
		if err := run(repo, env, filepath.Join(repo, "cleanup.log"), 5*time.Minute, filepath.Join(testbin, "terraform"),
			"-chdir=examples/local", "destroy"); err != nil {
			t.Logf("clean-up: terraform destroy: %v (see %s)", err, filepath.Join(repo, "cleanup.log"))
		}
	}
	_ = run(repo, env, filepath.Join(repo, "cleanup.log"), time.Minute, "bash", "hack/release-mirror.sh", "stop")
	signal(processesOf(repo), syscall.SIGTERM)
	for deadline := time.Now().Add(10 * time.Second); len(processesOf(repo)) > 0 && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
	}
	signal(processesOf(repo), os.Kill)
}

func signal(pids []int, sig os.Signal) {
	for _, pid := range pids {
		if p, err := os.FindProcess(pid); err == nil {
			_ = p.Signal(sig)
		}
	}
}

// run runs a program in dir with env, its output into logFile, for at most timeout.
func run(dir string, env []string, logFile string, timeout time.Duration, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer func() { _ = out.Close() }()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, out, out
	return cmd.Run()
}

// stateResources counts the resources in examples/local's Terraform state in the copy.
func stateResources(t *testing.T, repo string) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repo, "examples", "local", "terraform.tfstate"))
	if errors.Is(err, fs.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	var state struct {
		Resources []json.RawMessage `json:"resources"`
	}
	if err := json.Unmarshal(data, &state); err != nil {
		t.Fatalf("examples/local/terraform.tfstate: %v", err)
	}
	return len(state.Resources)
}

// processesOf lists the processes whose command line names a file of the copy: the control
// plane, the nodes and the release mirror the README's commands start.
func processesOf(repo string) []int {
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var pids []int
	for _, f := range cmdlines {
		data, err := os.ReadFile(f)
		if err != nil || !strings.Contains(string(data), repo+string(filepath.Separator)) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(f))); err == nil && pid != os.Getpid() {
			pids = append(pids, pid)
		}
	}
	return pids
}

func sameDir(a, b string) bool {
	ra, errA := filepath.EvalSymlinks(a)
	rb, errB := filepath.EvalSymlinks(b)
	return errA == nil && errB == nil && ra == rb
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

// tail is the end of s, at most n bytes.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
