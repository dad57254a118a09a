package node

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"

	"github.com/kubewin/kubewin/internal/api"
	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/guest"
	"github.com/kubewin/kubewin/internal/testkit/guesttest"
)

func TestMain(m *testing.M) {
	log.SetOutput(io.Discard) // the SDK logs every elevated command it wraps
	os.Exit(m.Run())
}

// recorder is a communicator that records every call in order (the SDK's MockCommunicator
// keeps only the last) and answers commands through respond.
type recorder struct {
	mu       sync.Mutex
	calls    []string          // "run: <command, PowerShell decoded>" and "upload: <path>"
	uploads  map[string][]byte // by path
	respond  func(script string) (stdout string, status int)
	download map[string][]byte
}

func (r *recorder) Start(_ context.Context, rc *packersdk.RemoteCmd) error {
	script := guesttest.Decode(rc.Command)
	r.mu.Lock()
	r.calls = append(r.calls, "run: "+script)
	r.mu.Unlock()
	out, status := "", 0
	if r.respond != nil {
		out, status = r.respond(script)
	}
	go func() {
		if rc.Stdout != nil {
			_, _ = io.WriteString(rc.Stdout, out)
		}
		rc.SetExited(status)
	}()
	return nil
}

func (r *recorder) Upload(path string, in io.Reader, _ *os.FileInfo) error {
	b, err := io.ReadAll(in)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, "upload: "+path)
	if r.uploads == nil {
		r.uploads = map[string][]byte{}
	}
	r.uploads[path] = b
	return err
}

func (r *recorder) UploadDir(string, string, []string) error { return fmt.Errorf("not used") }

func (r *recorder) Download(path string, w io.Writer) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, "download: "+path)
	data, ok := r.download[path]
	if !ok {
		return fmt.Errorf("%s: no such file", path)
	}
	_, err := w.Write(data)
	return err
}

func (r *recorder) DownloadDir(string, string, []string) error { return fmt.Errorf("not used") }

func testPlan(t *testing.T) (v1alpha1.ImageManifest, string) {
	t.Helper()
	sum := strings.Repeat("a", 64)
	m := v1alpha1.ImageManifest{
		APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindImageManifest, WindowsBuild: v1alpha1.WindowsServer2022,
		KubernetesVersion: "v1.37.1", Runtime: v1alpha1.RuntimeInfo{Name: v1alpha1.RuntimeContainerd, Version: "2.1.4"},
		PauseImage:      v1alpha1.PauseImage{Reference: "registry.k8s.io/pause:3.10.2", Digest: "sha256:" + sum},
		NodebootVersion: "0.1.0",
		Files: []v1alpha1.File{
			{Path: "k/kubelet.exe", SHA256: sum, Size: 10, Source: "https://dl.k8s.io/release/v1.37.1/bin/windows/amd64/kubelet.exe"},
			{Path: "k/nodeboot.exe", SHA256: strings.Repeat("b", 64), Size: 10, Source: "https://example.test/nodeboot's build/nodeboot.exe"},
		},
	}
	doc, err := api.EncodeJSON(m)
	if err != nil {
		t.Fatal(err)
	}
	return m, string(doc)
}

