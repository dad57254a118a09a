package bake

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kubewin/kubewin/internal/api"
	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/filesum"
	"github.com/kubewin/kubewin/internal/nodecmd"
	"github.com/kubewin/kubewin/internal/ociimage"
	"github.com/kubewin/kubewin/internal/sim/simmachine"
	"github.com/kubewin/kubewin/internal/testkit/ociregistry"
	"github.com/kubewin/kubewin/internal/testkit/releasemirror"
	"github.com/kubewin/kubewin/nodeboot/internal/platform/sim"
	"github.com/kubewin/kubewin/nodeboot/internal/platform/windows"
	"github.com/kubewin/kubewin/nodeboot/internal/platform/windows/winfake"
)

// server serves files and counts the bytes it sends.
type server struct {
	*httptest.Server
	files map[string][]byte
	sent  atomic.Int64
}

func newServer(t *testing.T, files map[string][]byte) *server {
	s := &server{files: maps.Clone(files)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, ok := s.files[strings.TrimPrefix(r.URL.Path, "/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		cw := &countingWriter{ResponseWriter: w, n: &s.sent}
		http.ServeContent(cw, r, r.URL.Path, time.Time{}, bytes.NewReader(data))
	}))
	t.Cleanup(s.Close)
	return s
}

type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	return c.ResponseWriter.Write(p)
}

func manifest(t *testing.T, base string, files map[string][]byte) []byte {
	t.Helper()
	return encode(t, plan(base, files))
}

func plan(base string, files map[string][]byte) v1alpha1.ImageManifest {
	m := v1alpha1.ImageManifest{
		APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindImageManifest, WindowsBuild: v1alpha1.WindowsServer2025,
		KubernetesVersion: "v1.36.2", Runtime: v1alpha1.RuntimeInfo{Name: v1alpha1.RuntimeContainerd, Version: "2.1.4"},
		PauseImage:      v1alpha1.PauseImage{Reference: "registry.k8s.io/pause:3.10", Digest: "sha256:" + strings.Repeat("2", 64)},
		NodebootVersion: "test",
	}
	for p, data := range files {
		sum := sha256.Sum256(data)
		m.Files = append(m.Files, v1alpha1.File{Path: p, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(data)), Source: base + "/" + p})
		if strings.HasSuffix(p, ".tgz") {
			m.Files[len(m.Files)-1].Unpack = "opt/cni/bin"
		}
	}
	return m
}

