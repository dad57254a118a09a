package api

import (
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
)

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestLoadNodeConfig(t *testing.T) {
	c, err := LoadNodeConfig(readFile(t, "nodeconfig-full.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Network.CNI != v1alpha1.CNIWinBridge || c.Network.Name != "cbr0" || c.Runtime.Endpoint != v1alpha1.ContainerdEndpoint {
		t.Errorf("defaults not applied: %+v %+v", c.Network, c.Runtime)
	}
	if c.Cluster.ClusterDomain != "cluster.local" {
		t.Errorf("clusterDomain = %q", c.Cluster.ClusterDomain)
	}
}

func TestRoundTrip(t *testing.T) {
	c, err := LoadNodeConfig(readFile(t, "nodeconfig-full.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	js, err := EncodeJSON(c)
	if err != nil {
		t.Fatal(err)
	}
	back, err := LoadNodeConfig(js)
	if err != nil {
		t.Fatalf("re-decoding our own JSON: %v\n%s", err, js)
	}
	if !reflect.DeepEqual(c, back) {
		t.Errorf("round trip changed the config:\n%+v\n%+v", c, back)
	}

	m, err := LoadImageManifest(readFile(t, "imagemanifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	js, _ = EncodeJSON(m)
	m2, err := LoadImageManifest(js)
	if err != nil || !reflect.DeepEqual(m, m2) {
		t.Errorf("manifest round trip: %v\n%+v\n%+v", err, m, m2)
	}
}

func TestDecodeStrict(t *testing.T) {
	tests := []struct {
		name, doc, wantErr string
	}{
		{"unknown field", "apiVersion: kubewin.io/v1alpha1\nkind: NodeConfig\ncluster:\n  apiServerEndpint: x:1\n", `unknown field "apiServerEndpint"`},
		{"duplicate key", "apiVersion: kubewin.io/v1alpha1\nkind: NodeConfig\nkind: NodeConfig\n", `mapping key "kind" already defined`},
		{"wrong kind", "apiVersion: kubewin.io/v1alpha1\nkind: ImageManifest\n", `kind is "ImageManifest", want "NodeConfig"`},
		{"missing apiVersion", "kind: NodeConfig\n", `apiVersion is missing: set apiVersion: kubewin.io/v1alpha1`},
		{"future apiVersion", "apiVersion: kubewin.io/v9\nkind: NodeConfig\n", `apiVersion "kubewin.io/v9" is not supported`},
		{"not an object", "[1, 2]", `must be an object`},
		{"wrong type", `{"apiVersion":"kubewin.io/v1alpha1","kind":"NodeConfig","node":{"maxPods":"many"}}`, `cannot unmarshal string`},
		{"trailing data", `{"apiVersion":"kubewin.io/v1alpha1","kind":"NodeConfig"} {"x":1}`, `check for trailing data`},
		{"two YAML documents", "apiVersion: kubewin.io/v1alpha1\nkind: NodeConfig\n---\napiVersion: kubewin.io/v1alpha1\nkind: NodeConfig\n",
			`more than one YAML document`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeNodeConfig([]byte(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
	if _, err := DecodeNodeConfig(make([]byte, MaxDocumentSize+1)); err == nil || !strings.Contains(err.Error(), "over the limit") {
		t.Errorf("oversized document: %v", err)
	}
}

// A NodeConfig with many mistakes yields one error that lists each of them with its field path.
func TestLoadNodeConfigReportsEveryMistake(t *testing.T) {
	doc := `
apiVersion: kubewin.io/v1alpha1
kind: NodeConfig
cluster:
  apiServerEndpoint: https://10.0.0.4:6443
  bootstrapToken: ABCDEF.secretsecretsecret
  clusterCIDR: 10.244.0.0/16
  serviceCIDR: 10.244.128.0/17
  clusterDNS: [10.96.0.10]
node:
  podCIDR: 10.245.1.0/24
  labels:
    kubernetes.io/role: windows
  taints:
    - {key: os, value: windows, effect: NoScheduleMaybe}
network:
  mode: overlay
  cni: win-bridge
  vni: 1
runtime:
  name: cri-o
kubeProxy:
  mode: userspace
kubelet:
  extraArgs:
    --v: "2"
  systemReservedMemory: 2GB of RAM
  evictionHardMemory: -100Mi
`
	_, err := LoadNodeConfig([]byte(doc))
	if err == nil {
		t.Fatal("want an error")
	}
	msg := err.Error()
	for _, want := range []string{
		"cluster.apiServerEndpoint: Invalid value: \"https://10.0.0.4:6443\": must be host:port without a scheme",
		"cluster.caCertHashes: Required value: pin the cluster CA",
		"cluster.bootstrapToken: Invalid value: \"<redacted>\"",
		"cluster.serviceCIDR: Invalid value: \"10.244.128.0/17\": overlaps clusterCIDR 10.244.0.0/16",
		"cluster.clusterDNS[0]: Invalid value: \"10.96.0.10\": must be inside serviceCIDR 10.244.128.0/17",
		"node.podCIDR: Invalid value: \"10.245.1.0/24\": must be inside cluster.clusterCIDR 10.244.0.0/16",
		"node.labels[kubernetes.io/role]: Forbidden: a kubelet may not set labels in the kubernetes.io namespace",
		"node.taints[0].effect: Unsupported value: \"NoScheduleMaybe\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"",
		"network.cni: Unsupported value: \"win-bridge\": supported values: \"win-overlay\"",
		"network.vni: Invalid value: 1: Windows overlay networks need a VNI from 4096 to 65535",
		"runtime.name: Unsupported value: \"cri-o\": supported values: \"containerd\", \"docker\"",
		"runtime.endpoint: Invalid value: \"\"",
		"kubeProxy.mode: Unsupported value: \"userspace\"",
		"kubelet.extraArgs[--v]: Invalid value: \"--v\": must be a flag name without leading dashes",
		"kubelet.systemReservedMemory: Invalid value: \"2GB of RAM\": must be a non-negative memory quantity such as \"1536Mi\" or \"2Gi\"",
		"kubelet.evictionHardMemory: Invalid value: \"-100Mi\": must be a non-negative memory quantity",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not mention %q\nfull error: %s", want, msg)
		}
	}
	if strings.Contains(msg, "secretsecret") {
		t.Error("the bootstrap token appears in the error")
	}
}

// HNS takes a peer's VNI in 16 bits: a VNI above 65535 cannot work on Windows.
func TestWindowsVNIRange(t *testing.T) {
	for vni, ok := range map[int]bool{4095: false, 4096: true, 65535: true, 65536: false} {
		doc := fmt.Sprintf("apiVersion: kubewin.io/v1alpha1\nkind: NodeConfig\ncluster: {apiServerEndpoint: 10.0.0.4:6443, unsafeSkipCAVerification: "+
			"true, bootstrapToken: abcdef.0123456789abcdef, clusterCIDR: 10.244.0.0/16, serviceCIDR: 10.96.0.0/12}\nnetwork: {mode: overlay, vni: %d}\n", vni)
		_, err := LoadNodeConfig([]byte(doc))
		if bad := err != nil && strings.Contains(err.Error(), "network.vni"); bad == ok {
			t.Errorf("vni %d: %v", vni, err)
		}
	}
}

// wincni.exe has no release any image could ship: a config naming it is refused with its replacement,
// for either runtime, before the node joins.
func TestWinCNIRefused(t *testing.T) {
	for _, runtime := range []string{"docker", "containerd"} {
		doc := "apiVersion: kubewin.io/v1alpha1\nkind: NodeConfig\ncluster: {apiServerEndpoint: 10.0.0.4:6443, unsafeSkipCAVerification: " +
			"true, bootstrapToken: abcdef.0123456789abcdef, clusterCIDR: 10.244.0.0/16, serviceCIDR: 10.96.0.0/12}\nnetwork: {cni: wincni}\n" +
			"runtime: {name: " + runtime + "}\n"
		_, err := LoadNodeConfig([]byte(doc))
		want := `network.cni: Invalid value: "wincni": wincni.exe has no release and no kubewin image contains it: ` +
			"remove network.cni or set it to win-bridge"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("runtime %s: error = %v, want %q", runtime, err, want)
		}
	}
}

func TestImageManifestValidation(t *testing.T) {
	doc := `{
  "apiVersion": "kubewin.io/v1alpha1", "kind": "ImageManifest",
  "windowsBuild": 14393, "kubernetesVersion": "v1.29.0",
  "runtime": {"name": "docker", "version": "24.0.7"},
  "pauseImage": {"reference": "Registry.k8s.io/pause 3.10", "digest": "sha256:abc"},
  "files": [
    {"path": "bin/kubelet.exe", "sha256": "0f5a8ab3b2e9a9c3b1f36a24f2d0c6f3f0c1d1e0e2b3a4c5d6e7f8091a2b3c4d", "size": 1},
    {"path": "BIN/Kubelet.exe", "sha256": "0f5a8ab3b2e9a9c3b1f36a24f2d0c6f3f0c1d1e0e2b3a4c5d6e7f8091a2b3c4d", "size": 1},
    {"path": "../etc/passwd", "sha256": "XYZ", "size": -1},
    {"path": "containerd.exe", "sha256": "0f5a8ab3b2e9a9c3b1f36a24f2d0c6f3f0c1d1e0e2b3a4c5d6e7f8091a2b3c4d", "size": 1,
	"unpack": "Program Files/containerd"},
    {"path": "cni.tgz", "sha256": "0f5a8ab3b2e9a9c3b1f36a24f2d0c6f3f0c1d1e0e2b3a4c5d6e7f8091a2b3c4d", "size": 1, "unpack": "C:/opt"}
  ],
  "workloadImages": [
    {"reference": "Example.com/App", "digest": "sha256:abc", "osVersion": "10.0.19041.1", "size": 0, "archive": "app.tar"},
    {"reference": "example.com/app:1", "digest": "sha256:0f5a8ab3b2e9a9c3b1f36a24f2d0c6f3f0c1d1e0e2b3a4c5d6e7f8091a2b3c4d",
     "osVersion": "10.0.20348.1", "size": 5, "archive": "cni.tgz"},
    {"reference": "example.com/web:1", "digest": "sha256:0f5a8ab3b2e9a9c3b1f36a24f2d0c6f3f0c1d1e0e2b3a4c5d6e7f8091a2b3c4d",
     "osVersion": "linux", "size": 5, "archive": "cni.tgz"}
  ]
}`
	_, err := LoadImageManifest([]byte(doc))
	if err == nil {
		t.Fatal("want an error")
	}
	for _, want := range []string{
		`windowsBuild: Unsupported value: "14393": supported values: "17763", "20348", "26100"`,
		`kubernetesVersion: Invalid value: "v1.29.0": Kubernetes 1.29.0 is not supported on kubewin nodes: use 1.34 to 1.37`,
		`runtime.criDockerdVersion: Required value`,
		`pauseImage.reference: Invalid value`,
		`pauseImage.digest: Invalid value: "sha256:abc"`,
		`nodebootVersion: Required value`,
		`files[1].path: Duplicate value: "BIN/Kubelet.exe (same file as files[0] on Windows)"`,
		`files[2].path: Invalid value: "../etc/passwd"`,
		`files[2].sha256: Invalid value: "XYZ"`,
		`files[2].size: Invalid value: -1`,
		`files[3].path: Invalid value: "containerd.exe": an unpacked file must end in .zip, .tar.gz or .tgz`,
		`files[4].unpack: Invalid value: "C:/opt"`,
		`workloadImages[0].reference: Invalid value: "Example.com/App"`,
		`workloadImages[0].digest: Invalid value: "sha256:abc"`,
		`workloadImages[0].osVersion: Invalid value: "10.0.19041.1": os.version 10.0.19041.1 is Windows build 19041, which kubewin nodes do not run`,
		`workloadImages[0].size: Invalid value: 0`,
		`workloadImages[0].archive: Invalid value: "app.tar": must be the path of one of the files listed in files`,
		`workloadImages[2].osVersion: Invalid value: "linux": os.version "linux" is not a Windows version`,
		`workloadImages[2].archive: Duplicate value: "cni.tgz (the archive of workloadImages[1])"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q\nfull error: %v", want, err)
		}
	}
}

// The isolation modes an image records: process always, hyperv with containerd only, each
// once; every mistake is named with its field path.
func TestImageManifestIsolation(t *testing.T) {
	for _, tc := range []struct {
		name      string
		runtime   v1alpha1.RuntimeInfo
		isolation []v1alpha1.Isolation
		want      []string // empty: valid
	}{
		{name: "none recorded: process only", runtime: containerd},
		{name: "process", runtime: containerd, isolation: []v1alpha1.Isolation{"process"}},
		{name: "process and hyperv", runtime: containerd, isolation: []v1alpha1.Isolation{"process", "hyperv"}},
		{name: "hyperv on docker", runtime: docker, isolation: []v1alpha1.Isolation{"process", "hyperv"}, want: []string{
			`isolation[1]: Invalid value: "hyperv": Hyper-V isolation is configured only with containerd (its runhcs-wcow-hypervisor runtime ` +
				`handler), and the image's runtime is docker: bake a containerd image, or leave hyperv out`}},
		{name: "hyperv without process", runtime: containerd, isolation: []v1alpha1.Isolation{"hyperv"}, want: []string{
			`isolation: Required value: process isolation is always configured: list process first, e.g. [process, hyperv]`}},
		{name: "unknown and repeated", runtime: containerd, isolation: []v1alpha1.Isolation{"process", "sandbox", "process"}, want: []string{
			`isolation[1]: Unsupported value: "sandbox": supported values: "process", "hyperv"`,
			`isolation[2]: Duplicate value: "process"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := LoadImageManifest(readFile(t, "imagemanifest.json"))
			if err != nil {
				t.Fatal(err)
			}
			m.Runtime, m.Isolation = tc.runtime, tc.isolation
			errs := m.Validate()
			if len(errs) != len(tc.want) {
				t.Fatalf("got %d errors, want %d: %v", len(errs), len(tc.want), errs)
			}
			for i, want := range tc.want {
				if errs[i].Error() != want {
					t.Errorf("error %d:\n%s\nwant\n%s", i, errs[i].Error(), want)
				}
			}
			if got := m.HyperV(); got != slices.Contains(tc.isolation, v1alpha1.IsolationHyperV) {
				t.Errorf("HyperV() = %v", got)
			}
		})
	}
}

// The label that says a node runs Hyper-V isolated pods comes from the image, never from a
// NodeConfig.
func TestHyperVLabelIsKubewins(t *testing.T) {
	c, err := LoadNodeConfig(readFile(t, "nodeconfig-full.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c.Node.Labels = map[string]string{v1alpha1.LabelHyperVIsolation: "true"}
	errs := c.Validate()
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), `node.labels[kubewin.io/hyperv-isolation]: Forbidden: kubewin sets this label on the nodes `+
		`of images baked with Hyper-V isolation`) {
		t.Errorf("errors: %v", errs)
	}
}

var (
	containerd = v1alpha1.RuntimeInfo{Name: v1alpha1.RuntimeContainerd, Version: "2.1.4"}
	docker     = v1alpha1.RuntimeInfo{Name: v1alpha1.RuntimeDocker, Version: "24.0.7", CRIDockerdVersion: "0.3.16"}
)

func FuzzDecodeNodeConfig(f *testing.F) {
	f.Add(readFileF(f, "nodeconfig-full.yaml"))
	f.Add([]byte(`{"apiVersion":"kubewin.io/v1alpha1","kind":"NodeConfig","node":{"podCIDR":"10.0.0.0/31","maxPods":99999}}`))
	f.Add([]byte("apiVersion: kubewin.io/v1alpha1\nkind: NodeConfig\nnetwork: {mode: overlay, vni: -5}\nkubeProxy: {sourceVIP: '::1'}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		within(t, data, func() {
			c, err := DecodeNodeConfig(data)
			if err != nil {
				return
			}
			c.Default()
			if errs := c.Validate(); len(errs) > 0 {
				_ = errs.ToAggregate().Error()
				return
			}
			// A valid config survives encoding unchanged.
			js, err := EncodeJSON(c)
			if err != nil {
				t.Error(err)
				return
			}
			back, err := LoadNodeConfig(js)
			if err != nil {
				t.Errorf("valid config did not reload: %v\n%s", err, js)
				return
			}
			if !reflect.DeepEqual(c, back) {
				t.Errorf("round trip changed a valid config")
			}
		})
	})
}

func FuzzDecodeImageManifest(f *testing.F) {
	f.Add(readFileF(f, "imagemanifest.json"))
	f.Fuzz(func(t *testing.T, data []byte) {
		within(t, data, func() {
			m, err := DecodeImageManifest(data)
			if err != nil {
				return
			}
			_ = m.Validate()
		})
	})
}

// within runs f and fails the test when it takes unreasonably long, so that the fuzzer
// reports inputs that would hang nodeboot or the provider.
func within(t *testing.T, data []byte, f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("handling %d bytes took over 5 s: %q", len(data), data)
	}
}

func readFileF(f *testing.F, name string) []byte {
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		f.Fatal(err)
	}
	return b
}
