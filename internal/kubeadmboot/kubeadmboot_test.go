package kubeadmboot

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubewin/kubewin/internal/acrcredential"
	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/testkit/testenv"
)

var (
	testCluster = Cluster{
		Name: "acs", KubernetesVersion: "v1.37.1", Endpoint: "20.1.2.3:6443",
		PodSubnet: "10.244.0.0/16", ServiceSubnet: "10.96.0.0/12", NodeCIDRMaskSize: 24,
		CertSANs: []string{"kubernetes-windows.westeurope.cloudapp.azure.com"},
	}
	testToken = "abcdef.0123456789abcdef"
	testKey   = strings.Repeat("0123456789abcdef", 4)
	testPin   = "sha256:" + strings.Repeat("ab", 32)
	machines  = map[Role]Machine{
		RoleInit:         {Role: RoleInit, AdvertiseAddress: "10.240.255.5", Token: testToken, TokenTTL: 2 * time.Hour, CertificateKey: testKey},
		RoleControlPlane: {Role: RoleControlPlane, AdvertiseAddress: "10.240.255.6", Token: testToken, CertificateKey: testKey, CAHash: testPin},
		RoleWorker:       {Role: RoleWorker, Token: testToken, CAHash: testPin},
	}
)

// internalCluster has an internal load balancer's frontend behind a name.
var internalCluster = func() Cluster {
	c := testCluster
	c.Endpoint, c.EndpointAddress = "apiserver.acs.kubewin.internal:6443", "10.240.255.4"
	c.CertSANs = []string{"apiserver.acs.kubewin.internal", "10.240.255.4"}
	return c
}()

// cloudCluster runs the external cloud provider.
var cloudCluster = func() Cluster {
	c := testCluster
	c.ExternalCloudProvider, c.CloudConfig = true, []byte(`{"cloud": "AzurePublicCloud"}`+"\n")
	return c
}()

// registryCluster's workers pull from Azure Container Registry as an identity.
var registryCluster = func() Cluster {
	c := cloudCluster
	c.Registry = &Registry{
		Credentials: v1alpha1.AzureContainerRegistry{Cloud: "AzurePublicCloud", TenantID: "99999999-0000-0000-0000-000000000000",
			IdentityClientID: "11111111-2222-3333-4444-555555555555"},
		ProviderURL: "https://github.com/kubernetes-sigs/cloud-provider-azure/releases/download/v1.35.5/azure-acr-credential-provider-linux-" +
			ArchPlaceholder,
	}
	return c
}()

// Every role's user data passes cloud-init's own schema check, its kubeadm configuration passes
// `kubeadm config validate` of the test environment's kubeadm, and its bootstrap script parses,
// with a public endpoint and an internal one, with the external cloud provider, and with pulls
// from Azure Container Registry by identity.
func TestUserDataValidates(t *testing.T) {
	for name, c := range map[string]Cluster{"public": testCluster, "internal": internalCluster, "cloud provider": cloudCluster,
		"registry": registryCluster} {
		t.Run(name, func(t *testing.T) { userDataValidates(t, c) })
	}
}

