package cmd

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	c := New(&out, &out)
	c.SetArgs(args)
	err := c.Execute()
	return out.String(), err
}

func TestConfigValidate(t *testing.T) {
	out, err := run(t, "config", "validate", "-c", "testdata/nodeconfig.yaml", "-m", "testdata/imagemanifest.json")
	if err != nil || !strings.Contains(out, "valid") {
		t.Fatalf("validate: %v\n%s", err, out)
	}

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	doc, _ := os.ReadFile("testdata/nodeconfig.yaml")
	doc = bytes.Replace(doc, []byte("mode: l2bridge"), []byte("mode: l3bridge"), 1)
	doc = bytes.Replace(doc, []byte("name: containerd"), []byte("name: docker"), 1)
	if err := os.WriteFile(bad, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = run(t, "config", "validate", "-c", bad)
	if err == nil {
		t.Fatal("want an error")
	}
	for _, want := range []string{`network.mode: Unsupported value: "l3bridge"`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "0123456789abcdef") {
		t.Error("the bootstrap token was printed")
	}
}

func TestConfigValidateSkew(t *testing.T) {
	doc, _ := os.ReadFile("testdata/nodeconfig.yaml")
	doc = bytes.Replace(doc, []byte("kubernetesVersion: v1.36.2"), []byte("kubernetesVersion: v1.35.0"), 1)
	f := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(f, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, "config", "validate", "-c", f, "-m", "testdata/imagemanifest.json")
	if err == nil || !strings.Contains(out, "newer than the control plane's 1.35.0") {
		t.Fatalf("want a skew error, got %v\n%s", err, out)
	}
}

func TestConfigRender(t *testing.T) {
	dir := t.TempDir()
	out, err := run(t, "config", "render", "-c", "testdata/nodeconfig.yaml", "-m", "testdata/imagemanifest.json",
		"--node-name", "win000000", "--node-ip", "10.127.132.213", "-o", dir)
	if err != nil {
		t.Fatalf("render: %v\n%s", err, out)
	}
	for _, f := range []string{
		"C/var/lib/kubelet/config.yaml", "C/var/lib/kube-proxy/config.yaml",
		"C/etc/cni/net.d/10-kubewin.conf", "services.txt",
	} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s was not written: %v", f, err)
		}
	}
	services, _ := os.ReadFile(filepath.Join(dir, "services.txt"))
	for _, want := range []string{"kubelet --windows-service --config=C:\\var\\lib\\kubelet\\config.yaml", "kube-proxy --windows-service"} {
		if !strings.Contains(string(services), want) {
			t.Errorf("services.txt lacks %q:\n%s", want, services)
		}
	}
	cniConf, _ := os.ReadFile(filepath.Join(dir, "C/etc/cni/net.d/10-kubewin.conf"))
	if !strings.Contains(string(cniConf), `"subnet": "10.10.187.64/26"`) {
		t.Errorf("CNI config does not use node.podCIDR:\n%s", cniConf)
	}
	for _, f := range []string{"C/var/lib/kubelet/config.yaml", "services.txt"} {
		b, _ := os.ReadFile(filepath.Join(dir, f))
		if bytes.Contains(b, []byte("0123456789abcdef")) {
			t.Errorf("%s contains the bootstrap token", f)
		}
	}
}
