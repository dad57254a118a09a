package cmd

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubewin/kubewin/internal/api"
	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/nodecmd"
	"github.com/kubewin/kubewin/internal/nodestatus"
	"github.com/kubewin/kubewin/internal/sim/simmachine"
	"github.com/kubewin/kubewin/nodeboot/internal/diagnose"
	"github.com/kubewin/kubewin/nodeboot/internal/platform"
	"github.com/kubewin/kubewin/nodeboot/internal/platform/sim"
)

// nodeboot diagnose on a simulated machine, before its join (the NodeConfig still holds the
// bootstrap token) and after it (the kubelet has its key): the bundle holds every file the
// documentation lists, HNS's network, the services, the routes and the Service Control
// Manager's entries, and no file of it holds the token, a private key the node has or the test
// planted (in the clear, in base64, in a log, an event or a registry password).
func TestDiagnose(t *testing.T) {
	const name = "windiag00001"
	root := machine(t, "diagpool", name)
	paths := nodecmd.DefaultPaths()
	raw, err := os.ReadFile(simmachine.Path(root, paths.CustomData))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := api.DecodeNodeConfig(raw)
	if err != nil || nc.Cluster.BootstrapToken == "" {
		t.Fatalf("the machine's NodeConfig has no token (%v)", err)
	}
	nc.Default()
	token := nc.Cluster.BootstrapToken

	// Secrets where a careless component would leave them.
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	plantedPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	const password = "Pl4nted-Registry-Passw0rd"
	plant := map[string]string{
		paths.LogDir + `\kubelet.log`:    "I1126 kubelet starting\nbootstrap token " + token + "\n" + string(plantedPEM) + "I1126 done\n",
		paths.LogDir + `\kube-proxy.log`: "client-key-data: " + base64.StdEncoding.EncodeToString(plantedPEM) + "\n",
		paths.ContainerdLog():            "time=now level=info msg=\"containerd started\"\n",
		paths.ContainerdConfigFile: "version = 3\n[plugins.'io.containerd.cri.v1.images'.registry.configs.'registry.example'.auth]\n" +
			"  username = \"puller\"\n  password = \"" + password + "\"\n  auth = \"" + base64.StdEncoding.EncodeToString([]byte("puller:"+password)) + "\"\n",
	}
	for win, content := range plant {
		if err := os.MkdirAll(filepath.Dir(simmachine.Path(root, win)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(simmachine.Path(root, win), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	m, err := sim.Load(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Windows().LogEvent(platform.Event{Log: "Application", Source: "Windows Error Reporting", ID: 1001, Level: "Information",
		Message: "Faulting application kubelet.exe; command line --token=" + token}); err != nil {
		t.Fatal(err)
	}
	secrets := []string{token, strings.Split(token, ".")[1], password, base64.StdEncoding.EncodeToString([]byte("puller:" + password)),
		base64.StdEncoding.EncodeToString(plantedPEM)[30:90]}
	secrets = append(secrets, pemBody(t, plantedPEM)...)

	// Before the join, into the default file.
	out := nb(t, root, "diagnose")
	if !strings.Contains(out, "nodeboot diagnostics of node "+name) || !strings.Contains(out, nodestatus.BundleLinePrefix+paths.DiagnosticsBundle()) {
		t.Errorf("diagnose printed:\n%s", out)
	}
	file := simmachine.Path(root, paths.DiagnosticsBundle())
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v (%v), want an owner-only file", file, fi, err)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	b := readBundle(t, data)
	scanBundle(t, b, secrets)
	if c, err := api.DecodeNodeConfig(b.Files[diagnose.FileNodeConfig]); err != nil || c.Cluster.BootstrapToken != v1alpha1.Redaction {
		t.Errorf("the NodeConfig in the bundle (%v):\n%s", err, b.Files[diagnose.FileNodeConfig])
	}

	// After the join, to standard output.
	nb(t, root, "join")
	pemFile, err := os.ReadFile(simmachine.Path(root, paths.KubeletCertDir+`\kubelet-client-current.pem`))
	if err != nil {
		t.Fatal(err)
	}
	secrets = append(secrets, pemBody(t, pemFile)...)
	cmd := exec.Command(nodeboot, "--platform", "sim", "--root", root, "diagnose", "--output", "-")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	data, err = cmd.Output()
	if err != nil {
		t.Fatalf("diagnose --output -: %v\n%s", err, stderr.String())
	}
	b = readBundle(t, data)
	scanBundle(t, b, secrets)
	summary, r, where := nodestatus.ParseDiagnosis(stderr.String())
	if summary != b.Summary || r == nil || r.State != nodestatus.StateDone || where != "" {
		t.Errorf("standard error:\n%s\nthe bundle's summary:\n%s", stderr.String(), b.Summary)
	}
	for _, c := range diagnose.Contents {
		if c.File == diagnose.FileHealth { // written by nodeboot run, which has not run
			continue
		}
		if len(b.Files[c.File]) == 0 {
			t.Errorf("the bundle has no %s (%s); summary:\n%s", c.File, c.Holds, b.Summary)
		}
	}
	var report nodestatus.Report
	if err := json.Unmarshal(b.Files[diagnose.FileReport], &report); err != nil || report.State != nodestatus.StateDone || report.Node != name {
		t.Errorf("report %+v (%v)", report, err)
	}
	for file, want := range map[string]string{
		diagnose.FileSummary:     "join: Done",
		diagnose.FileHNSNetworks: `"Name": "` + nc.Network.Name,
		diagnose.FileServices:    `"name": "kubelet"`,
		diagnose.FileRoutes:      `"destination": "0.0.0.0/0"`,
		diagnose.FileEvents:      `"source": "Service Control Manager"`,
		diagnose.FileKubeconfig:  `client-key: C:\var\lib\kubelet\pki\kubelet-client-current.pem`,
		diagnose.FileContainerd:  `password = "<redacted>"`,
		diagnose.FileNodebootLog: "[tls-bootstrap] done",
	} {
		if !strings.Contains(string(b.Files[file]), want) {
			t.Errorf("%s lacks %q:\n%s", file, want, b.Files[file])
		}
	}
}

// pemBody returns the base64 lines of a PEM file's private key blocks.
func pemBody(t *testing.T, data []byte) []string {
	t.Helper()
	var lines []string
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if strings.Contains(block.Type, "PRIVATE KEY") {
			enc := base64.StdEncoding.EncodeToString(block.Bytes)
			for len(enc) > 0 {
				n := min(64, len(enc))
				lines = append(lines, enc[:n])
				enc = enc[n:]
			}
		}
	}
	if len(lines) == 0 {
		t.Fatal("no private key in the PEM data")
	}
	return lines
}

func readBundle(t *testing.T, data []byte) *diagnose.Bundle {
	t.Helper()
	b, err := diagnose.Read(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Names) == 0 || b.Names[0] != diagnose.FileSummary {
		t.Errorf("the bundle's files: %v, want %s first", b.Names, diagnose.FileSummary)
	}
	return b
}

// scanBundle fails for every file of the bundle that holds one of secrets or a private key.
func scanBundle(t *testing.T, b *diagnose.Bundle, secrets []string) {
	t.Helper()
	for _, name := range b.Names {
		data := string(b.Files[name])
		for _, s := range secrets {
			if len(s) >= 8 && strings.Contains(data, s) {
				t.Errorf("%s holds the secret %q", name, s)
			}
		}
		if strings.Contains(strings.ReplaceAll(data, "<redacted private key>", ""), "PRIVATE KEY") {
			t.Errorf("%s holds a private key:\n%s", name, data)
		}
	}
}