// With the external cloud provider every machine's kubelet runs with --cloud-provider=external
// (kubeadm's kubeletExtraArgs, which it writes to the kubelet's flags), and the control planes,
// not the workers, get the cloud provider's configuration, readable by root only; without it,
// neither.
func TestUserDataCloudProvider(t *testing.T) {
	join := machines[RoleControlPlane]
	for _, tc := range []struct {
		c     Cluster
		m     Machine
		flag  bool
		cloud bool
	}{
		{cloudCluster, machines[RoleInit], true, true},
		{cloudCluster, join, true, true},
		{cloudCluster, machines[RoleWorker], true, false},
		{testCluster, machines[RoleInit], false, false},
		{testCluster, machines[RoleWorker], false, false},
	} {
		ud, err := UserData(tc.c, tc.m)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := Parse(ud)
		if err != nil {
			t.Fatal(err)
		}
		cfg := doc.Files[ConfigPath].Content
		if got := strings.Contains(cfg, "kubeletExtraArgs:\n  - name: cloud-provider\n    value: external\n"); got != tc.flag {
			t.Errorf("%s, external %v: kubelet --cloud-provider=external %v:\n%s", tc.m.Role, tc.c.ExternalCloudProvider, got, cfg)
		}
		f, ok := doc.Files[CloudConfigPath]
		if ok != tc.cloud || (ok && (f.Content != string(tc.c.CloudConfig) || f.Permissions != "0600" || f.Owner != "root:root")) {
			t.Errorf("%s, external %v: %s written %v: %+v", tc.m.Role, tc.c.ExternalCloudProvider, CloudConfigPath, ok, f)
		}
	}
	half := testCluster
	half.ExternalCloudProvider = true
	if _, err := UserData(half, machines[RoleWorker]); err == nil {
		t.Error("an external cloud provider without its configuration was accepted")
	}
}

// With pulls from Azure Container Registry by identity, a worker's kubelet starts with the
// credential provider (kubeadm's kubeletExtraArgs), whose configuration the kubelet's own loader
// accepts with the provider in the bin dir the script downloads it to, and which passes the
// provider the Azure configuration naming the identity; the control planes get none of it.
func TestUserDataRegistry(t *testing.T) {
	for _, role := range []Role{RoleInit, RoleControlPlane, RoleWorker} {
		ud, err := UserData(registryCluster, machines[role])
		if err != nil {
			t.Fatal(err)
		}
		doc, err := Parse(ud)
		if err != nil {
			t.Fatal(err)
		}
		downloads, err := doc.Downloads()
		if err != nil {
			t.Fatal(err)
		}
		cfg := doc.Files[ConfigPath].Content
		flags := strings.Contains(cfg, "name: image-credential-provider-config\n    value: "+CredentialProviderConfigPath+"\n") &&
			strings.Contains(cfg, "name: image-credential-provider-bin-dir\n    value: "+CredentialProviderBinDir+"\n")
		_, hasConfig := doc.Files[CredentialProviderConfigPath]
		if worker := role == RoleWorker; flags != worker || hasConfig != worker || (len(downloads) == 1) != worker {
			t.Errorf("%s: credential provider flags %v, configuration %v, downloads %v:\n%s", role, flags, hasConfig, downloads, cfg)
			continue
		}
		if role != RoleWorker {
			continue
		}
		want := Download{URL: registryCluster.Registry.ProviderURL, Path: CredentialProviderBinDir + "/" + acrcredential.ProviderName}
		if downloads[0] != want {
			t.Errorf("downloads %+v, want %+v", downloads, want)
		}
		if !strings.Contains(doc.Files[ScriptPath].Content, DownloadsPath) {
			t.Errorf("the script does not read %s:\n%s", DownloadsPath, doc.Files[ScriptPath].Content)
		}
		conf := []byte(doc.Files[CredentialProviderConfigPath].Content)
		if err := testenv.KubeletLoadsCredentialProviders(t, conf, acrcredential.ProviderName); err != nil {
			t.Errorf("the kubelet refuses the credential provider configuration: %v\n%s", err, conf)
		}
		if !strings.Contains(string(conf), "- "+RegistryConfigPath+"\n") {
			t.Errorf("the provider is not given %s:\n%s", RegistryConfigPath, conf)
		}
		var azure map[string]any
		if err := json.Unmarshal([]byte(doc.Files[RegistryConfigPath].Content), &azure); err != nil ||
			azure["userAssignedIdentityID"] != registryCluster.Registry.Credentials.IdentityClientID || azure["useManagedIdentityExtension"] != true {
			t.Errorf("Azure configuration (%v):\n%s", err, doc.Files[RegistryConfigPath].Content)
		}
	}
	plain := registryCluster
	plain.Registry = &Registry{Credentials: registryCluster.Registry.Credentials, ProviderURL: "http://example.test/acr-credential-provider"}
	if _, err := UserData(plain, machines[RoleWorker]); err == nil || !strings.Contains(err.Error(), "not an HTTPS URL") {
		t.Errorf("a download over plain HTTP: %v", err)
	}
}

