package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubewin/kubewin/internal/api"
	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/filesum"
	"github.com/kubewin/kubewin/internal/ociimage"
	"github.com/kubewin/kubewin/internal/sim/simmachine"
	"github.com/kubewin/kubewin/internal/testkit/ociregistry"
	"github.com/kubewin/kubewin/internal/testkit/releasemirror"
	"github.com/kubewin/kubewin/internal/testkit/testenv"
)

// testVersion is the version the plugin and nodeboot are built with for these tests.
const testVersion = "0.1.0"

// packerEnv builds the plugin and nodeboot once, installs the plugin with the real packer
// (packer plugins install --path) into a private plugin directory, and returns packer, the
// environment to run it with and the host nodeboot.
var packerEnv = sync.OnceValues(func() (*env, error) {
	dir, err := os.MkdirTemp("", "kubewin-packer-test-")
	if err != nil {
		return nil, err
	}
	packer, err := testenv.Binary("packer")
	if err != nil {
		return nil, err
	}
	e := &env{dir: dir, packer: packer, nodeboot: filepath.Join(dir, "nodeboot")}
	ld := "-X github.com/kubewin/kubewin/internal/version.Version=" + testVersion
	plugin := filepath.Join(dir, "packer-plugin-kubewin")
	for out, pkg := range map[string]string{plugin: ".", e.nodeboot: "../../nodeboot"} {
		if b, err := exec.Command("go", "build", "-ldflags", ld, "-o", out, pkg).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("build %s: %v\n%s", pkg, err, b)
		}
	}
	e.vars = append(os.Environ(), "PACKER_PLUGIN_PATH="+filepath.Join(dir, "plugins"), "PACKER_CONFIG_DIR="+dir, "CHECKPOINT_DISABLE=1",
		"PACKER_NO_COLOR=1")
	if b, err := e.command("plugins", "install", "--path", plugin, "github.com/kubewin/kubewin").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("packer plugins install: %v\n%s", err, b)
	}
	return e, nil
})

type env struct {
	dir, packer, nodeboot string
	vars                  []string
}

func (e *env) command(args ...string) *exec.Cmd {
	cmd := exec.Command(e.packer, args...)
	cmd.Env = e.vars
	return cmd
}

