package release

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/kubewin/kubewin/internal/api"
	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/azureimage"
	"github.com/kubewin/kubewin/internal/ociimage"
	"github.com/kubewin/kubewin/internal/testkit/ociregistry"
	"github.com/kubewin/kubewin/internal/testkit/releasemirror"
)

func mirror(t *testing.T) (*releasemirror.Mirror, string) {
	m := releasemirror.New()
	m.AddKubernetes("v1.36.3", map[string][]byte{"kubelet.exe": []byte("kubelet"), "kube-proxy.exe": []byte("kube-proxy"),
		"kubeadm.exe": []byte("kubeadm"), "kube-log-runner.exe": []byte("klr")})
	m.AddContainerd("2.1.4", map[string][]byte{"bin/containerd.exe": []byte("containerd")})
	m.AddCNIPlugins("1.7.1", map[string][]byte{"./win-bridge.exe": []byte("wb")})
	m.AddNodeboot("0.2.0", []byte("nodeboot"))
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	return m, srv.URL
}

func testConfig(base, pause string) Config {
	return Config{
		KubernetesVersion: "1.36.3", WindowsVersion: "2025", NodebootVersion: "0.2.0", PauseImage: pause,
		KubernetesBaseURL: base + releasemirror.Kubernetes, ContainerdBaseURL: base + releasemirror.Containerd,
		CNIPluginsBaseURL: base + releasemirror.CNIPlugins, NodebootBaseURL: base + releasemirror.Nodeboot,
	}
}