func encode(t *testing.T, m v1alpha1.ImageManifest) []byte {
	t.Helper()
	b, err := api.EncodeJSON(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func machine(t *testing.T, runtime v1alpha1.RuntimeName) *sim.Platform {
	t.Helper()
	m, err := sim.New(simmachine.Machine{Root: t.TempDir(), ComputerName: "bake", Build: 26100, Adapter: "Ethernet",
		Address: netip.MustParseAddr("127.3.0.1"), Subnet: netip.MustParsePrefix("127.3.0.0/16"), Runtime: runtime})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// An image without Microsoft Defender bakes, with no exclusions to add: its Defender cmdlets do
// not exist, so asking them for exclusions would fail the bake.
func TestBakeWithoutDefender(t *testing.T) {
	files := payload()
	srv := newServer(t, files)
	m, err := sim.New(simmachine.Machine{Root: t.TempDir(), ComputerName: "bake", Build: 26100, Adapter: "Ethernet",
		Address: netip.MustParseAddr("127.3.0.1"), Subnet: netip.MustParsePrefix("127.3.0.0/16"), Runtime: v1alpha1.RuntimeContainerd,
		WithoutDefender: true})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := Bake(context.Background(), Options{Machine: m, Paths: nodecmd.DefaultPaths(), Manifest: encode(t, plan(srv.URL, files)),
		Out: &out}); err != nil {
		t.Fatalf("bake: %v\n%s", err, out.String())
	}
	if st := state(t, m); len(st.Exclusions) != 0 || !strings.Contains(out.String(), "Microsoft Defender is not installed") {
		t.Errorf("exclusions %v; output:\n%s", st.Exclusions, out.String())
	}
}

func state(t *testing.T, m *sim.Platform) winfake.State {
	t.Helper()
	st, err := m.Windows().State()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func payload() map[string][]byte {
	big := bytes.Repeat([]byte("kubelet.exe "), 100_000) // 1.2 MB
	return map[string][]byte{"k/kubelet.exe": big, "k/kube-proxy.exe": []byte("kube-proxy"),
		"ProgramData/kubewin/archives/cni.tgz": tgz(map[string]string{"win-bridge.exe": "cni", "host-local.exe": "ipam"})}
}

func tgz(files map[string]string) []byte {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, data := range files {
		_ = tw.WriteHeader(&tar.Header{Name: "./" + name, Mode: 0o755, Size: int64(len(data)), Typeflag: tar.TypeReg})
		_, _ = tw.Write([]byte(data))
	}
	_ = tw.Close()
	_ = gz.Close()
	return buf.Bytes()
}

func TestBakeFetches(t *testing.T) {
	files := payload()
	srv := newServer(t, files)
	reg := ociregistry.Serve(t)
	ref, digests := reg.PushPause(t, "pause:3.10.2", 17763, 20348, 26100)
	p := plan(srv.URL, files)
	p.PauseImage = v1alpha1.PauseImage{Reference: ref, Digest: digests[26100]}
	m := machine(t, v1alpha1.RuntimeContainerd)
	var out bytes.Buffer
	st, err := Bake(context.Background(), Options{Machine: m, Paths: nodecmd.DefaultPaths(), Manifest: encode(t, p),
		PullPause: "ProgramData/kubewin/images/pause.tar", Out: &out})
	if err != nil {
		t.Fatalf("bake: %v\n%s", err, out.String())
	}
	for p, want := range files {
		got, err := os.ReadFile(filepath.Join(m.Path(`C:\`), p))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s not installed: %v", p, err)
		}
	}
	if got, err := os.ReadFile(m.Path(`C:\opt\cni\bin\host-local.exe`)); err != nil || string(got) != "ipam" {
		t.Errorf("CNI archive not unpacked: %q %v", got, err)
	}
	if st.Files != 3 || st.Downloaded != srv.sent.Load() || st.Downloaded < 1_200_000 {
		t.Errorf("stats %+v, server sent %d", st, srv.sent.Load())
	}
	installed, err := os.ReadFile(m.Path(nodecmd.DefaultPaths().ImageManifest))
	if err != nil {
		t.Fatalf("manifest not installed: %v", err)
	}
	im, err := api.LoadImageManifest(installed)
	if err != nil {
		t.Fatalf("installed manifest: %v", err)
	}
	if im.PauseImage.Archive != "ProgramData/kubewin/images/pause.tar" || len(im.Files) != 4 {
		t.Fatalf("installed manifest does not list the pause archive: %+v", im)
	}
	for _, f := range im.Files {
		if sum, size, err := filesum.File(filepath.Join(m.Path(`C:\`), f.Path)); err != nil || sum != f.SHA256 || size != f.Size {
			t.Errorf("%s: sha256 %s size %d (%v), manifest says %s %d", f.Path, sum, size, err, f.SHA256, f.Size)
		}
	}
	ws := state(t, m)
	if svc := ws.Service("nodeboot"); svc == nil || svc.Config.BinaryPathName != `C:\k\nodeboot.exe run` ||
		svc.Config.StartType != windows.StartAutomatic ||
		!slices.Equal(svc.Config.Dependencies, []string{"containerd"}) || svc.State != windows.Stopped {
		t.Errorf("nodeboot service: %+v", svc)
	}
	// containerd registered itself, with the configuration and log file given to
	// --register-service, and runs its own service handler: no wrapper.
	if svc := ws.Service("containerd"); svc == nil || svc.State != windows.Running ||
		svc.Config.BinaryPathName != `"C:\Program Files\containerd\bin\containerd.exe" --run-service `+
			`--config "C:\Program Files\containerd\config.toml" --log-file C:\var\log\kubernetes\containerd.log` {
		t.Errorf("containerd service: %+v", svc)
	}
	// The firewall lets in the kubelet, VXLAN, and what load balancers probe: kube-proxy's
	// healthz and the health check node ports, from the NodePort range.
	if want := []winfake.FirewallRule{{Name: "kubelet", Protocol: "TCP", Port: 10250}, {Name: "kubewin-vxlan", Protocol: "UDP", Port: 4789},
		{Name: "kubewin-kube-proxy-healthz", Protocol: "TCP", Port: 10256},
		{Name: "kubewin-node-ports", Protocol: "TCP", Port: 30000, LastPort: 32767}}; !slices.Equal(ws.Firewall, want) {
		t.Errorf("firewall rules: %v, want %v", ws.Firewall, want)
	}
	// Windows Update cannot restart the node on its own: its service is disabled and stopped.
	if svc := ws.Service(winfake.WindowsUpdateService); svc == nil || svc.Config.StartType != windows.StartDisabled || svc.State != windows.Stopped {
		t.Errorf("Windows Update service: %+v", svc)
	}
	if len(ws.Images) != 1 || !strings.Contains(ws.Images[0], `pause.tar`) {
		t.Errorf("pause image import: %v", ws.Images)
	}
	if conf, err := os.ReadFile(m.Path(`C:\Program Files\containerd\config.toml`)); err != nil || !strings.Contains(string(conf),
		"sandbox = '"+ref+"'") {
		t.Errorf("containerd config: %s %v", conf, err)
	}

	// A pause image of a Windows build the runtime does not unpack on this machine is refused.
	p.PauseImage.Digest = digests[17763]
	_, err = Bake(context.Background(), Options{Machine: machine(t, v1alpha1.RuntimeContainerd), Paths: nodecmd.DefaultPaths(), Manifest: encode(t, p),
		PullPause: "ProgramData/kubewin/images/pause.tar", Out: &out})
	if err == nil || !strings.Contains(err.Error(), "does not match the host operating system") {
		t.Errorf("pause image for 17763 on a 26100 machine: %v", err)
	}

	// A second bake of the same machine downloads nothing.
	before := srv.sent.Load()
	st, err = Bake(context.Background(), Options{Machine: m, Paths: nodecmd.DefaultPaths(), Manifest: manifest(t, srv.URL, files), Out: &out})
	if err != nil || st.Downloaded != 0 || srv.sent.Load() != before {
		t.Errorf("second bake downloaded %d bytes (%v)", st.Downloaded, err)
	}
}

func TestBakeResumes(t *testing.T) {
	files := payload()
	srv := newServer(t, files)
	m := machine(t, v1alpha1.RuntimeContainerd)
	// An interrupted download left half of kubelet.exe behind.
	part := filepath.Join(m.Path(`C:\`), "k", "kubelet.exe.part")
	if err := os.MkdirAll(filepath.Dir(part), 0o755); err != nil {
		t.Fatal(err)
	}
	half := len(files["k/kubelet.exe"]) / 2
	if err := os.WriteFile(part, files["k/kubelet.exe"][:half], 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	st, err := Bake(context.Background(), Options{Machine: m, Paths: nodecmd.DefaultPaths(), Manifest: manifest(t, srv.URL, files), Out: &out})
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, data := range files {
		total += int64(len(data))
	}
	if st.Downloaded != total-int64(half) || st.Reused != int64(half) {
		t.Errorf("resumed bake downloaded %d and reused %d bytes, want %d and %d", st.Downloaded, st.Reused, total-int64(half), half)
	}
}

func TestBakeTampered(t *testing.T) {
	files := payload()
	srv := newServer(t, files)
	doc := manifest(t, srv.URL, files)
	srv.files["k/kube-proxy.exe"] = []byte("kube-proxy with a backdoor")
	var out bytes.Buffer
	_, err := Bake(context.Background(), Options{Machine: machine(t, v1alpha1.RuntimeContainerd), Paths: nodecmd.DefaultPaths(), Manifest: doc,
		Out: &out, Fetch: FetchOptions{Parallel: 1}})
	var mm *MismatchError
	if !errors.As(err, &mm) || mm.Path != "k/kube-proxy.exe" || !strings.Contains(err.Error(), "payload file k/kube-proxy.exe from "+srv.URL) {
		t.Fatalf("error = %v, want a mismatch naming k/kube-proxy.exe", err)
	}
}

func TestBakeMirrorAndMissing(t *testing.T) {
	files := payload()
	mirror := newServer(t, files)
	var out bytes.Buffer
	// Sources point nowhere reachable; the mirror serves everything.
	if _, err := Bake(context.Background(), Options{Machine: machine(t, v1alpha1.RuntimeContainerd), Paths: nodecmd.DefaultPaths(), Manifest: manifest(t,
		"http://127.0.0.1:1", files), Out: &out, Fetch: FetchOptions{Mirror: mirror.URL}}); err != nil {
		t.Fatalf("bake from mirror: %v", err)
	}
	delete(mirror.files, "k/kube-proxy.exe")
	_, err := Bake(context.Background(), Options{Machine: machine(t, v1alpha1.RuntimeContainerd), Paths: nodecmd.DefaultPaths(), Manifest: manifest(t,
		"", files), Out: &out, Fetch: FetchOptions{Mirror: mirror.URL, Attempts: 1}})
	if err == nil || !strings.Contains(err.Error(), "k/kube-proxy.exe") || !strings.Contains(err.Error(), "404") {
		t.Errorf("missing file: %v", err)
	}
}

// A Docker image gets the Docker Engine registered as the "docker" service cri-dockerd depends on,
// and the pause image loaded into Docker's own image store (docker load needs the archive's
// manifest.json).
func TestBakeRegistersDocker(t *testing.T) {
	files := payload()
	// The runtime's release archives, laid out as their projects publish them (see releasemirror).
	const dockerZip, criZip = "ProgramData/kubewin/archives/docker-28.3.3.zip", "ProgramData/kubewin/archives/cri-dockerd-0.3.18.win.amd64.zip"
	files[dockerZip] = releasemirror.Zip(map[string][]byte{"docker/dockerd.exe": []byte("dockerd"), "docker/docker.exe": []byte("docker")})
	files[criZip] = releasemirror.Zip(map[string][]byte{"cri-dockerd/cri-dockerd.exe": []byte("cri-dockerd")})
	srv := newServer(t, files)
	reg := ociregistry.Serve(t)
	ref, digests := reg.PushPause(t, "pause:3.10.2", 20348, 26100)
	p := plan(srv.URL, files)
	for i, f := range p.Files {
		switch f.Path {
		case dockerZip:
			p.Files[i].Unpack = "Program Files"
		case criZip:
			p.Files[i].Unpack = "k"
		}
	}
	p.Runtime = v1alpha1.RuntimeInfo{Name: v1alpha1.RuntimeDocker, Version: "28.3.3", CRIDockerdVersion: "0.3.18"}
	p.PauseImage = v1alpha1.PauseImage{Reference: ref, Digest: digests[26100]}
	m := machine(t, v1alpha1.RuntimeDocker)
	var out bytes.Buffer
	if _, err := Bake(context.Background(), Options{Machine: m, Paths: nodecmd.DefaultPaths(), Manifest: encode(t, p),
		PullPause: "ProgramData/kubewin/images/pause.tar", Out: &out}); err != nil {
		t.Fatalf("bake: %v\n%s", err, out.String())
	}
	st := state(t, m)
	if len(st.Images) != 1 || st.Images[0] != `docker:C:\ProgramData\kubewin\images\pause.tar` {
		t.Errorf("pause image load: %v", st.Images)
	}
	// The programs the node's services run are where the archives put them.
	paths := nodecmd.DefaultPaths()
	for _, exe := range []string{paths.DockerBinDir + `\dockerd.exe`, paths.DockerBinDir + `\docker.exe`, paths.CRIDockerd} {
		if _, err := os.Stat(m.Path(exe)); err != nil {
			t.Errorf("%s is not where the archives unpack: %v", exe, err)
		}
	}
	if svc := st.Service("docker"); svc == nil || svc.Config.BinaryPathName != `"C:\Program Files\docker\dockerd.exe" --run-service` ||
		svc.State != windows.Running {
		t.Errorf("docker service: %+v", svc)
	}
	if st.Service("containerd") != nil {
		t.Error("a Docker image registered containerd")
	}
}

// archive exports image ref@digest from a registry as the OCI archive a bake imports.
func archive(t *testing.T, reg *ociregistry.Registry, ref, digest string) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := ociimage.WriteArchive(context.Background(), &buf, ref, digest, reg.Options()); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// bakeWorkloads bakes a containerd machine from a plan with the pause image and the workload
// images, whose archives are served with the payload, and returns the machine, the payload and
// the bake's output.
func bakeWorkloads(t *testing.T, reg *ociregistry.Registry, pause v1alpha1.PauseImage, images []v1alpha1.WorkloadImage,
	isolation ...v1alpha1.Isolation) (*sim.Platform, map[string][]byte, *bytes.Buffer) {
	t.Helper()
	files := payload()
	for _, w := range images {
		files[w.Archive] = archive(t, reg, w.Reference, w.Digest)
	}
	p := plan(newServer(t, files).URL, files)
	p.PauseImage, p.WorkloadImages, p.Isolation = pause, images, isolation
	m := machine(t, v1alpha1.RuntimeContainerd)
	var out bytes.Buffer
	if _, err := Bake(context.Background(), Options{Machine: m, Paths: nodecmd.DefaultPaths(), Manifest: encode(t, p),
		PullPause: "ProgramData/kubewin/images/pause.tar", Out: &out}); err != nil {
		t.Fatalf("bake: %v\n%s", err, out.String())
	}
	return m, files, &out
}

// Workload images the manifest lists are imported into the runtime's image store with the pause
// image, and the bake says what they cost. One of another Windows build than the machine's is
// refused, as the runtime refuses it, naming the image.
func TestBakeImportsWorkloadImages(t *testing.T) {
	reg := ociregistry.Serve(t)
	pause, pauseDigests := reg.PushPause(t, "pause:3.10.2", 26100)
	app, appDigests := reg.PushWindowsImage(t, "app:1", 64<<10, "10.0.17763.6532", "10.0.20348.2849", "10.0.26100.2314")
	web, webDigests := reg.PushWindowsImage(t, "web:2", 32<<10, "10.0.26100.2314")
	images := []v1alpha1.WorkloadImage{
		{Reference: app, Digest: appDigests["10.0.26100.2314"], OSVersion: "10.0.26100.2314", Size: 130_000, Archive: "ProgramData/kubewin/images/app.tar"},
		{Reference: web, Digest: webDigests["10.0.26100.2314"], OSVersion: "10.0.26100.2314", Size: 66_000, Archive: "ProgramData/kubewin/images/web.tar"},
	}
	m, files, out := bakeWorkloads(t, reg, v1alpha1.PauseImage{Reference: pause, Digest: pauseDigests[26100]}, images)
	want := []string{`containerd:C:\ProgramData\kubewin\images\pause.tar`, `containerd:C:\ProgramData\kubewin\images\app.tar`,
		`containerd:C:\ProgramData\kubewin\images\web.tar`}
	if got := state(t, m).Images; !slices.Equal(got, want) {
		t.Errorf("images imported: %v, want %v", got, want)
	}
	for _, line := range []string{"[bake] workload image " + app + " (" + images[0].Digest + ", os.version 10.0.26100.2314, 130000 bytes) " +
		"imported into containerd in ", "[bake] workload images: 2 imported, 196000 bytes, in "} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("the bake does not say %q:\n%s", line, out.String())
		}
	}
	// The images are in the runtime's store only: their archives are gone from the payload and
	// from the installed manifest, whose every file is there for first boot to verify.
	raw, err := os.ReadFile(m.Path(nodecmd.DefaultPaths().ImageManifest))
	if err != nil {
		t.Fatal(err)
	}
	installed, err := api.LoadImageManifest(raw)
	if err != nil {
		t.Fatalf("the installed manifest: %v", err)
	}
	for i, w := range images {
		if _, err := os.Stat(m.Path(nodecmd.DefaultPaths().Payload(w.Archive))); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the archive of %s is still in the image (%v)", w.Reference, err)
		}
		if got := installed.WorkloadImages[i]; got.Archive != "" || got.Digest != w.Digest {
			t.Errorf("installed workloadImages[%d] = %+v, want digest %s and no archive", i, got, w.Digest)
		}
	}
	for _, f := range installed.Files {
		if sum, size, err := filesum.File(m.Path(nodecmd.DefaultPaths().Payload(f.Path))); err != nil || sum != f.SHA256 || size != f.Size {
			t.Errorf("installed manifest lists %s: sha256 %s, %d bytes, %v", f.Path, sum, size, err)
		}
	}
	// That manifest cannot be baked again: it names no archive to import.
	if _, err := Bake(context.Background(), Options{Machine: machine(t, v1alpha1.RuntimeContainerd), Paths: nodecmd.DefaultPaths(), Manifest: raw,
		Out: io.Discard}); err == nil || !strings.Contains(err.Error(), "workloadImages[0].archive: Required value") {
		t.Errorf("baking an installed manifest: %v", err)
	}

	// The 2022 variant of app on a 2025 machine.
	files[images[0].Archive] = archive(t, reg, app, appDigests["10.0.20348.2849"])
	srv := newServer(t, files)
	p := plan(srv.URL, files)
	p.PauseImage = v1alpha1.PauseImage{Reference: pause, Digest: pauseDigests[26100]}
	p.WorkloadImages = images
	p.WorkloadImages[0].Digest = appDigests["10.0.20348.2849"]
	// A manifest that says so is refused before anything is fetched.
	p.WorkloadImages[0].OSVersion = "10.0.20348.2849"
	before := srv.sent.Load()
	_, err = Bake(context.Background(), Options{Machine: machine(t, v1alpha1.RuntimeContainerd), Paths: nodecmd.DefaultPaths(),
		Manifest: encode(t, p), PullPause: "ProgramData/kubewin/images/pause.tar", Out: out})
	if err == nil || !strings.Contains(err.Error(), `workloadImages[0].osVersion: Invalid value: "10.0.20348.2849"`) ||
		!strings.Contains(err.Error(), "HCS_E_IMAGE_MISMATCH") {
		t.Errorf("a manifest with a 2022 image for a 2025 machine: %v", err)
	}
	if n := srv.sent.Load(); n != before {
		t.Errorf("the refused bake fetched %d bytes", n-before)
	}
	// One that does not (the archive is the 2019 variant, the manifest says 2025) is refused by the
	// runtime at import: containerd does not unpack a 17763 image for a 26100 platform.
	files[images[0].Archive] = archive(t, reg, app, appDigests["10.0.17763.6532"])
	srv = newServer(t, files)
	p = plan(srv.URL, files)
	p.PauseImage = v1alpha1.PauseImage{Reference: pause, Digest: pauseDigests[26100]}
	p.WorkloadImages = images
	p.WorkloadImages[0].Digest, p.WorkloadImages[0].OSVersion = appDigests["10.0.17763.6532"], "10.0.26100.2314"
	_, err = Bake(context.Background(), Options{Machine: machine(t, v1alpha1.RuntimeContainerd), Paths: nodecmd.DefaultPaths(),
		Manifest: encode(t, p), PullPause: "ProgramData/kubewin/images/pause.tar", Out: out})
	if err == nil || !strings.Contains(err.Error(), "workload image "+app+": ") ||
		!strings.Contains(err.Error(), "the container operating system does not match the host operating system") {
		t.Errorf("a 2019 image was imported on a 2025 machine: %v", err)
	}
}

// An image with Hyper-V isolation takes workload images of earlier Windows builds: each is
// imported for its own platform, which is the only way containerd unpacks a 2019 image on a
// 2025 machine, and the bake says that it runs Hyper-V isolated only.
func TestBakeImportsDownLevelImagesForHyperV(t *testing.T) {
	reg := ociregistry.Serve(t)
	pause, pauseDigests := reg.PushPause(t, "pause:3.10.2", 26100)
	app, appDigests := reg.PushWindowsImage(t, "app:1", 32<<10, "10.0.17763.6532", "10.0.20348.2849", "10.0.26100.2314")
	images := []v1alpha1.WorkloadImage{
		{Reference: app, Digest: appDigests["10.0.17763.6532"], OSVersion: "10.0.17763.6532", Size: 66_000,
			Archive: "ProgramData/kubewin/images/app19.tar"},
		{Reference: app, Digest: appDigests["10.0.20348.2849"], OSVersion: "10.0.20348.2849", Size: 66_000,
			Archive: "ProgramData/kubewin/images/app22.tar"},
	}
	m, _, out := bakeWorkloads(t, reg, v1alpha1.PauseImage{Reference: pause, Digest: pauseDigests[26100]}, images,
		v1alpha1.IsolationProcess, v1alpha1.IsolationHyperV)
	for _, w := range images {
		if line := "[bake] workload image " + app + " (" + w.Digest + ", os.version " + w.OSVersion; !strings.Contains(out.String(), line) ||
			!strings.Contains(out.String(), "(Hyper-V isolation only: its build is older than the host's 26100") {
			t.Errorf("the bake does not say that %s runs Hyper-V isolated only:\n%s", w.OSVersion, out.String())
		}
	}
	var imports []string
	for _, op := range m.Windows().Log() {
		if op.Backend == "shell" && strings.Contains(op.Body, "'import'") {
			imports = append(imports, op.Body[:strings.Index(op.Body, "\n")])
		}
	}
	want := []string{`& 'C:\Program Files\containerd\bin\ctr.exe' '--namespace' 'k8s.io' 'images' 'import' 'C:\ProgramData\kubewin\images\pause.tar'`,
		`& 'C:\Program Files\containerd\bin\ctr.exe' '--namespace' 'k8s.io' 'images' 'import' '--platform' 'windows(10.0.17763.6532)/amd64' ` +
			`'C:\ProgramData\kubewin\images\app19.tar'`,
		`& 'C:\Program Files\containerd\bin\ctr.exe' '--namespace' 'k8s.io' 'images' 'import' '--platform' 'windows(10.0.20348.2849)/amd64' ` +
			`'C:\ProgramData\kubewin\images\app22.tar'`}
	if !slices.Equal(imports, want) {
		t.Errorf("imports:\n%s\nwant:\n%s", strings.Join(imports, "\n"), strings.Join(want, "\n"))
	}
}

// An image baked with Hyper-V isolation gets containerd's two Windows runtime handlers in the
// config.toml the service runs with; a Docker image asking for it is refused before anything is
// fetched, naming the field and the fix.
func TestBakeHyperV(t *testing.T) {
	files := payload()
	srv := newServer(t, files)
	p := plan(srv.URL, files)
	p.Isolation = []v1alpha1.Isolation{v1alpha1.IsolationProcess, v1alpha1.IsolationHyperV}
	m := machine(t, v1alpha1.RuntimeContainerd)
	var out bytes.Buffer
	if _, err := Bake(context.Background(), Options{Machine: m, Paths: nodecmd.DefaultPaths(), Manifest: encode(t, p), Out: &out}); err != nil {
		t.Fatalf("bake: %v\n%s", err, out.String())
	}
	conf, err := os.ReadFile(m.Path(`C:\Program Files\containerd\config.toml`))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"default_runtime_name = 'runhcs-wcow-process'", "runtimes.runhcs-wcow-hypervisor]", "SandboxIsolation = 1"} {
		if !strings.Contains(string(conf), want) {
			t.Errorf("config.toml has no %q:\n%s", want, conf)
		}
	}
	if !strings.Contains(out.String(), "runhcs-wcow-hypervisor (Hyper-V isolation)") {
		t.Errorf("the bake does not say what it configured:\n%s", out.String())
	}

	p.Runtime = v1alpha1.RuntimeInfo{Name: v1alpha1.RuntimeDocker, Version: "28.3.3", CRIDockerdVersion: "0.3.18"}
	before := srv.sent.Load()
	_, err = Bake(context.Background(), Options{Machine: machine(t, v1alpha1.RuntimeDocker), Paths: nodecmd.DefaultPaths(), Manifest: encode(t, p),
		Out: io.Discard})
	if err == nil || !strings.Contains(err.Error(), `isolation[1]: Invalid value: "hyperv": Hyper-V isolation is configured only with containerd`) ||
		!strings.Contains(err.Error(), "bake a containerd image") {
		t.Errorf("Hyper-V on a Docker image: %v", err)
	}
	if n := srv.sent.Load(); n != before {
		t.Errorf("the refused bake fetched %d bytes", n-before)
	}
}