func testEnv(t testing.TB) *env {
	t.Helper()
	e, err := packerEnv()
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestMain(m *testing.M) {
	code := m.Run()
	if e, err := packerEnv(); err == nil {
		_ = os.RemoveAll(e.dir)
	}
	os.Exit(code)
}

// build runs packer build on a template and returns its output.
func (e *env) build(t testing.TB, dir, template string, args ...string) (string, error) {
	t.Helper()
	path := filepath.Join(dir, "build.pkr.hcl")
	if err := os.WriteFile(path, []byte(template), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := e.command(append(append([]string{"build"}, args...), path)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// upstream is a release mirror on 127.0.0.1 with random artifacts of realistic sizes.
type upstream struct {
	*releasemirror.Mirror
	URL string
}

func newUpstream(t testing.TB) *upstream {
	rng := rand.New(rand.NewPCG(1, 2))
	blob := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	m := releasemirror.New()
	m.AddKubernetes("v1.37.1", map[string][]byte{"kubelet.exe": blob(24 << 20), "kube-proxy.exe": blob(8 << 20), "kubeadm.exe": blob(8 << 20),
		"kube-log-runner.exe": blob(1 << 20)})
	m.AddContainerd("2.1.4", map[string][]byte{"bin/containerd.exe": blob(4 << 20), "bin/ctr.exe": blob(1 << 20),
		"bin/containerd-shim-runhcs-v1.exe": blob(1 << 20)})
	m.AddCNIPlugins("1.7.1", map[string][]byte{"./win-bridge.exe": blob(1 << 20), "./win-overlay.exe": blob(1 << 20), "./host-local.exe": blob(1 << 20)})
	m.AddNodeboot(testVersion, blob(2<<20))
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	return &upstream{Mirror: m, URL: srv.URL}
}

// release is the kubewin-release data source block for the upstream and registry.
func releaseBlock(u *upstream, pause string) string {
	return fmt.Sprintf(`
data "kubewin-release" "node" {
  kubernetes_version  = "v1.37.1"
  windows_version     = "2022"
  nodeboot_version    = %[2]q
  pause_image         = %[3]q
  kubernetes_base_url = "%[1]s/k8s"
  containerd_base_url = "%[1]s/containerd"
  cni_plugins_base_url = "%[1]s/cni"
  nodeboot_base_url   = "%[1]s/nodeboot"
}
`, u.URL, testVersion, pause)
}

func localBuild(e *env, out, provisioner string) string {
	return fmt.Sprintf(`
source "kubewin-local" "node" {
  output_directory = %q
  windows_version  = "2022"
  nodeboot_path    = %q
}

build {
  sources = ["source.kubewin-local.node"]
  provisioner "kubewin-node" {
    release = data.kubewin-release.node.manifest
%s
  }
}
`, out, e.nodeboot, provisioner)
}

// checkImage verifies an image directory: every file the manifest lists is in the payload with
// its sha256 and size, and the pause image archive is listed.
func checkImage(t *testing.T, dir string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, simmachine.ImageManifestFile))
	if err != nil {
		t.Fatalf("image manifest: %v", err)
	}
	m, err := api.LoadImageManifest(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"k/kubelet.exe", "k/kube-proxy.exe", "k/kubeadm.exe", "k/kube-log-runner.exe", "k/nodeboot.exe",
		"ProgramData/kubewin/archives/containerd-2.1.4-windows-amd64.tar.gz", "ProgramData/kubewin/archives/cni-plugins-windows-amd64-v1.7.1.tgz",
		"ProgramData/kubewin/images/pause.tar"}
	checkFiles(t, m, filepath.Join(dir, simmachine.ImagePayloadDir))
	var got []string
	for _, f := range m.Files {
		got = append(got, f.Path)
	}
	for _, w := range want {
		if !strings.Contains(strings.Join(got, "\n"), w) {
			t.Errorf("the manifest does not list %s: %v", w, got)
		}
	}
	if m.PauseImage.Archive != "ProgramData/kubewin/images/pause.tar" || m.WindowsBuild != 20348 || m.KubernetesVersion != "v1.37.1" ||
		m.NodebootVersion != testVersion {
		t.Errorf("manifest: %+v", m)
	}
}

// checkFiles verifies that every file a manifest lists is under root with its sha256 and size.
func checkFiles(t *testing.T, m *v1alpha1.ImageManifest, root string) {
	t.Helper()
	for _, f := range m.Files {
		sum, size, err := filesum.File(filepath.Join(root, filepath.FromSlash(f.Path)))
		if err != nil || sum != f.SHA256 || size != f.Size {
			t.Errorf("%s: sha256 %s, %d bytes (%v); the manifest says %s, %d bytes", f.Path, sum, size, err, f.SHA256, f.Size)
		}
	}
}

// serveRelease serves what a build needs besides packer: a release mirror, and a registry with a
// pause image for the given Windows builds, whose reference it returns.
func serveRelease(tb testing.TB, builds ...uint32) (*env, *upstream, *ociregistry.Registry, string) {
	tb.Helper()
	reg := ociregistry.Serve(tb)
	pause, _ := reg.PushPause(tb, "pause:3.10.2", builds...)
	return testEnv(tb), newUpstream(tb), reg, pause
}

func TestBuildGuestFetch(t *testing.T) {
	e, u, _, pause := serveRelease(t, 17763, 20348, 26100)
	dir := t.TempDir()
	out := filepath.Join(dir, "image")
	tpl := releaseBlock(u, pause) + localBuild(e, out, `    manifest_output = "manifest.json"`)
	start := time.Now()
	log, err := e.build(t, dir, tpl)
	if err != nil {
		t.Fatalf("packer build: %v\n%s", err, log)
	}
	elapsed := time.Since(start)
	if os.Getenv("KUBEWIN_SHOW_BUILD") != "" {
		t.Log(log)
	}
	checkImage(t, out)
	if _, err := os.Stat(filepath.Join(dir, "manifest.json")); err != nil {
		t.Errorf("manifest_output not written: %v", err)
	}
	if !regexp.MustCompile(`\[bake\] payload: 7 files verified, \d+ bytes downloaded`).MatchString(log) {
		t.Errorf("the guest did not fetch the payload itself:\n%s", log)
	}
	t.Logf("guest-fetch build: %d artifact bytes served in %s (whole packer build)", u.Sent.Load(), elapsed.Round(time.Millisecond))

	// A tampered artifact (its checksum file unchanged) fails the build, naming the file, and
	// leaves no image behind.
	k := "/k8s/v1.37.1/bin/windows/amd64/kube-proxy.exe"
	bad := bytes.Clone(u.File(k))
	bad[len(bad)/2] ^= 0xff
	u.Replace(k, bad)
	out2 := filepath.Join(dir, "tampered")
	log, err = e.build(t, dir, releaseBlock(u, pause)+localBuild(e, out2, ""))
	if err == nil {
		t.Fatalf("a tampered kube-proxy.exe was baked:\n%s", log)
	}
	if !strings.Contains(log, "payload file k/kube-proxy.exe from "+u.URL+k+" has sha256") {
		t.Errorf("the failure does not name the tampered file:\n%s", log)
	}
	if _, err := os.Stat(out2); !os.IsNotExist(err) {
		t.Errorf("a failed build left %s behind (%v)", out2, err)
	}
}

var hostCacheLine = regexp.MustCompile(`host cache .*: (\d+) files, (\d+) bytes downloaded, (\d+) bytes from the cache`)

// hostCacheBuild builds an image in host-cache mode and returns the bytes the cache
// downloaded, as the provisioner reports them, and the build's output.
func hostCacheBuild(t testing.TB, e *env, u *upstream, pause, dir, cache, out string) (int64, string) {
	t.Helper()
	return hostCacheBuildWith(t, e, u, pause, dir, cache, out, "")
}

// hostCacheBuildWith is hostCacheBuild with more provisioner configuration and packer build
// arguments.
func hostCacheBuildWith(t testing.TB, e *env, u *upstream, pause, dir, cache, out, provisioner string, args ...string) (int64, string) {
	t.Helper()
	log, err := e.build(t, dir, passwordVariable+releaseBlock(u, pause)+localBuild(e, out, fmt.Sprintf("    transfer = \"host-cache\"\n"+
		"    cache_dir = %q\n%s", cache, provisioner)), append([]string{"-force", "-var", "registry_password=" + registryPassword}, args...)...)
	if err != nil {
		t.Fatalf("packer build: %v\n%s", err, log)
	}
	m := hostCacheLine.FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("no host cache figures in the output:\n%s", log)
	}
	n, _ := strconv.ParseInt(m[2], 10, 64)
	return n, log
}

func TestBuildHostCache(t *testing.T) {
	e, u, reg, pause := serveRelease(t, 20348)
	dir := t.TempDir()
	cache, out := filepath.Join(dir, "cache"), filepath.Join(dir, "image")

	first, log := hostCacheBuild(t, e, u, pause, dir, cache, out)
	checkImage(t, out)
	if first == 0 || !strings.Contains(log, "[bake] payload: 8 files verified, 0 bytes downloaded") {
		t.Errorf("first host-cache build downloaded %d bytes; the guest must download nothing:\n%s", first, log)
	}
	served, registrySent := u.Sent.Load(), reg.Sent.Load()
	second, _ := hostCacheBuild(t, e, u, pause, dir, cache, out)
	checkImage(t, out)
	fmt.Printf("host-cache: first build downloaded %d bytes, second build (warm cache) %d bytes; upstream served %d more artifact bytes\n", first,
		second, u.Sent.Load()-served)
	if second != 0 || u.Sent.Load() != served {
		t.Errorf("second build with a warm cache downloaded %d bytes (upstream served %d more)", second, u.Sent.Load()-served)
	}
	// The registry only answered the data source's digest lookup, no layer.
	if d := reg.Sent.Load() - registrySent; d > 16<<10 {
		t.Errorf("the registry sent %d bytes during the second build", d)
	}
}

// BenchmarkSecondBake reports what a host-cache build downloads with a cold cache and with the
// cache the first build warmed, what pre-pulled workload images add to a bake (bytes and
// seconds per image), and what a node baked with them downloads at first boot.
func BenchmarkSecondBake(b *testing.B) {
	e, u, _, pause := serveRelease(b, 20348)
	dir := b.TempDir()
	cache, out := filepath.Join(dir, "cache"), filepath.Join(dir, "image")
	first, _ := hostCacheBuild(b, e, u, pause, dir, cache, out)
	var second int64
	for range b.N {
		second, _ = hostCacheBuild(b, e, u, pause, dir, cache, out)
	}
	b.ReportMetric(float64(first), "first-bake-bytes")
	b.ReportMetric(float64(second), "second-bake-bytes")

	// What pre-pulling workload images adds to a bake: two images of two 2 MiB layers each,
	// against the same bake without them, both with a cold cache; then what a node from that
	// image downloads at first boot.
	private, public, app, web := workloadRegistries(b, 2<<20)
	start := time.Now()
	hostCacheBuild(b, e, u, pause, dir, filepath.Join(dir, "cache-base"), out)
	base := time.Since(start)
	start = time.Now()
	_, log := hostCacheBuildWith(b, e, u, pause, dir, filepath.Join(dir, "cache-images"), out, imagesBlock(private, app, web))
	withImages := time.Since(start)
	m := regexp.MustCompile(`workload images: 2 images, \d+ bytes \((\d+) bytes downloaded`).FindStringSubmatch(log)
	if m == nil {
		b.Fatalf("no workload image figures in the output:\n%s", log)
	}
	pulled, _ := strconv.ParseInt(m[1], 10, 64)
	sent := private.Sent.Load() + public.Sent.Load() + u.Sent.Load()
	firstBoot(b, e, out)
	b.ReportMetric(float64(pulled)/2, "bake-bytes/workload-image")
	b.ReportMetric((withImages-base).Seconds()/2, "bake-s/workload-image")
	b.ReportMetric(float64(private.Sent.Load()+public.Sent.Load()+u.Sent.Load()-sent), "first-boot-bytes")
}

// workloadRegistries serves two workload images for the builds Windows Server publishes: one in
// a registry that requires a login, one in an open one; layerSize sets their size (two layers
// each). It returns the registries and the images' references.
func workloadRegistries(tb testing.TB, layerSize int) (private, public *ociregistry.Registry, app, web string) {
	tb.Helper()
	private = ociregistry.ServeWithLogin(tb, "builder", registryPassword)
	public = ociregistry.Serve(tb)
	app, _ = private.PushWindowsImage(tb, "team/app:1.4", layerSize, "10.0.17763.6532", "10.0.20348.2849", "10.0.26100.2314")
	web, _ = public.PushWindowsImage(tb, "web:2", layerSize, "10.0.20348.2849", "10.0.26100.2314")
	return private, public, app, web
}

// registryPassword is the private registry's password, which must appear nowhere but in the
// variable that passes it.
const registryPassword = "s3cret-registry-pw"

// imagesBlock is the provisioner configuration pre-pulling images, with the private registry's
// login from a sensitive variable.
func imagesBlock(private *ociregistry.Registry, images ...string) string {
	q := make([]string, len(images))
	for i, im := range images {
		q[i] = strconv.Quote(im)
	}
	return fmt.Sprintf(`    images = [%s]
    registry_credentials {
      server   = %q
      username = "builder"
      password = var.registry_password
    }
`, strings.Join(q, ", "), private.Host)
}

const passwordVariable = `
variable "registry_password" {
  type      = string
  sensitive = true
}
`

// A bake pre-pulls two workload images, one behind a login: the manifest lists each with the
// digest of its 2022 entry, its os.version and size, their archives are in the image, imported
// into containerd, the login is nowhere in the output or the image, and a node from the image
// downloads nothing for them at first boot. An image of another build, one that does not exist,
// a wrong password, an image without a windows/amd64 entry, or only of a build kubewin does not
// run fail the build naming the image, and leave no image behind.
func TestBuildWorkloadImages(t *testing.T) {
	e, u, _, pause := serveRelease(t, 20348)
	private, public, app, web := workloadRegistries(t, 1<<20)
	dir := t.TempDir()
	for _, transfer := range []string{"guest-fetch", "host-cache"} {
		t.Run(transfer, func(t *testing.T) {
			out := filepath.Join(dir, transfer)
			tpl := passwordVariable + releaseBlock(u, pause) + localBuild(e, out, imagesBlock(private, app, web)+
				fmt.Sprintf("    transfer = %q\n    cache_dir = %q\n", transfer, filepath.Join(dir, "cache-"+transfer)))
			log, err := e.build(t, dir, tpl, "-var", "registry_password="+registryPassword)
			if err != nil {
				t.Fatalf("packer build: %v\n%s", err, log)
			}
			if os.Getenv("KUBEWIN_SHOW_BUILD") != "" {
				t.Log(log)
			}
			checkWarmImage(t, e, out, log, private, public, app, web)
			if where := findString(t, registryPassword, log, dir); where != "" {
				t.Errorf("the registry password is in %s", where)
			}
		})
	}
	refuseImages(t, e, u, pause, dir, private, public, app, web)
}

// checkWarmImage checks an image baked with workload images app and web.
func checkWarmImage(t *testing.T, e *env, out, log string, private, public *ociregistry.Registry, app, web string) {
	t.Helper()
	checkImage(t, out)
	raw, err := os.ReadFile(filepath.Join(out, simmachine.ImageManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	m, err := api.LoadImageManifest(raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.WorkloadImages) != 2 {
		t.Fatalf("workload images in the manifest: %+v", m.WorkloadImages)
	}
	for i, ref := range []string{app, web} {
		w := m.WorkloadImages[i]
		want, err := ociimage.Resolve(context.Background(), ref, 20348, false, private.Options())
		if err != nil {
			t.Fatal(err)
		}
		if w.Reference != ref || w.Digest != want.Digest || w.OSVersion != "10.0.20348.2849" || w.Size != want.Size || w.Size < 2<<20 {
			t.Errorf("workload image %d: %+v, want %s %+v", i, w, ref, want)
		}
	}
	if !regexp.MustCompile(`\[bake\] workload images: 2 imported, \d+ bytes`).MatchString(log) ||
		!regexp.MustCompile(`workload images: 2 images, \d+ bytes \(\d+ bytes downloaded`).MatchString(log) {
		t.Errorf("the build does not report the workload images' cost:\n%s", log)
	}

	// A node from the image: its first boot finds the images in the payload, verified, and
	// neither registry sends a byte.
	sent := private.Sent.Load() + public.Sent.Load()
	firstBoot(t, e, out)
	if d := private.Sent.Load() + public.Sent.Load() - sent; d != 0 {
		t.Errorf("the registries sent %d bytes at first boot", d)
	}
}

// refuseImages checks that images a node cannot run, or cannot get, fail the build.
func refuseImages(t *testing.T, e *env, u *upstream, pause, dir string, private, public *ociregistry.Registry, app, web string) {
	t.Helper()
	linux := public.PushLinuxImage(t, "tools:linux")
	win10, _ := public.PushWindowsImage(t, "desktop:1", 4<<10, "10.0.19041.1")
	old, _ := public.PushWindowsImage(t, "legacy:1", 4<<10, "10.0.17763.6532")
	for _, tc := range []struct {
		image, password, want string
	}{
		{old, registryPassword, "images: " + old + " has one windows/amd64 image, and it does not run on Windows build 20348: " +
			"os.version 10.0.17763.6532: the image is for Windows build 17763 (os.version 10.0.17763.6532), the host runs build 20348 " +
			"(Windows Server 2022): a process-isolated container must match the host's build (HCS_E_IMAGE_MISMATCH); use the image's " +
			"variant for build 20348"},
		{public.Host + "/missing:1", registryPassword, "images: " + public.Host + "/missing:1 does " +
			"not exist in " + public.Host + ": check the repository and the tag or digest"},
		{app, "wrong-password", "images: " + private.Host + " refused access to " + app + " with the credentials " +
			"given"},
		{linux, registryPassword, "images: " + linux + " has no windows/amd64 image: it has linux/amd64; use a " +
			"Windows image"},
		{win10, registryPassword, "images: " + win10 + " has one windows/amd64 image, and it does not run on Windows build 20348: " +
			"os.version 10.0.19041.1: os.version 10.0.19041.1 is Windows build 19041, which kubewin nodes do not run"},
	} {
		out := filepath.Join(dir, "refused")
		cache := filepath.Join(dir, "cache-refused")
		log, err := e.build(t, dir, passwordVariable+releaseBlock(u, pause)+localBuild(e, out,
			imagesBlock(private, web, tc.image)+fmt.Sprintf("    cache_dir = %q\n", cache)), "-var", "registry_password="+tc.password)
		if err == nil {
			t.Errorf("%s was baked:\n%s", tc.image, log)
			continue
		}
		if !strings.Contains(strings.Join(strings.Fields(log), " "), tc.want) {
			t.Errorf("the failure does not say %q:\n%s", tc.want, log)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("a failed build left %s behind (%v)", out, err)
		}
		// Nothing was exported: every image is resolved before any is pulled.
		if entries, _ := os.ReadDir(filepath.Join(cache, "oci")); len(entries) != 0 {
			t.Errorf("a refused build left %d image exports in the cache", len(entries))
		}
	}
}

// findString returns the first of the text and the files under dir that holds s, or "".
func findString(t *testing.T, s, text, dir string) string {
	t.Helper()
	if strings.Contains(text, s) {
		return "the build's output"
	}
	found := ""
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || found != "" {
			return err
		}
		b, err := os.ReadFile(path)
		if err == nil && bytes.Contains(b, []byte(s)) && filepath.Base(path) != "build.pkr.hcl" {
			found = path
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// firstBoot provisions a simulated machine from an image directory, as a pool does, and runs
// its first boot's preflight (nodeboot join phase preflight), which verifies every payload file
// against the image manifest without downloading any.
func firstBoot(t testing.TB, e *env, image string) {
	t.Helper()
	nc, err := api.EncodeJSON(v1alpha1.NodeConfig{
		APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindNodeConfig,
		Cluster: v1alpha1.Cluster{APIServerEndpoint: "127.0.0.1:6443", CACertHashes: []string{"sha256:" + strings.Repeat("1", 64)},
			BootstrapToken: "abcdef.0123456789abcdef", ClusterCIDR: "10.244.0.0/16", ServiceCIDR: "10.96.0.0/12"},
		Node: v1alpha1.Node{Name: "warm-1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	m := simmachine.Machine{Root: root, ComputerName: "warm-1", Build: 20348, Adapter: "Ethernet", Address: netip.MustParseAddr("127.4.0.1"),
		Subnet: netip.MustParsePrefix("127.4.0.0/16"), Runtime: v1alpha1.RuntimeContainerd}
	if err := simmachine.Provision(m, image, nc); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(e.nodeboot, "--platform", "sim", "--root", root, "join", "phase", "preflight").CombinedOutput()
	if err != nil {
		t.Fatalf("first boot preflight: %v\n%s", err, out)
	}
}
