package release

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kubewin/kubewin/internal/api"
	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/ociimage"
)

// artifact is one payload file to resolve.
type artifact struct {
	path   string // on the node's system drive
	url    string
	sumURL string // a checksum file; empty: sum is given or the file is hashed
	sum    string
	unpack string
}

// artifacts lists what an image of this configuration contains.
func (c *Config) artifacts() []artifact {
	k := strings.TrimSuffix(c.KubernetesBaseURL, "/") + "/" + c.KubernetesVersion + "/bin/windows/amd64/"
	var as []artifact
	for _, bin := range []string{"kubelet.exe", "kube-proxy.exe", "kubeadm.exe", "kube-log-runner.exe"} {
		as = append(as, artifact{path: "k/" + bin, url: k + bin, sumURL: k + bin + ".sha256"})
	}
	nb := fmt.Sprintf("%s/v%s/", strings.TrimSuffix(c.NodebootBaseURL, "/"), c.NodebootVersion)
	as = append(as, artifact{path: "k/nodeboot.exe", url: nb + fmt.Sprintf("nodeboot_%s_windows_amd64.exe", c.NodebootVersion),
		sumURL: nb + fmt.Sprintf("nodeboot_%s_SHA256SUMS", c.NodebootVersion)})
	cni := fmt.Sprintf("cni-plugins-windows-amd64-v%s.tgz", c.CNIPluginsVersion)
	cniURL := fmt.Sprintf("%s/v%s/%s", strings.TrimSuffix(c.CNIPluginsBaseURL, "/"), c.CNIPluginsVersion, cni)
	as = append(as, artifact{path: archives + cni, url: cniURL, sumURL: cniURL + ".sha256", unpack: "opt/cni/bin"})
	switch v1alpha1.RuntimeName(c.Runtime) {
	case v1alpha1.RuntimeContainerd:
		ctd := fmt.Sprintf("containerd-%s-windows-amd64.tar.gz", c.ContainerdVersion)
		u := fmt.Sprintf("%s/v%s/%s", strings.TrimSuffix(c.ContainerdBaseURL, "/"), c.ContainerdVersion, ctd)
		as = append(as, artifact{path: archives + ctd, url: u, sumURL: u + ".sha256sum", unpack: "Program Files/containerd"})
	case v1alpha1.RuntimeDocker:
		d := fmt.Sprintf("docker-%s.zip", c.DockerVersion)
		as = append(as, artifact{path: archives + d, url: strings.TrimSuffix(c.DockerBaseURL, "/") + "/" + d, sum: c.DockerSHA256, unpack: "Program Files"})
		// cri-dockerd's Windows asset (Mirantis/cri-dockerd packaging/static/Makefile, cross-win;
		// <version>.amd64.tgz is the Linux build) unpacks into C:\k as cri-dockerd\cri-dockerd.exe.
		cd := fmt.Sprintf("cri-dockerd-%s.win.amd64.zip", c.CRIDockerdVersion)
		as = append(as, artifact{path: archives + cd, url: fmt.Sprintf("%s/v%s/%s", strings.TrimSuffix(c.CRIDockerdBaseURL, "/"), c.CRIDockerdVersion,
			cd), sum: c.CRIDockerdSHA256, unpack: "k"})
	}
	if c.ACRCredentialProviderVersion != "" {
		// cloud-provider-azure's Windows release asset (kubernetes-sigs/cloud-provider-azure
		// Makefile, bin/azure-acr-credential-provider.exe; its release script's EXPECTED_ASSETS),
		// with no checksum file: hashed once unless acr_credential_provider_sha256 gives the sum.
		u := fmt.Sprintf("%s/%s/azure-acr-credential-provider-windows-amd64.exe", strings.TrimSuffix(c.CloudProviderAzureBaseURL, "/"),
			c.ACRCredentialProviderVersion)
		as = append(as, artifact{path: v1alpha1.ACRCredentialProviderPath, url: u, sum: c.ACRCredentialProviderSHA256})
	}
	return as
}

// archives is where downloaded archives live in the image, next to what they unpack to.
const archives = "ProgramData/kubewin/archives/"