func installed(t *testing.T, m v1alpha1.ImageManifest) []byte {
	t.Helper()
	m.PauseImage.Archive = guest.PauseArchive
	m.Files = append(m.Files, v1alpha1.File{Path: guest.PauseArchive, SHA256: strings.Repeat("c", 64), Size: 3})
	b, err := api.EncodeJSON(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// elevated returns the decoded command an elevated runner script wraps.
func elevated(t *testing.T, r *recorder, call string) string {
	t.Helper()
	m := regexp.MustCompile(`-file "([^"]+)"`).FindStringSubmatch(call)
	if m == nil {
		t.Fatalf("not an elevated runner: %s", call)
	}
	script, ok := r.uploads[m[1]]
	if !ok {
		t.Fatalf("elevated runner %s was not uploaded", m[1])
	}
	return guesttest.Decode(string(script))
}

func TestProvisionWindowsGuestFetch(t *testing.T) {
	plan, doc := testPlan(t)
	var p Provisioner
	err := p.Prepare(map[string]any{
		"release": doc, "elevated_user": "packer", "elevated_password": "s3cret",
		"mirror": "http://mirror.example.test/kubewin", "parallel": 6,
		"manifest_output": filepath.Join(t.TempDir(), "out", "manifest.json"),
	})
	if err != nil {
		t.Fatal(err)
	}
	p.restartPoll = time.Millisecond
	boots := 0
	r := &recorder{download: map[string][]byte{`C:\ProgramData\kubewin\image-manifest.json`: installed(t, plan)}}
	r.respond = func(script string) (string, int) {
		switch {
		case strings.Contains(script, "LastBootUpTime"):
			boots++
			if boots < 3 {
				return "boot 2026-11-21T08:00:00.0000000Z\n", 0
			}
			return "boot 2026-11-21T08:03:00.0000000Z\n", 0
		case strings.Contains(script, "packer-elevated-shell"), strings.HasPrefix(script, "powershell -executionpolicy bypass -file"):
			// The elevated runner: the feature script inside exits 3010 (restart needed).
			if strings.Contains(guesttest.Decode(string(r.lastUpload())), "Install-WindowsFeature") {
				return "", 3010
			}
		}
		return "", 0
	}
	ui := &packersdk.MockUi{}
	if err := p.Provision(context.Background(), ui, r, map[string]any{"ConnType": "winrm"}); err != nil {
		t.Fatalf("provision: %v\ncalls:\n%s", err, strings.Join(r.calls, "\n"))
	}

	// The calls, in order; elevated ones are checked through the script they run.
	var steps []string
	for _, c := range r.calls {
		switch {
		case strings.HasPrefix(c, "upload: C:/Windows/Temp/packer-elevated-shell-"):
			continue
		case strings.HasPrefix(c, "run: powershell -executionpolicy bypass -file"):
			steps = append(steps, "elevated: "+elevated(t, r, c))
		default:
			steps = append(steps, c)
		}
	}
	want := []*regexp.Regexp{
		regexp.MustCompile(`(?s)^elevated: .*foreach \(\$name in @\('Containers'\)\).*Install-WindowsFeature -Name \$name.*exit 3010`),
		regexp.MustCompile(`(?s)^run: .*LastBootUpTime`),
		regexp.MustCompile(`^run: shutdown /r /f /t 5 `),
		regexp.MustCompile(`(?s)^run: .*LastBootUpTime`),
		regexp.MustCompile(`(?s)^run: .*LastBootUpTime`),
		// nodeboot comes from the mirror, verified; the path is a PowerShell literal.
		regexp.MustCompile(`(?s)^run: \$ErrorActionPreference = 'Stop'.*\$dst = 'C:\\k\\nodeboot\.exe'; \$want = 'b{64}'; ` +
			`\$url = 'http://mirror\.example\.test/kubewin/k/nodeboot\.exe'.*Invoke-WebRequest -UseBasicParsing -Uri \$url `),
		regexp.MustCompile(`(?s)^run: .*New-Item -ItemType Directory -Force -Path 'C:\\ProgramData\\kubewin\\bake'`),
		regexp.MustCompile(`^upload: C:\\ProgramData\\kubewin\\bake\\plan\.json$`),
		regexp.MustCompile(`(?s)^elevated: .*& 'C:\\k\\nodeboot\.exe' bake --manifest 'C:\\ProgramData\\kubewin\\bake\\plan\.json' ` +
			`--parallel 6 --mirror 'http://mirror\.example\.test/kubewin' --pull-pause 'ProgramData/kubewin/images/pause\.tar'\nexit \$LASTEXITCODE`),
		regexp.MustCompile(`^download: C:\\ProgramData\\kubewin\\image-manifest\.json$`),
	}
	if len(steps) != len(want) {
		t.Fatalf("got %d calls, want %d:\n%s", len(steps), len(want), strings.Join(steps, "\n---\n"))
	}
	for i, w := range want {
		if !w.MatchString(steps[i]) {
			t.Errorf("call %d:\n%s\ndoes not match %s", i, steps[i], w)
		}
	}
	if _, err := os.Stat(p.config.ManifestOutput); err != nil {
		t.Errorf("manifest_output: %v", err)
	}
	for _, c := range r.calls {
		if strings.Contains(c, "s3cret") && !strings.Contains(c, "packer-elevated-shell") {
			t.Errorf("the password appears in a command: %s", c)
		}
	}
}

// Hyper-V isolation, asked for by the release (the kubewin-release data source's
// hyperv_isolation) or by the provisioner's own hyperv_isolation, installs the Hyper-V feature
// with the Containers feature (one script, one restart) and bakes a plan that records both
// isolation modes, which nodeboot bake configures containerd from; a Docker release is refused
// at prepare either way, and a guest that cannot install Hyper-V fails the build saying it needs
// nested virtualization.
func TestProvisionHyperV(t *testing.T) {
	plan, doc := testPlan(t)
	plan.Isolation = []v1alpha1.Isolation{v1alpha1.IsolationProcess, v1alpha1.IsolationHyperV}
	isolated, err := api.EncodeJSON(plan)
	if err != nil {
		t.Fatal(err)
	}
	var p Provisioner
	for _, tc := range []struct {
		name   string
		config map[string]any
	}{
		{"release", map[string]any{"release": string(isolated)}},
		{"provisioner", map[string]any{"release": doc, "hyperv_isolation": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p = Provisioner{}
			tc.config["manifest_output"] = filepath.Join(t.TempDir(), "m.json")
			if err := p.Prepare(tc.config); err != nil {
				t.Fatal(err)
			}
			p.restartPoll = time.Millisecond
			boots := 0
			r := &recorder{download: map[string][]byte{`C:\ProgramData\kubewin\image-manifest.json`: installed(t, plan)}}
			r.respond = func(script string) (string, int) {
				switch {
				case strings.Contains(script, "LastBootUpTime"):
					boots++
					return fmt.Sprintf("boot 2026-11-21T08:0%d:00.0000000Z\n", min(boots, 2)), 0
				case strings.Contains(script, "Install-WindowsFeature"):
					return "", 3010
				}
				return "", 0
			}
			ui := &packersdk.MockUi{}
			if err := p.Provision(context.Background(), ui, r, map[string]any{"ConnType": "winrm"}); err != nil {
				t.Fatalf("provision: %v\ncalls:\n%s", err, strings.Join(r.calls, "\n"))
			}
			all := strings.Join(r.calls, "\n")
			if n := strings.Count(all, "Install-WindowsFeature"); n != 1 || !strings.Contains(all, "foreach ($name in @('Containers','Hyper-V'))") {
				t.Errorf("want one script installing Containers and Hyper-V, got %d:\n%s", n, all)
			}
			if n := strings.Count(all, "run: shutdown /r"); n != 1 {
				t.Errorf("%d restarts, want 1", n)
			}
			var baked v1alpha1.ImageManifest
			if err := json.Unmarshal(r.uploads[`C:\ProgramData\kubewin\bake\plan.json`], &baked); err != nil {
				t.Fatal(err)
			}
			if !baked.HyperV() || !slices.Equal(baked.Isolation, plan.Isolation) {
				t.Errorf("the bake plan records isolation %v, want %v", baked.Isolation, plan.Isolation)
			}
			if !strings.Contains(ui.SayMessages[0].Message+ui.SayMessages[1].Message, "enabling the Windows Containers and Hyper-V features") {
				t.Errorf("messages: %v", ui.SayMessages)
			}
		})
	}

	// A guest without virtualization extensions: Install-WindowsFeature Hyper-V fails.
	r := &recorder{respond: func(script string) (string, int) {
		if strings.Contains(script, "Install-WindowsFeature") {
			return "", 1
		}
		return "", 0
	}}
	err = p.Provision(context.Background(), &packersdk.MockUi{}, r, map[string]any{})
	if err == nil || !strings.Contains(err.Error(), "enable the Containers and Hyper-V features failed on the guest with exit status 1") ||
		!strings.Contains(err.Error(), "nested virtualization") {
		t.Errorf("Hyper-V feature failure: %v", err)
	}

	docker := plan
	docker.Isolation = nil
	docker.Runtime = v1alpha1.RuntimeInfo{Name: v1alpha1.RuntimeDocker, Version: "28.3.3", CRIDockerdVersion: "0.3.18"}
	b, err := api.EncodeJSON(docker)
	if err != nil {
		t.Fatal(err)
	}
	err = (&Provisioner{}).Prepare(map[string]any{"release": string(b), "hyperv_isolation": true})
	if err == nil || !strings.Contains(err.Error(), "hyperv_isolation is for containerd images only, and this release bakes docker 28.3.3") {
		t.Errorf("Hyper-V on a Docker release: %v", err)
	}
	docker.Isolation = plan.Isolation
	if b, err = api.EncodeJSON(docker); err != nil {
		t.Fatal(err)
	}
	err = (&Provisioner{}).Prepare(map[string]any{"release": string(b)})
	if err == nil || !strings.Contains(err.Error(), "Hyper-V isolation is configured only with containerd") {
		t.Errorf("a Docker release with Hyper-V isolation: %v", err)
	}
}

func (r *recorder) lastUpload() []byte {
	for i := len(r.calls) - 1; i >= 0; i-- {
		if p, ok := strings.CutPrefix(r.calls[i], "upload: "); ok {
			return r.uploads[p]
		}
	}
	return nil
}

func TestProvisionFailures(t *testing.T) {
	plan, doc := testPlan(t)
	for _, tc := range []struct {
		name    string
		failing string // a substring of the script that fails
		status  int
		want    string
	}{
		{"bake", "bake --manifest", 1, "nodeboot bake failed on the guest with exit status 1"},
		{"nodeboot fetch", "Invoke-WebRequest", 1, "fetch nodeboot failed on the guest with exit status 1"},
		{"feature", "Install-WindowsFeature", 2, "enable the Containers feature failed on the guest with exit status 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p Provisioner
			if err := p.Prepare(map[string]any{"release": doc, "manifest_output": filepath.Join(t.TempDir(), "m.json")}); err != nil {
				t.Fatal(err)
			}
			r := &recorder{download: map[string][]byte{`C:\ProgramData\kubewin\image-manifest.json`: installed(t, plan)}}
			r.respond = func(script string) (string, int) {
				if strings.Contains(script, tc.failing) {
					return "", tc.status
				}
				return "", 0
			}
			err := p.Provision(context.Background(), &packersdk.MockUi{}, r, map[string]any{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// Over SSH the Windows guest gets forward slashes; host-cache creates each directory, quoted,
// before uploading into it, including directories with spaces.
func TestProvisionHostCacheOverSSH(t *testing.T) {
	dir := t.TempDir()
	// Pre-fill the cache so nothing is downloaded: content-addressed by sha256.
	files := map[string][]byte{"k/kubelet.exe": []byte("kubelet"), "Program Files/it's here/tool.exe": []byte("tool"),
		"k/nodeboot.exe": []byte("nodeboot")}
	plan, _ := testPlan(t)
	plan.Files = nil
	for path, data := range files {
		sum := sha256hex(data)
		if err := os.MkdirAll(filepath.Join(dir, "sha256"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "sha256", sum), data, 0o644); err != nil {
			t.Fatal(err)
		}
		plan.Files = append(plan.Files, v1alpha1.File{Path: path, SHA256: sum, Size: int64(len(data))})
	}
	plan.PauseImage.Archive = "k/kubelet.exe" // already listed: no registry needed
	b, err := api.EncodeJSON(plan)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	var p Provisioner
	if err := p.Prepare(map[string]any{"release": doc, "transfer": "host-cache", "cache_dir": dir, "install_containers_feature": false,
		"manifest_output": filepath.Join(t.TempDir(), "m.json")}); err != nil {
		t.Fatal(err)
	}
	r := &recorder{download: map[string][]byte{`C:/ProgramData/kubewin/image-manifest.json`: b}}
	if err := p.Provision(context.Background(), &packersdk.MockUi{}, r, map[string]any{"ConnType": "ssh"}); err != nil {
		t.Fatalf("provision: %v\n%s", err, strings.Join(r.calls, "\n"))
	}
	all := strings.Join(r.calls, "\n")
	for _, want := range []string{
		`New-Item -ItemType Directory -Force -Path 'C:\Program Files\it''s here'`,
		"upload: C:/Program Files/it's here/tool.exe",
		"upload: C:/k/kubelet.exe",
		"upload: C:/ProgramData/kubewin/bake/plan.json",
		"& 'C:\\k\\nodeboot.exe' bake --manifest 'C:\\ProgramData\\kubewin\\bake\\plan.json' --parallel 4\nexit $LASTEXITCODE",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no call contains %q:\n%s", want, all)
		}
	}
	if strings.Contains(all, "Invoke-WebRequest") || strings.Contains(all, "--pull-pause") || strings.Contains(all, "--mirror") {
		t.Errorf("host-cache made the guest download:\n%s", all)
	}
	if !bytes.Equal(r.uploads["C:/k/kubelet.exe"], []byte("kubelet")) {
		t.Errorf("uploaded kubelet.exe = %q", r.uploads["C:/k/kubelet.exe"])
	}
}

func TestPrepareReportsEveryError(t *testing.T) {
	var p Provisioner
	err := p.Prepare(map[string]any{"transfer": "carrier-pigeon", "parallel": -1, "mirror": "ftp://x", "elevated_password": "x", "sim_root": "/x"})
	if err == nil {
		t.Fatal("want errors")
	}
	for _, want := range []string{
		"release is required", `transfer "carrier-pigeon" is not a transfer mode`, "parallel -1 must be positive",
		`mirror "ftp://x" is not an http(s) URL`, "elevated_password is set without elevated_user", "sim_root and sim_nodeboot go together",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
	if err := p.Prepare(map[string]any{"release": `{"kind": "NodeConfig"}`}); err == nil || !strings.Contains(err.Error(),
		"release is not a kubewin bake plan") {
		t.Errorf("a NodeConfig as release: %v", err)
	}
}

func sha256hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestPrepareImages(t *testing.T) {
	var p Provisioner
	err := p.Prepare(map[string]any{"release": "<unknown>", "images": []string{"Not A Reference", "example.com/app:1", "example.com/app:1"},
		"registry_credentials": []map[string]any{{"server": "", "username": "u", "password": "p"}, {"server": "example.com", "username": "u"},
			{"server": "docker.io", "username": "u", "password": "hub-secret-1"}, {"server": "index.docker.io", "username": "v", "password": "q"}}})
	if err == nil {
		t.Fatal("want errors")
	}
	for _, want := range []string{
		`images[0] "Not A Reference" is not an image reference`, "use registry/repository:tag or registry/repository@sha256:<digest>",
		`images[2] "example.com/app:1" is images[1] again: list each image once`,
		`registry_credentials[0].server "" is not a registry host name`,
		"registry_credentials[1] (example.com) needs both username and password",
		"registry_credentials[3]: index.docker.io has credentials already: give one block per registry",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
	// The password is a secret Packer filters out of its logs.
	if got := packersdk.LogSecretFilter.FilterString("login hub-secret-1"); strings.Contains(got, "hub-secret-1") {
		t.Errorf("the registry password is not filtered from the logs: %q", got)
	}
}

// An installed image's manifest, whose workload images' archives the bake deleted, is not a plan:
// it is refused when the provisioner is prepared, not on the guest after the uploads.
func TestPrepareRefusesInstalledManifest(t *testing.T) {
	plan, _ := testPlan(t)
	plan.WorkloadImages = []v1alpha1.WorkloadImage{{Reference: "example.com/app:1", Digest: "sha256:" + strings.Repeat("a", 64),
		OSVersion: plan.WindowsBuild.OSVersion() + ".1", Size: 10}}
	doc, err := api.EncodeJSON(plan)
	if err != nil {
		t.Fatal(err)
	}
	var p Provisioner
	err = p.Prepare(map[string]any{"release": string(doc)})
	if err == nil || !strings.Contains(err.Error(), "release: workloadImages[0] (example.com/app:1) has no archive") {
		t.Errorf("prepare: %v", err)
	}
}
