package provider

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kubewin/kubewin/internal/api"
	"github.com/kubewin/kubewin/internal/kubeadmboot"
)

// azureClusterCLI prepares a configuration with an azure cluster and a Windows pool joining it,
// for the CLI in a separate process.
func azureClusterCLI(t testing.TB, g *clusterGroup, provider, poolExtra string) *cli {
	t.Helper()
	c := newCLI(t, t.TempDir(), provider+fmt.Sprintf(`
variable "linux_nodes" {
  type    = number
  default = 1
}

variable "windows_nodes" {
  type    = number
  default = 1
}

resource "kubewin_cluster" "acs" {
  name               = "secrets"
  kubernetes_version = %q
  azure {
    resource_group_name = %q
    location            = %q
    linux_pool          = { node_count = var.linux_nodes }
  }
}

resource "kubewin_windows_node_pool" "win" {
  name       = "win"
  cluster_id = kubewin_cluster.acs.id
  node_count = var.windows_nodes
  azure {
    resource_group_name = %[2]q
    location            = %[3]q
    vm_size             = "Standard_D4s_v5"
    subnet_id           = kubewin_cluster.acs.azure.agent_subnet_id
    image_id            = %[4]q
%[5]s
  }
}
`, clusterVersion(t), g.name, armServer.Location(), g.image, poolExtra))
	c.env = append(c.env, armServer.Env()...)
	return c
}

// clusterSecrets are the secrets ARM received in the cluster's custom data — the bootstrap
// tokens and certificate keys of the control planes and Linux agents, the Windows pools' tokens —
// and the CA private keys the simulated control planes hold, by what they are.
func clusterSecrets(t *testing.T, group string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for i, r := range armServer.Requests() {
		if !strings.Contains(r.Path, "/"+group+"/") || (r.Method != "PUT" && r.Method != "PATCH") {
			continue
		}
		var body struct {
			Properties struct {
				OSProfile struct {
					CustomData string `json:"customData"`
				} `json:"osProfile"`
				VirtualMachineProfile struct {
					OSProfile struct {
						CustomData string `json:"customData"`
					} `json:"osProfile"`
				} `json:"virtualMachineProfile"`
			} `json:"properties"`
		}
		if json.Unmarshal(r.Body, &body) != nil {
			continue
		}
		for _, cd := range []string{body.Properties.OSProfile.CustomData, body.Properties.VirtualMachineProfile.OSProfile.CustomData} {
			raw, _ := base64.StdEncoding.DecodeString(cd)
			if len(raw) == 0 {
				continue
			}
			if doc, err := kubeadmboot.Parse(raw); err == nil {
				cfg := doc.Files[kubeadmboot.ConfigPath].Content
				for _, m := range regexp.MustCompile(`(?m)(token|certificateKey): ([0-9a-z.]+)$`).FindAllStringSubmatch(cfg, -1) {
					secret := m[2]
					if m[1] == "token" {
						_, secret, _ = strings.Cut(secret, ".")
					}
					out[fmt.Sprintf("%s of a %s in %s (%s #%d)", m[1], doc.Role, lastPathSegments(r.Path), r.Method, i)] = secret
				}
			} else if cfg, err := api.DecodeNodeConfig(raw); err == nil {
				_, secret, _ := strings.Cut(cfg.Cluster.BootstrapToken, ".")
				out[fmt.Sprintf("Windows bootstrap token in %s (%s #%d)", lastPathSegments(r.Path), r.Method, i)] = secret
			}
		}
	}
	_ = filepath.WalkDir(armBooter.Dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, "/root/etc/kubernetes/pki/ca.key") {
			key, _ := os.ReadFile(p)
			// The key's base64 body, as any encoding of it would show.
			body := strings.Join(strings.Split(strings.TrimSpace(string(key)), "\n")[1:2], "")
			out["CA private key of "+p] = body
		}
		return nil
	})
	return out
}

func lastPathSegments(p string) string {
	parts := strings.Split(p, "/")
	return strings.Join(parts[max(0, len(parts)-2):], "/")
}