// Resolve turns the configuration into a bake plan: every artifact's sha256 and size, and the
// pause image's digest for the Windows build.
func (c *Config) Resolve(ctx context.Context, client *http.Client, reg ociimage.Options) (*v1alpha1.ImageManifest, error) {
	as := c.artifacts()
	files := make([]v1alpha1.File, len(as))
	errs := make([]error, len(as))
	var wg sync.WaitGroup
	for i, a := range as {
		wg.Go(func() {
			files[i], errs[i] = resolveFile(ctx, client, a)
		})
	}
	m := &v1alpha1.ImageManifest{
		APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindImageManifest,
		WindowsBuild: c.build, KubernetesVersion: c.KubernetesVersion, NodebootVersion: c.NodebootVersion,
		Runtime:               v1alpha1.RuntimeInfo{Name: v1alpha1.RuntimeName(c.Runtime), Version: c.ContainerdVersion},
		PauseImage:            v1alpha1.PauseImage{Reference: c.PauseImage, Digest: c.PauseImageDigest},
		ACRCredentialProvider: c.ACRCredentialProviderVersion,
	}
	if m.Runtime.Name == v1alpha1.RuntimeDocker {
		m.Runtime.Version, m.Runtime.CRIDockerdVersion = c.DockerVersion, c.CRIDockerdVersion
	}
	if c.HyperVIsolation {
		m.Isolation = []v1alpha1.Isolation{v1alpha1.IsolationProcess, v1alpha1.IsolationHyperV}
	}
	var pauseErr error
	if m.PauseImage.Digest == "" {
		// Pod sandboxes run process-isolated: the pause image must be of the image's own build.
		var pause ociimage.Image
		pause, pauseErr = ociimage.Resolve(ctx, c.PauseImage, c.build, false, reg)
		m.PauseImage.Digest = pause.Digest
		if pauseErr != nil {
			pauseErr = fmt.Errorf("pause_image: %w; use a pause image with an entry for this build (registry.k8s.io/pause 3.10.2 or later "+
				"covers 17763, 20348 and 26100), or set pause_image_digest to resolve offline", pauseErr)
		}
	}
	wg.Wait()
	if err := errors.Join(errors.Join(errs...), pauseErr); err != nil {
		return nil, err
	}
	m.Files = files
	slices.SortFunc(m.Files, func(a, b v1alpha1.File) int { return strings.Compare(a.Path, b.Path) })
	if errs := m.Validate(); len(errs) > 0 {
		return nil, &api.ValidationError{Kind: v1alpha1.KindImageManifest, Errs: errs}
	}
	return m, nil
}

func resolveFile(ctx context.Context, client *http.Client, a artifact) (v1alpha1.File, error) {
	f := v1alpha1.File{Path: a.path, Source: a.url, SHA256: strings.ToLower(a.sum), Unpack: a.unpack}
	var err error
	switch {
	case a.sumURL != "":
		if f.SHA256, err = fetchSum(ctx, client, a.sumURL, path.Base(a.url)); err != nil {
			return f, err
		}
		f.Size, err = contentLength(ctx, client, a.url)
	case f.SHA256 != "":
		f.Size, err = contentLength(ctx, client, a.url)
	default:
		// No published checksum: hash the file once, here.
		f.SHA256, f.Size, err = hashURL(ctx, client, a.url)
	}
	return f, err
}

func get(ctx context.Context, client *http.Client, method, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		_ = resp.Body.Close()
		return nil, fmt.Errorf("%s %s: %s", method, url, resp.Status)
	}
	return resp, nil
}

// fetchSum reads a checksum file: a bare hex digest, or sha256sum lines ("<hex>  <name>") of
// which the one naming file is taken.
func fetchSum(ctx context.Context, client *http.Client, url, file string) (string, error) {
	resp, err := get(ctx, client, http.MethodGet, url)
	if err != nil {
		return "", fmt.Errorf("checksum of %s: %w", file, err)
	}
	defer func() { _ = resp.Body.Close() }()
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 1<<20))
	var lines [][]string
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) > 0 {
			lines = append(lines, f)
		}
	}
	for _, l := range lines {
		if (len(l) == 1 && len(lines) == 1) || (len(l) >= 2 && strings.TrimPrefix(l[1], "*") == file) {
			if !isSHA256(l[0]) {
				break
			}
			return strings.ToLower(l[0]), nil
		}
	}
	return "", fmt.Errorf("checksum file %s has no sha256 for %s", url, file)
}

func contentLength(ctx context.Context, client *http.Client, url string) (int64, error) {
	resp, err := get(ctx, client, http.MethodHead, url)
	if err != nil {
		return 0, err
	}
	_ = resp.Body.Close()
	if resp.ContentLength >= 0 {
		return resp.ContentLength, nil
	}
	_, n, err := hashURL(ctx, client, url)
	return n, err
}

func hashURL(ctx context.Context, client *http.Client, url string) (string, int64, error) {
	resp, err := get(ctx, client, http.MethodGet, url)
	if err != nil {
		return "", 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	h := sha256.New()
	n, err := io.Copy(h, resp.Body)
	if err != nil {
		return "", 0, fmt.Errorf("GET %s: %w", url, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// defaultClient is the HTTP client of a resolution.
func defaultClient() *http.Client { return &http.Client{Timeout: 10 * time.Minute} }