func TestResolve(t *testing.T) {
	m, base := mirror(t)
	reg := ociregistry.Serve(t)
	pause, digests := reg.PushPause(t, "pause:3.10.2", 20348, 26100)
	c := testConfig(base, pause)
	if err := c.prepare(); err != nil {
		t.Fatal(err)
	}
	plan, err := c.Resolve(context.Background(), http.DefaultClient, ociimage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if plan.KubernetesVersion != "v1.36.3" || plan.WindowsBuild != v1alpha1.WindowsServer2025 || plan.PauseImage.Digest != digests[26100] ||
		plan.PauseImage.Archive != "" {
		t.Errorf("plan: %+v", plan)
	}
	if len(plan.Files) != 7 {
		t.Fatalf("%d files, want 7: %+v", len(plan.Files), plan.Files)
	}
	for _, f := range plan.Files {
		data := m.File(strings.TrimPrefix(f.Source, base))
		if data == nil {
			t.Errorf("%s: source %s is not on the mirror", f.Path, f.Source)
			continue
		}
		if got := sha(data); got != f.SHA256 || f.Size != int64(len(data)) {
			t.Errorf("%s: sha256 %s size %d, want %s %d", f.Path, f.SHA256, f.Size, got, len(data))
		}
		if strings.HasSuffix(f.Path, ".tgz") && f.Unpack != "opt/cni/bin" || strings.Contains(f.Path,
			"containerd-") && f.Unpack != "Program Files/containerd" {
			t.Errorf("%s unpacks into %q", f.Path, f.Unpack)
		}
	}

	// A missing checksum and a registry without the build both show, in one error.
	c = testConfig(base, pause)
	c.WindowsVersion = "2019"
	c.CNIPluginsVersion = "9.9.9"
	if err := c.prepare(); err != nil {
		t.Fatal(err)
	}
	_, err = c.Resolve(context.Background(), http.DefaultClient, ociimage.Options{})
	for _, want := range []string{"cni-plugins-windows-amd64-v9.9.9.tgz: GET", "404", "no windows/amd64 image for Windows build 17763",
		"pause_image_digest"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Docker and cri-dockerd publish no checksum files: their zips are hashed once at resolve. The
// mirror serves each project's assets under the names the project publishes.
func TestResolveDockerHashes(t *testing.T) {
	m, base := mirror(t)
	m.AddDocker("28.3.3", map[string][]byte{"dockerd.exe": []byte("dockerd"), "docker.exe": []byte("docker")})
	m.AddCRIDockerd("0.3.18", []byte("cri-dockerd"))
	c := testConfig(base, "registry.k8s.io/pause:3.10.2")
	c.Runtime, c.DockerVersion, c.CRIDockerdVersion = "docker", "28.3.3", "0.3.18"
	c.DockerBaseURL, c.CRIDockerdBaseURL = base+releasemirror.Docker, base+releasemirror.CRIDockerd
	c.PauseImageDigest = "sha256:" + strings.Repeat("1", 64) // offline: no registry asked
	if err := c.prepare(); err != nil {
		t.Fatal(err)
	}
	plan, err := c.Resolve(context.Background(), http.DefaultClient, ociimage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, f := range plan.Files {
		switch {
		case strings.HasSuffix(f.Path, "docker-28.3.3.zip"):
			found++
			if f.SHA256 != sha(m.File(releasemirror.Docker+"/docker-28.3.3.zip")) || f.Unpack != "Program Files" {
				t.Errorf("docker: %+v", f)
			}
		case strings.HasSuffix(f.Path, "cri-dockerd-0.3.18.win.amd64.zip"):
			found++
			if f.SHA256 != sha(m.File(releasemirror.CRIDockerd+"/v0.3.18/cri-dockerd-0.3.18.win.amd64.zip")) || f.Unpack != "k" {
				t.Errorf("cri-dockerd: %+v", f)
			}
		case strings.Contains(f.Path, "containerd"):
			t.Errorf("a docker image lists %s", f.Path)
		}
	}
	if found != 2 || plan.Runtime.Name != v1alpha1.RuntimeDocker || plan.Runtime.CRIDockerdVersion != "0.3.18" {
		t.Errorf("plan: %+v", plan)
	}
}

func TestPrepareReportsEveryError(t *testing.T) {
	c := Config{WindowsVersion: "2016", Runtime: "docker", DockerSHA256: "abc", PauseImageDigest: "md5:x", KubernetesBaseURL: "ftp://mirror"}
	err := c.prepare()
	for _, want := range []string{
		"kubernetes_version is required", `windows_version "2016" is not supported`, "docker_version is required",
		"cri_dockerd_version is required", `docker_sha256 "abc" is not a sha256`, `pause_image_digest "md5:x"`,
		`kubernetes_base_url "ftp://mirror" is not an http(s) URL`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
	c = Config{KubernetesVersion: "v1.29.0"}
	if err := c.prepare(); err == nil || !strings.Contains(err.Error(), "not supported on kubewin nodes") {
		t.Errorf("1.29: %v", err)
	}
}

// hyperv_isolation plans both isolation modes: the manifest output records them, for the
// kubewin-node provisioner to bake, and azure_tags carry them in the tag kubewin's azure backend
// reads; without it neither does. A Docker release is refused at configure.
func TestExecuteHyperVIsolation(t *testing.T) {
	_, base := mirror(t)
	raw := func(hyperV bool) map[string]any {
		return map[string]any{
			"kubernetes_version": "1.36.3", "windows_version": "2025", "nodeboot_version": "0.2.0", "hyperv_isolation": hyperV,
			"pause_image_digest":  "sha256:" + strings.Repeat("1", 64), // offline: no registry asked
			"kubernetes_base_url": base + releasemirror.Kubernetes, "containerd_base_url": base + releasemirror.Containerd,
			"cni_plugins_base_url": base + releasemirror.CNIPlugins, "nodeboot_base_url": base + releasemirror.Nodeboot,
		}
	}
	for _, hyperV := range []bool{true, false} {
		out, m := execute(t, raw(hyperV))
		tag, tagged := out.GetAttr("azure_tags").AsValueMap()[azureimage.TagIsolation]
		switch {
		case hyperV && (!tagged || tag.AsString() != "process,hyperv"):
			t.Errorf("hyperv_isolation: azure_tags[%s] = %#v, want \"process,hyperv\"", azureimage.TagIsolation, tag)
		case hyperV && !slices.Equal(m.Isolation, []v1alpha1.Isolation{v1alpha1.IsolationProcess, v1alpha1.IsolationHyperV}):
			t.Errorf("hyperv_isolation: the manifest's isolation is %v, want [process hyperv]", m.Isolation)
		case !hyperV && (tagged || m.Isolation != nil):
			t.Errorf("without hyperv_isolation: azure_tags[%s] = %#v, the manifest's isolation %v", azureimage.TagIsolation, tag, m.Isolation)
		}
	}

	docker := raw(true)
	docker["runtime"], docker["docker_version"], docker["cri_dockerd_version"] = "docker", "28.3.3", "0.3.18"
	err := (&Datasource{}).Configure(docker)
	if err == nil || !strings.Contains(err.Error(), `hyperv_isolation is for containerd images only, and runtime is "docker"`) {
		t.Errorf("Hyper-V on a Docker release: %v", err)
	}
}

// cloudProviderAzure serves cloud-provider-azure's Windows acr-credential-provider asset of a
// release as its GitHub releases lay it out (<version>/azure-acr-credential-provider-windows-amd64.exe,
// no checksum file), and records every request as "METHOD path".
func cloudProviderAzure(t *testing.T, version string, exe []byte) (base string, requests func() []string) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path)
		mu.Unlock()
		if r.URL.Path != "/"+version+"/azure-acr-credential-provider-windows-amd64.exe" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(exe)))
		if r.Method != http.MethodHead {
			_, _ = w.Write(exe)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
}

// acr_credential_provider_version adds cloud-provider-azure's acr-credential-provider to the
// plan at its path in the kubelet's credential provider directory: hashed once when no sha256
// is given (the project publishes none), taken from acr_credential_provider_sha256 without a
// download when it is. The manifest output records the release and azure_tags carry it; without
// the version the plan has no such file, no such tag, and the release server is never asked.
func TestExecuteACRCredentialProvider(t *testing.T) {
	_, base := mirror(t)
	exe := []byte("acr-credential-provider")
	given := sha([]byte("another build of acr-credential-provider"))
	for _, tc := range []struct {
		name, version, sum string
		wantSum            string // empty: no acr-credential-provider in the plan
		wantGET            bool
	}{
		{name: "hashed", version: "1.34.2", wantSum: sha(exe), wantGET: true},
		{name: "given sha256", version: "v1.34.2", sum: strings.ToUpper(given), wantSum: given},
		{name: "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			acrBase, requests := cloudProviderAzure(t, "v1.34.2", exe)
			raw := map[string]any{
				"kubernetes_version": "1.36.3", "windows_version": "2022", "nodeboot_version": "0.2.0",
				"pause_image_digest":  "sha256:" + strings.Repeat("1", 64), // offline: no registry asked
				"kubernetes_base_url": base + releasemirror.Kubernetes, "containerd_base_url": base + releasemirror.Containerd,
				"cni_plugins_base_url": base + releasemirror.CNIPlugins, "nodeboot_base_url": base + releasemirror.Nodeboot,
				"cloud_provider_azure_base_url": acrBase + "/",
			}
			if tc.version != "" {
				raw["acr_credential_provider_version"] = tc.version
			}
			if tc.sum != "" {
				raw["acr_credential_provider_sha256"] = tc.sum
			}
			out, m := execute(t, raw)
			i := slices.IndexFunc(m.Files, func(f v1alpha1.File) bool { return f.Path == v1alpha1.ACRCredentialProviderPath })
			tag, tagged := out.GetAttr("azure_tags").AsValueMap()[azureimage.TagACRCredentialProvider]
			urls, sums := out.GetAttr("urls").AsValueMap(), out.GetAttr("sha256").AsValueMap()
			asset := "/v1.34.2/azure-acr-credential-provider-windows-amd64.exe"

			if tc.wantSum == "" {
				if i >= 0 || tagged || m.ACRCredentialProvider != "" || len(requests()) > 0 {
					t.Errorf("without acr_credential_provider_version: file %d, azure_tags[%s] = %#v, manifest %q, requests %v",
						i, azureimage.TagACRCredentialProvider, tag, m.ACRCredentialProvider, requests())
				}
				return
			}
			if i < 0 {
				t.Fatalf("the plan has no %s: %+v", v1alpha1.ACRCredentialProviderPath, m.Files)
			}
			f := m.Files[i]
			if f.Source != acrBase+asset || f.SHA256 != tc.wantSum || f.Size != int64(len(exe)) || f.Unpack != "" {
				t.Errorf("acr-credential-provider: %+v, want source %s sha256 %s size %d", f, acrBase+asset, tc.wantSum, len(exe))
			}
			if urls[f.Path].AsString() != f.Source || sums[f.Path].AsString() != tc.wantSum {
				t.Errorf("urls/sha256 outputs: %#v %#v", urls[f.Path], sums[f.Path])
			}
			if m.ACRCredentialProvider != "v1.34.2" || !tagged || tag.AsString() != "v1.34.2" {
				t.Errorf("manifest acrCredentialProvider %q, azure_tags[%s] = %#v, want v1.34.2", m.ACRCredentialProvider,
					azureimage.TagACRCredentialProvider, tag)
			}
			if got := slices.Contains(requests(), "GET "+asset); got != tc.wantGET {
				t.Errorf("downloaded the binary: %v, want %v (requests %v)", got, tc.wantGET, requests())
			}
		})
	}
}

// The ACR credential provider's options are checked at configure: a malformed sha256, a sha256
// without a release, a malformed release and a base URL that is not http(s), each named with
// its value and what to do.
func TestPrepareACRCredentialProvider(t *testing.T) {
	valid := func() Config { return Config{KubernetesVersion: "v1.36.3"} }
	for _, tc := range []struct {
		name string
		set  func(*Config)
		want []string
	}{
		{"bad sha256", func(c *Config) { c.ACRCredentialProviderVersion, c.ACRCredentialProviderSHA256 = "v1.34.2", "abc" },
			[]string{`acr_credential_provider_sha256 "abc" is not a sha256: give 64 hex digits`}},
		{"sha256 without version", func(c *Config) { c.ACRCredentialProviderSHA256 = strings.Repeat("a", 64) },
			[]string{`acr_credential_provider_sha256 "` + strings.Repeat("a", 64) + `" is set without acr_credential_provider_version`,
				"set acr_credential_provider_version to the cloud-provider-azure release", "or leave acr_credential_provider_sha256 out"}},
		{"bad version", func(c *Config) { c.ACRCredentialProviderVersion = "latest" },
			[]string{`acr_credential_provider_version "latest" is not a cloud-provider-azure release version`, `"v1.34.2"`}},
		{"bad base URL", func(c *Config) { c.CloudProviderAzureBaseURL = "ftp://mirror" },
			[]string{`cloud_provider_azure_base_url "ftp://mirror" is not an http(s) URL`}},
	} {
		c := valid()
		tc.set(&c)
		err := c.prepare()
		for _, want := range tc.want {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error does not say %q:\n%v", tc.name, want, err)
			}
		}
	}

	for _, v := range []string{"1.34.2", "v1.34.2"} {
		c := valid()
		c.ACRCredentialProviderVersion = v
		if err := c.prepare(); err != nil || c.ACRCredentialProviderVersion != "v1.34.2" ||
			c.CloudProviderAzureBaseURL != "https://github.com/kubernetes-sigs/cloud-provider-azure/releases/download" {
			t.Errorf("%s: %v; version %q, base URL %q", v, err, c.ACRCredentialProviderVersion, c.CloudProviderAzureBaseURL)
		}
	}
	c := valid()
	c.ACRCredentialProviderVersion = "v1.34.2"
	if err := c.prepare(); err != nil {
		t.Fatal(err)
	}
	as := c.artifacts()
	i := slices.IndexFunc(as, func(a artifact) bool { return a.path == v1alpha1.ACRCredentialProviderPath })
	want := "https://github.com/kubernetes-sigs/cloud-provider-azure/releases/download/v1.34.2/azure-acr-credential-provider-windows-amd64.exe"
	if i < 0 || as[i].url != want || as[i].sumURL != "" {
		t.Errorf("artifacts: %+v, want one from %s", as, want)
	}
}

// execute configures the data source with raw and runs it, returning its output and manifest.
func execute(t *testing.T, raw map[string]any) (cty.Value, *v1alpha1.ImageManifest) {
	t.Helper()
	var d Datasource
	if err := d.Configure(raw); err != nil {
		t.Fatal(err)
	}
	out, err := d.Execute()
	if err != nil {
		t.Fatal(err)
	}
	m, err := api.LoadImageManifest([]byte(out.GetAttr("manifest").AsString()))
	if err != nil {
		t.Fatal(err)
	}
	return out, m
}