// No secret of an azure cluster reaches the state, a saved plan or the TF_LOG=TRACE output: not
// the ARM client secret, not the Windows administrator password (write-only), not the bootstrap
// tokens and certificate keys the machines join with, not the cluster CA's private key.
func TestAccAzureClusterNoSecrets(t *testing.T) {
	t.Parallel()
	acceptance(t)
	state, provider := testAccLocal(t)
	g := newClusterGroup(t, state)
	const password = "Kw-Clu5ter-Passw0rd-Not-For-Logs!"
	c := azureClusterCLI(t, g, provider+`
variable "admin_password" {
  type      = string
  sensitive = true
  ephemeral = true
}
`, "    admin_password_wo = var.admin_password")
	c.env = append(c.env, "TF_VAR_admin_password="+password)
	t.Cleanup(func() { _, _, _ = c.try("destroy", "-auto-approve", "-input=false") })
	scan := runForSecretScan(t, c, [][]string{
		{"plan", "-input=false", "-out=plan.out"},
		{"apply", "-input=false", "plan.out"},
		{"plan", "-input=false", "-out=plan2.out", "-var", "linux_nodes=2", "-var", "windows_nodes=2"},
		{"apply", "-input=false", "plan2.out"},
	})
	secrets := clusterSecrets(t, g.name)
	kinds := map[string]int{}
	for what := range secrets {
		kinds[strings.Fields(what)[0]]++
	}
	// The first control plane's token and certificate key, the agents' scale-out token, the
	// Windows pool's two tokens, the CA key: each must have been seen, or the scan proves nothing.
	if kinds["token"] < 3 || kinds["certificateKey"] < 1 || kinds["Windows"] < 2 || kinds["CA"] < 1 {
		keys := make([]string, 0, len(secrets))
		for k := range secrets {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		t.Fatalf("the secrets found are %v: the scan below would prove little", keys)
	}
	secrets["ARM client secret"] = armServer.Credentials().ClientSecret
	secrets["Windows administrator password"] = password
	for what, secret := range secrets {
		if len(secret) < 8 {
			t.Fatalf("%s is %q: too short to scan for", what, secret)
		}
	}
	scan.check(t, secrets)
	// The Windows machines reached the API server's frontend through their virtual network,
	// which carried the connections (the agents' subnet has the cluster's NAT gateway).
	carried := 0
	for _, conn := range armBooter.Connections() {
		if conn.To.Port() == 6443 && conn.Err == "" {
			carried++
		}
	}
	if carried == 0 {
		t.Errorf("no Windows machine's connection to the API server crossed its network: %+v", armBooter.Connections())
	}
}

// BenchmarkAzureClusterApply measures terraform apply and destroy of an azure cluster of 3
// control planes and 2 Linux agents through the ARM test server, and counts the ARM writes
// each costs, by resource type.
func BenchmarkAzureClusterApply(b *testing.B) {
	state, provider := testAccLocal(b)
	g := newClusterGroup(b, state)
	c := newCLI(b, b.TempDir(), provider+fmt.Sprintf(`
resource "kubewin_cluster" "bench" {
  name               = "bench"
  kubernetes_version = %q
  azure {
    resource_group_name = %q
    location            = %q
    masters             = { count = 3 }
    linux_pool          = { node_count = 2 }
  }
}
`, clusterVersion(b), g.name, armServer.Location()))
	c.env = append(c.env, armServer.Env()...)
	var apply, destroy time.Duration
	writes := map[string]int{}
	count := func(sign int) {
		for typ, n := range armServer.Writes().ByType {
			writes[typ] += sign * n
		}
	}
	var destroyWrites int
	for range b.N {
		count(-1)
		apply += c.run(b, "apply", "-auto-approve", "-input=false")
		count(1)
		before := armServer.Writes().Total
		b.StopTimer()
		destroy += c.run(b, "destroy", "-auto-approve", "-input=false")
		destroyWrites += armServer.Writes().Total - before
		b.StartTimer()
	}
	total := 0
	for typ, n := range writes {
		total += n
		b.ReportMetric(float64(n)/float64(b.N), "writes-"+strings.ReplaceAll(typ, "/", ".")+"/apply")
	}
	b.ReportMetric((apply / time.Duration(b.N)).Seconds(), "s/apply")
	b.ReportMetric(float64(total)/float64(b.N), "arm-writes/apply")
	b.ReportMetric((destroy / time.Duration(b.N)).Seconds(), "s/destroy")
	b.ReportMetric(float64(destroyWrites)/float64(b.N), "arm-writes/destroy")
}
