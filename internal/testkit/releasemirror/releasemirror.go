// Package releasemirror serves the artifacts of a kubewin image the way their upstream sites
// lay them out — Kubernetes node binaries with .sha256 files, containerd and CNI plugin
// archives with their checksum files, nodeboot with SHA256SUMS — so that the kubewin-release
// data source and the bake run against it unchanged: the local release mirror of make demo and
// of the Packer plugin's tests.
package releasemirror

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Mirror is a release mirror; its zero value is not usable: use New.
type Mirror struct {
	mu       sync.Mutex
	files    map[string][]byte
	replaced map[string][]byte
	// Sent counts the artifact bytes served (checksum files excluded).
	Sent atomic.Int64
}

// New returns an empty mirror.
func New() *Mirror {
	return &Mirror{files: map[string][]byte{}, replaced: map[string][]byte{}}
}

// Path prefixes of each project under the mirror's root, which are the base URLs to give the
// kubewin-release data source.
const (
	Kubernetes = "/k8s"
	Containerd = "/containerd"
	CNIPlugins = "/cni"
	Nodeboot   = "/nodeboot"
	Docker     = "/docker"
	CRIDockerd = "/cri-dockerd"
)

func (m *Mirror) add(p string, data []byte, sumFile string, named bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files[p] = data
	if sumFile == "" {
		return
	}
	sum := sha256.Sum256(data)
	line := hex.EncodeToString(sum[:])
	if named {
		line += "  " + path.Base(p)
	}
	m.files[sumFile] = []byte(line + "\n")
}

// AddKubernetes adds Windows node binaries ("kubelet.exe": content) of a Kubernetes version.
func (m *Mirror) AddKubernetes(version string, bins map[string][]byte) {
	for name, data := range bins {
		p := fmt.Sprintf("%s/%s/bin/windows/amd64/%s", Kubernetes, version, name)
		m.add(p, data, p+".sha256", false)
	}
}

// AddContainerd adds a containerd Windows release archive holding files ("bin/containerd.exe").
func (m *Mirror) AddContainerd(version string, files map[string][]byte) {
	p := fmt.Sprintf("%s/v%[2]s/containerd-%[2]s-windows-amd64.tar.gz", Containerd, version)
	m.add(p, TarGz(files), p+".sha256sum", true)
}

// AddCNIPlugins adds a CNI plugins Windows release archive holding files ("./win-bridge.exe").
func (m *Mirror) AddCNIPlugins(version string, files map[string][]byte) {
	p := fmt.Sprintf("%s/v%[2]s/cni-plugins-windows-amd64-v%[2]s.tgz", CNIPlugins, version)
	m.add(p, TarGz(files), p+".sha256", true)
}

// AddDocker adds Docker Engine's Windows static build of a version, as
// download.docker.com/win/static/stable/x86_64/ publishes it: docker-<version>.zip, holding the
// programs under docker/ ("dockerd.exe": content), which Docker's install-from-binaries steps
// for Windows expand into C:\Program Files (docs.docker.com/engine/install/binaries); no
// checksum file.
func (m *Mirror) AddDocker(version string, exes map[string][]byte) {
	files := map[string][]byte{}
	for name, data := range exes {
		files["docker/"+name] = data
	}
	m.add(fmt.Sprintf("%s/docker-%s.zip", Docker, version), Zip(files), "", false)
}

// AddCRIDockerd adds cri-dockerd's Windows release asset of a version:
// v<version>/cri-dockerd-<version>.win.amd64.zip, holding cri-dockerd/cri-dockerd.exe
// (Mirantis/cri-dockerd packaging/static/Makefile, target cross-win); no checksum file.
func (m *Mirror) AddCRIDockerd(version string, exe []byte) {
	p := fmt.Sprintf("%s/v%[2]s/cri-dockerd-%[2]s.win.amd64.zip", CRIDockerd, version)
	m.add(p, Zip(map[string][]byte{"cri-dockerd/cri-dockerd.exe": exe}), "", false)
}

// AddNodeboot adds nodeboot.exe of a version, listed in the release's SHA256SUMS.
func (m *Mirror) AddNodeboot(version string, exe []byte) {
	m.add(fmt.Sprintf("%s/v%[2]s/nodeboot_%[2]s_windows_amd64.exe", Nodeboot, version), exe,
		fmt.Sprintf("%s/v%[2]s/nodeboot_%[2]s_SHA256SUMS", Nodeboot, version), true)
}

// File returns the content served at a path.
func (m *Mirror) File(p string) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.files[p]
}

// Replace serves data at a path from now on while its checksum file stays: a tampered mirror.
func (m *Mirror) Replace(p string, data []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.replaced[p] = data
}

func (m *Mirror) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	data, ok := m.replaced[r.URL.Path]
	if !ok {
		data, ok = m.files[r.URL.Path]
	}
	m.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	if r.Method == http.MethodHead {
		return
	}
	n, _ := w.Write(data)
	if !strings.Contains(r.URL.Path, ".sha256") && !strings.HasSuffix(r.URL.Path, "SHA256SUMS") {
		m.Sent.Add(int64(n))
	}
}

// TarGz returns a gzipped tar of files, the same bytes for the same files.
func TarGz(files map[string][]byte) []byte {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		_ = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(files[name])), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg})
		_, _ = tw.Write(files[name])
	}
	_ = tw.Close()
	_ = gz.Close()
	return buf.Bytes()
}

// Zip returns a zip archive of files, the same bytes for the same files.
func Zip(files map[string][]byte) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		w, _ := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate, Modified: time.Unix(0, 0).UTC()})
		_, _ = w.Write(files[name])
	}
	_ = zw.Close()
	return buf.Bytes()
}