// The bootstrap script's download step, run with bash as written (curl and dpkg stand-ins on the
// PATH): a program the machine lacks is fetched from its URL for the machine's architecture and
// made executable; one it has is kept.
func TestScriptDownloads(t *testing.T) {
	ud, err := UserData(registryCluster, machines[RoleWorker])
	if err != nil {
		t.Fatal(err)
	}
	doc, err := Parse(ud)
	if err != nil {
		t.Fatal(err)
	}
	script := doc.Files[ScriptPath].Content
	start, end := strings.Index(script, "arch=$(dpkg"), strings.Index(script, "done <"+DownloadsPath)
	if start < 0 || end < start {
		t.Fatalf("the script has no download step:\n%s", script)
	}
	dir := t.TempDir()
	bin, list, program := filepath.Join(dir, "bin"), filepath.Join(dir, "downloads"), filepath.Join(dir, "root", "provider", "acr")
	calls := filepath.Join(dir, "curl-calls")
	for name, body := range map[string]string{
		"dpkg": "#!/bin/sh\necho arm64\n",
		// curl -fsSL --retry 5 -o FILE URL: writes the URL into FILE and counts its calls.
		"curl": "#!/bin/sh\nwhile [ $# -gt 2 ]; do shift; done\necho \"$2\" >\"$1\"\necho x >>" + calls + "\n",
	} {
		if err := os.MkdirAll(bin, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(list, []byte(strings.Replace(doc.Files[DownloadsPath].Content,
		CredentialProviderBinDir+"/"+acrcredential.ProviderName, program, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	step := "set -euo pipefail\n" + script[start:end] + "done <" + list + "\n"
	for range 2 { // the second run finds the program
		cmd := exec.Command("bash", "-c", step)
		cmd.Env = append(os.Environ(), "PATH="+bin+":/usr/bin:/bin")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("the download step: %v\n%s\n%s", err, out, step)
		}
	}
	got, err := os.ReadFile(program)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.ReplaceAll(registryCluster.Registry.ProviderURL, ArchPlaceholder, "arm64")
	if info, _ := os.Stat(program); strings.TrimSpace(string(got)) != want || info.Mode().Perm()&0o100 == 0 {
		t.Errorf("the program holds %q (mode %v), want the download of %s, executable", got, info.Mode(), want)
	}
	if n, _ := os.ReadFile(calls); strings.Count(string(n), "x") != 1 {
		t.Errorf("curl ran %d times for one program over two boots, want 1", strings.Count(string(n), "x"))
	}
}

// Behind an internal load balancer every machine maps the endpoint's name in /etc/hosts at every
// boot: the first control plane to itself, a joining one to the control plane it joins through
// until it has joined (then to itself, which its bootstrap script sets once kubeadm is done), a
// worker to the frontend.
func TestInternalEndpointHosts(t *testing.T) {
	join := machines[RoleControlPlane]
	join.JoinAddress = "10.240.255.5"
	for _, tc := range []struct {
		m            Machine
		joined, want string
	}{
		{machines[RoleInit], "", "127.0.0.1"},
		{join, "", "10.240.255.5"},
		{join, "joined", "127.0.0.1"},
		{machines[RoleWorker], "", "10.240.255.4"},
	} {
		ud, err := UserData(internalCluster, tc.m)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := Parse(ud)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		hosts := filepath.Join(dir, "hosts")
		if err := os.WriteFile(hosts, []byte("127.0.0.1 localhost\n10.9.9.9 apiserver.acs.kubewin.internal\n10.9.9.9 apiserverxacs.kubewin.internal\n"),
			0o600); err != nil {
			t.Fatal(err)
		}
		if tc.joined != "" {
			if err := os.WriteFile(filepath.Join(dir, "admin.conf"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		for _, cmd := range doc.BootCmd {
			cmd = strings.NewReplacer("/etc/hosts", hosts, AdminKubeconfig, filepath.Join(dir, "admin.conf")).Replace(cmd)
			if out, err := exec.Command("sh", "-c", cmd).CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", cmd, err, out)
			}
		}
		got, err := os.ReadFile(hosts)
		if err != nil {
			t.Fatal(err)
		}
		if want := "127.0.0.1 localhost\n10.9.9.9 apiserverxacs.kubewin.internal\n" + tc.want + " apiserver.acs.kubewin.internal\n"; string(got) != want {
			t.Errorf("%s %s: /etc/hosts after bootcmd:\n%s\nwant\n%s", tc.m.Role, tc.joined, got, want)
		}
		own := strings.Contains(doc.Files[ScriptPath].Content, HostsCommand("apiserver.acs.kubewin.internal", "127.0.0.1"))
		if own != (tc.m.Role == RoleControlPlane) {
			t.Errorf("%s: the script maps the name to the machine itself after kubeadm: %v", tc.m.Role, own)
		}
	}
	if _, err := UserData(internalCluster, machines[RoleControlPlane]); err == nil {
		t.Error("a joining control plane without a join address was accepted")
	}
	noAddress := internalCluster
	noAddress.EndpointAddress = ""
	if _, err := UserData(noAddress, machines[RoleWorker]); err == nil {
		t.Error("an endpoint name without its address was accepted")
	}
}

func userDataValidates(t *testing.T, c Cluster) {
	t.Helper()
	cloudInit, err := exec.LookPath("cloud-init")
	if err != nil {
		t.Fatal("cloud-init is missing: `make testenv` installs Debian's cloud-init package (as root)")
	}
	kubeadm := testenv.MustBinary(t, "kubeadm")
	for role, m := range machines {
		if c.EndpointAddress != "" {
			m.JoinAddress = "10.240.255.5"
		}
		t.Run(string(role), func(t *testing.T) {
			dir := t.TempDir()
			ud, err := UserData(c, m)
			if err != nil {
				t.Fatal(err)
			}
			f := filepath.Join(dir, "user-data")
			if err := os.WriteFile(f, ud, 0o600); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(cloudInit, "schema", "--config-file", f).CombinedOutput(); err != nil || !strings.Contains(string(out),
				"Valid cloud-config") {
				t.Fatalf("cloud-init schema: %v\n%s\n%s", err, out, ud)
			}
			doc, err := Parse(ud)
			if err != nil {
				t.Fatal(err)
			}
			if doc.Role != role {
				t.Errorf("parsed role %q, want %q", doc.Role, role)
			}
			cfg := filepath.Join(dir, "kubeadm.yaml")
			if err := os.WriteFile(cfg, []byte(doc.Files[ConfigPath].Content), 0o600); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(kubeadm, "config", "validate", "--config", cfg).CombinedOutput(); err != nil {
				t.Fatalf("kubeadm config validate: %v\n%s\n%s", err, out, doc.Files[ConfigPath].Content)
			}
			sh := filepath.Join(dir, "bootstrap.sh")
			if err := os.WriteFile(sh, []byte(doc.Files[ScriptPath].Content), 0o700); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command("bash", "-n", sh).CombinedOutput(); err != nil {
				t.Fatalf("bash -n: %v\n%s", err, out)
			}
			for _, want := range []string{"kubelet=1.37.1-*", "pkgs.k8s.io/core:/stable:/v1.37/deb/", string(role)} {
				if !strings.Contains(doc.Files[ScriptPath].Content, want) {
					t.Errorf("the script lacks %q", want)
				}
			}
		})
	}
}

// The first control plane's configuration carries the cluster settings, which read back.
func TestClusterOf(t *testing.T) {
	cfg, err := KubeadmConfig(testCluster, machines[RoleInit])
	if err != nil {
		t.Fatal(err)
	}
	got, err := ClusterOf(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got.Endpoint != testCluster.Endpoint || got.PodSubnet != testCluster.PodSubnet || got.NodeCIDRMaskSize != 24 ||
		got.KubernetesVersion != "v1.37.1" {
		t.Errorf("ClusterOf = %+v, want %+v", got, testCluster)
	}
	for _, want := range []string{"certificateKey: " + testKey, "token: " + testToken, "encryptionAlgorithm: ECDSA-P256",
		"controlPlaneEndpoint: 20.1.2.3:6443"} {
		if !bytes.Contains(cfg, []byte(want)) {
			t.Errorf("the init configuration lacks %q:\n%s", want, cfg)
		}
	}
}

func TestCheck(t *testing.T) {
	for name, m := range map[string]Machine{
		"no token":           {Role: RoleWorker, CAHash: testPin},
		"worker without pin": {Role: RoleWorker, Token: testToken},
		"init without key":   {Role: RoleInit, Token: testToken, AdvertiseAddress: "10.0.0.4"},
		"join without key":   {Role: RoleControlPlane, Token: testToken, AdvertiseAddress: "10.0.0.5", CAHash: testPin},
		"unknown role":       {Role: "etcd", Token: testToken},
	} {
		if _, err := UserData(testCluster, m); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	bad := testCluster
	bad.KubernetesVersion = "1.37"
	if _, err := UserData(bad, machines[RoleWorker]); err == nil {
		t.Error("a version without patch was accepted")
	}
}

func TestParseRejects(t *testing.T) {
	for name, ud := range map[string]string{
		"not cloud-config": "#!/bin/sh\necho hi\n",
		"no bootstrap":     "#cloud-config\nruncmd: [[echo, hi]]\n",
		"unknown key":      "#cloud-config\npackages: [curl]\n",
	} {
		if _, err := Parse([]byte(ud)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

func TestReadSerial(t *testing.T) {
	ca := []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	log := []byte("[    0.0] Linux version\r\n" + SerialPrefix + "start role=init\n cloud-init[900]: " + ReadyLine(RoleInit, ca) + "\r\n")
	b := ReadSerial(log)
	if !b.Ready || !bytes.Equal(b.CACert, ca) {
		t.Errorf("ReadSerial = %+v", b)
	}
	b = ReadSerial(append(log, []byte(FailedLine(RoleInit, "kubeadm", 1)+"\n")...))
	if b.Ready || !b.Failed || b.Phase != "kubeadm" || b.Exit != "1" {
		t.Errorf("after a failure: %+v", b)
	}
	if b := ReadSerial([]byte("nothing yet\n")); b.Started {
		t.Errorf("an empty console started: %+v", b)
	}
}

// The admin certificate script is valid shell naming the request once, and its output parses.
func TestAdminCertificateScript(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "kubewin",
		Organization: []string{"kubeadm:cluster-admins"}}}, key)
	if err != nil {
		t.Fatal(err)
	}
	csr := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
	s, err := AdminCertificateScript("kubewin-admin-x1", csr, 3600)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("sh", "-n", "-c", s).CombinedOutput(); err != nil {
		t.Fatalf("sh -n: %v\n%s\n%s", err, out, s)
	}
	if _, err := AdminCertificateScript("Bad Name", csr, 3600); err == nil {
		t.Error("a bad name was accepted")
	}
	ca := "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
	cert, gotCA, err := ParseAdminCertificate("Enable succeeded: \n[stdout]\n" + strings.Replace(ca, "AAAA", "BBBB", 1) + ca + "\n[stderr]\n")
	if err != nil || !strings.Contains(string(cert), "BBBB") || string(gotCA) != ca {
		t.Errorf("ParseAdminCertificate = %q, %q, %v", cert, gotCA, err)
	}
	if _, _, err := ParseAdminCertificate("[stderr] denied"); err == nil {
		t.Error("an answer without certificates parsed")
	}
}
