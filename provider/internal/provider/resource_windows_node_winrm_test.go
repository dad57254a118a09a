package provider

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/config"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/kubewin/kubewin/internal/api"
	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/guest"
	"github.com/kubewin/kubewin/internal/nodestatus"
	"github.com/kubewin/kubewin/internal/testkit/serverstest"
	"github.com/kubewin/kubewin/provider/internal/pool"
)

const (
	winrmUser     = "Administrator"
	winrmPassword = "Tr0ub4dor&3-winrm"
)

// winrmNodeConfig is a node reached over WinRM (HTTPS, the test server's CA, Basic) with the
// password in its write-only attribute, from the ephemeral variable password (passwordVar);
// body adds attributes and blocks. A password written in the configuration would be in the
// test framework's log of it.
func winrmNodeConfig(srv *serverstest.WinRM, body string) string {
	return fmt.Sprintf(`
variable "password" {
  type      = string
  sensitive = true
  ephemeral = true
}

resource "kubewin_windows_node" "srv" {
  host = %q
%s
  winrm {
    port           = %d
    user           = %q
    password_wo    = var.password
    auth           = "basic"
    ca_certificate = %q
  }
}
`, srv.Host, body, srv.Port, winrmUser, srv.CA)
}

func passwordVar(password string) config.Variables {
	return config.Variables{"password": config.StringVariable(password)}
}

// server is a Windows Server 2022 machine with the Containers feature behind the WinRM test
// server.
func winrmServer(t *testing.T) (*serverstest.WinRM, *serverstest.Machine) {
	srv := serverstest.NewWinRM(t, winrmUser, winrmPassword)
	m := &serverstest.Machine{Facts: guest.Facts{ComputerName: "WINSRV02", Build: uint32(v1alpha1.WindowsServer2022), ContainersFeature: true}}
	srv.Answer = m.Answer
	return srv, m
}

// scripts are the commands the server received from the i-th on, one a line.
func scripts(srv *serverstest.WinRM, from int) []string {
	var out []string
	for _, c := range srv.Commands()[from:] {
		out = append(out, c.Script)
	}
	return out
}

// matchSequence checks that each command matches its pattern, in order.
func matchSequence(got []string, want []string) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d commands, want %d:\n%s", len(got), len(want), strings.Join(got, "\n----\n"))
	}
	for i, w := range want {
		if !regexp.MustCompile(w).MatchString(got[i]) {
			return fmt.Errorf("command %d does not match %s:\n%s", i, w, got[i])
		}
	}
	return nil
}

// TestAccWindowsNode_winrm drives the resource over WinRM with masterzen/winrm, against the
// test server (winrmtest behind an HTTPS proxy that enforces Basic authentication). Its limits:
// no standard error (winrmtest drops it, so failures are checked through standard output), no
// NTLM (Basic only; auth = "ntlm" is not exercised), no streaming, and no PowerShell — the
// scripts are recorded and answered by serverstest.Machine, not run. It plays a clean Windows
// Server 2022 and registers
// the node in the real local cluster when nodeboot join runs: a failing bake's exit code and
// output, then a failed join's phase, code and output reach the diagnostics; then the join
// succeeds with the expected commands, in order, the NodeConfig arriving on standard input;
// destroy resets the server. Neither the password nor the token is ever on a command line, and
// the password is in no log of the provider or of Terraform, at TRACE.
func TestAccWindowsNode_winrm(t *testing.T) {
	state, provider := testAccLocal(t)
	b := testBackend(t, state)
	version, err := b.ControlPlaneVersion()
	if err != nil {
		t.Fatal(err)
	}
	logFile := filepath.Join(t.TempDir(), "terraform.log")
	t.Setenv("TF_LOG", "TRACE")
	t.Setenv("TF_ACC_LOG_PATH", logFile)
	t.Setenv(defaultPasswordEnv, winrmPassword) // for the destroys
	srv, m := winrmServer(t)
	client := adminClient(t, b, "winrmtest")
	plan := strings.ReplaceAll(testRelease(t, version), `"source": "http://127.0.0.1`, `"source": "http://upstream.test`)
	config := provider + `
resource "kubewin_cluster" "test" {
  name = "winrmtest"
  local {}
}
` + winrmNodeConfig(srv, fmt.Sprintf(`  cluster_id = kubewin_cluster.test.id
  timeouts   = { create = "2m", delete = "2m" }
  system_reserved_memory = "3Gi"
  install {
    release = %q
    mirror  = "http://mirror.test/kubewin"
  }`, plan))
	var start, created int
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			return matchSequence(scripts(srv, created), []string{
				`ConvertTo-Json -Compress`, `Stop-Service -Name nodeboot`, `\\nodeboot\.exe' 'reset'`,
				`(?s)foreach \(\$name in @\('nodeboot','containerd'\)\).*netsh advfirewall firewall delete rule`,
				`(?s)ReadAllLines\('C:\\ProgramData\\kubewin\\pre-join\.txt'\).*Remove-Item`,
			})
		},
		Steps: []resource.TestStep{
			{
				PreConfig: func() {
					m.Fail = map[string]serverstest.Failure{"' bake --manifest ": {Exit: 5,
						Output: "[bake] payload file k/kubelet.exe from http://mirror.test/kubewin/k/kubelet.exe has sha256 0bad, the manifest says 1f00\r\n"}}
				},
				Config: config, ConfigVariables: passwordVar(winrmPassword),
				ExpectError: wrapped(`(?s)Command Failed on the Server.*nodeboot bake failed on the guest with exit status\s+5.*` +
					`k/kubelet.exe from\s+http://mirror.test/kubewin/k/kubelet.exe has sha256 0bad`),
			},
			{
				PreConfig: func() {
					m.Fail = nil
					m.Join = func() (string, int) {
						return "[preflight] done in 3ms\r\n[discovery] finding the cluster and pinning its CA\r\n[discovery] failed after 2ms: CAPinMismatch: " +
							"the cluster's CA is not the pinned one\r\n", 1
					}
					m.Report = &nodestatus.Report{Node: "winsrv02", State: nodestatus.StateFailed, Phase: "discovery", Code: nodestatus.CodeCAPinMismatch,
						Message: "the cluster's CA is not the pinned one"}
					m.Summary, m.Bundle = "nodeboot diagnostics of node winsrv02\njoin: failed in discovery\n", []byte("the bundle of winsrv02")
				},
				Config: config, ConfigVariables: passwordVar(winrmPassword),
				ExpectError: wrapped(`(?s)Node Failed to Join.*node winsrv02 failed in phase discovery with code\s+CAPinMismatch.*` +
					`Last lines of the node's log:.*\[discovery\] failed after 2ms.*Diagnostics of winsrv02 \(nodeboot diagnose\):\s+` +
					`nodeboot diagnostics of node winsrv02\s+join: failed in discovery.*The full diagnostics bundle was saved to\s+` +
					`\S+/kubewin/diagnostics/winsrv02-\S+\.tar\.gz`),
			},
			{
				PreConfig: func() {
					checkSavedBundle(t, "winsrv02", func(got []byte) error {
						if !bytes.Equal(got, m.Bundle) {
							return fmt.Errorf("saved %q, want %q", got, m.Bundle)
						}
						return nil
					})
					m.Report, m.Summary = nil, ""
					m.Join = func() (string, int) {
						readyNode(t, client(), "winsrv02")
						return "[preflight] done in 3ms\r\n[services] done in 1s\r\n", 0
					}
					start = len(srv.Commands())
				},
				Config: config, ConfigVariables: passwordVar(winrmPassword),
				ConfigStateChecks: []statecheck.StateCheck{checkFunc(func() error {
					got := scripts(srv, start)
					// The tainted node of the failed join goes first.
					if len(got) < 5 {
						return fmt.Errorf("%d commands", len(got))
					}
					got = got[5:]
					err := matchSequence(got, []string{
						`ConvertTo-Json -Compress`,
						`(?s)\$list = 'C:\\ProgramData\\kubewin\\pre-join\.txt'.*entries recorded`,
						`(?s)\$dst = 'C:\\k\\nodeboot\.exe'; \$want = '[0-9a-f]{64}'; ` +
							`\$url = 'http://mirror\.test/kubewin/k/nodeboot\.exe'.*Invoke-WebRequest -UseBasicParsing -Uri \$url `,
						`New-Item -ItemType Directory -Force -Path 'C:\\ProgramData\\kubewin\\bake'`,
						`(?s)\$dst = 'C:\\ProgramData\\kubewin\\bake\\plan\.json'.*FromBase64String`,
						`& 'C:\\k\\nodeboot\.exe' bake --manifest 'C:\\ProgramData\\kubewin\\bake\\plan\.json' ` +
							`--parallel 4 --mirror 'http://mirror\.test/kubewin' --pull-pause 'ProgramData/kubewin/images/pause\.tar'`,
						`ReadAllBytes\('C:\\ProgramData\\kubewin\\image-manifest\.json'\)`,
						`(?s)\$dst = 'C:\\AzureData\\CustomData\.bin'.*SetAccessRuleProtection.*FromBase64String`,
						`Stop-Service -Name nodeboot`,
						`& 'C:\\k\\nodeboot\.exe' 'join'`,
						`Start-Service -Name nodeboot`,
					})
					if err != nil {
						return err
					}
					created = len(srv.Commands())
					raw, _ := m.File(`C:\AzureData\CustomData.bin`)
					cfg, err := api.DecodeNodeConfig(raw)
					if err != nil {
						return fmt.Errorf("the NodeConfig the server received: %v", err)
					}
					if cfg.Node.Name != "winsrv02" || cfg.Cluster.BootstrapToken == "" || cfg.Runtime.Name != v1alpha1.RuntimeContainerd ||
						cfg.Kubelet.SystemReservedMemory != "3Gi" || cfg.Kubelet.KubeReservedMemory != "" {
						return fmt.Errorf("NodeConfig %+v", cfg)
					}
					for _, c := range srv.Commands() {
						if strings.Contains(c.Script, cfg.Cluster.BootstrapToken) || strings.Contains(c.Script, winrmPassword) {
							return fmt.Errorf("a command line carries the token or the password:\n%s", c.Script)
						}
					}
					return nil
				})},
			},
		},
	})
	logs, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{winrmPassword, base64.StdEncoding.EncodeToString([]byte(winrmUser + ":" + winrmPassword))} {
		for _, line := range strings.Split(string(logs), "\n") {
			if strings.Contains(line, secret) {
				t.Errorf("the password is in a log line: %.400s", strings.ReplaceAll(line, secret, "<password>"))
			}
		}
	}
	// The join's phases are in the provider's log.
	if !strings.Contains(string(logs), "[services] done in 1s") {
		t.Errorf("the join's [phase] lines are not in the provider's log")
	}
	if srv.Refused() != 0 {
		t.Errorf("%d requests were refused", srv.Refused())
	}
}

// wrapped matches a pattern in a diagnostic, whose lines Terraform wraps: a space matches any
// white space.
func wrapped(pattern string) *regexp.Regexp {
	return regexp.MustCompile(strings.ReplaceAll(pattern, " ", `\s+`))
}

// checkSavedBundle checks that a failed join saved node's diagnostics bundle in a file only its
// owner may read, in a directory only its owner may open, and that check accepts the newest one;
// it removes the node's saved bundles.
func checkSavedBundle(t *testing.T, node string, check func([]byte) error) {
	t.Helper()
	dir, err := pool.DiagnosticsDir()
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("%s: %v (%v), want a 0700 directory", dir, fi, err)
	}
	saved, err := filepath.Glob(filepath.Join(dir, node+"-*.tar.gz"))
	if err != nil || len(saved) == 0 {
		t.Fatalf("no bundle of %s saved in %s (%v)", node, dir, err)
	}
	defer func() {
		for _, f := range saved {
			_ = os.Remove(f)
		}
	}()
	newest := slices.Max(saved) // named by time
	fi, err := os.Stat(newest)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v (%v), want a 0600 file", newest, fi, err)
	}
	data, err := os.ReadFile(newest)
	if err != nil {
		t.Fatal(err)
	}
	if err := check(data); err != nil {
		t.Errorf("%s: %v", newest, err)
	}
}

// bundleHolds checks that a saved bundle is a gzipped tar archive holding a file of that name
// with want in it.
func bundleHolds(name, want string) func([]byte) error {
	return func(data []byte) error {
		gz, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return err
		}
		tr := tar.NewReader(gz)
		for {
			h, err := tr.Next()
			if err != nil {
				return fmt.Errorf("no %s in the bundle (%v)", name, err)
			}
			if h.Name != name {
				continue
			}
			b, err := io.ReadAll(tr)
			if err != nil || !strings.Contains(string(b), want) {
				return fmt.Errorf("%s lacks %q (%v):\n%s", name, want, err, b)
			}
			return nil
		}
	}
}

// readyNode registers a Ready Node, as a kubelet would.
func readyNode(t *testing.T, c kubernetes.Interface, name string) {
	ctx := context.Background()
	if _, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: map[string]string{"kubernetes.io/os": "windows"}}}, metav1.CreateOptions{}); err != nil {
		t.Error(err)
		return
	}
	// The controller manager updates a new Node too: retry on conflicts.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		_, err = c.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Error(err)
	}
}

// badServer applies a node on a server that is wrong in some way and expects the error; the
// server must have received no command but the first look at it (nothing changed).
func badServer(t *testing.T, srv *serverstest.WinRM, password, node string, want string, commands int) {
	_, provider := testAccLocal(t)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: provider + node, ConfigVariables: passwordVar(password),
			ExpectError: wrapped(want),
		}},
	})
	if srv == nil {
		return
	}
	if got := scripts(srv, 0); len(got) != commands || (commands == 1 && !strings.Contains(got[0], "ConvertTo-Json -Compress")) {
		t.Errorf("the server received %d commands, want %d (a look at it, nothing that changes it):\n%s", len(got), commands, strings.Join(got, "\n----\n"))
	}
}

// Nothing answers at the address.
func TestAccWindowsNode_unreachable(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		t.Fatalf("a TCP listener at %v", l.Addr())
	}
	port := addr.Port
	_ = l.Close()
	badServer(t, nil, winrmPassword, fmt.Sprintf(`
variable "password" {
  type      = string
  ephemeral = true
}

resource "kubewin_windows_node" "srv" {
  host       = "127.0.0.1"
  cluster_id = "lab"
  winrm {
    port        = %d
    user        = "Administrator"
    password_wo = var.password
  }
}
`, port), fmt.Sprintf(`(?s)Cannot Reach the Server.*cannot reach 127.0.0.1:%d.*connection refused.*Check host and\s+winrm.port`, port), 0)
}

// The password is wrong: the server refuses it, and the error says where to set it.
func TestAccWindowsNode_wrongPassword(t *testing.T) {
	t.Parallel()
	srv, _ := winrmServer(t)
	badServer(t, srv, "not-the-password", winrmNodeConfig(srv, `  cluster_id = "lab"`),
		`(?s)Server Refused the Credentials.*HTTP 401 Unauthorized.*`+
			`Check winrm.user and the\s+password \(winrm.password_wo, or \$KUBEWIN_WINRM_PASSWORD\)`, 0)
	if srv.Refused() == 0 {
		t.Error("the server refused nothing")
	}
}

// The server's certificate is signed by no CA the provider trusts (no ca_certificate).
func TestAccWindowsNode_untrustedCertificate(t *testing.T) {
	t.Parallel()
	srv, _ := winrmServer(t)
	node := strings.Replace(winrmNodeConfig(srv, `  cluster_id = "lab"`), fmt.Sprintf("ca_certificate = %q", srv.CA), "", 1)
	badServer(t, srv, winrmPassword, node, `(?s)Untrusted Server Certificate.*certificate signed by unknown authority.*Set\s+winrm.ca_certificate`, 0)
}

// Windows Server 2016 cannot be a node.
func TestAccWindowsNode_windowsServer2016(t *testing.T) {
	t.Parallel()
	srv, m := winrmServer(t)
	m.Facts.Build, m.Facts.Files = 14393, []string{`C:\ProgramData\kubewin\image-manifest.json`}
	badServer(t, srv, winrmPassword, winrmNodeConfig(srv, `  cluster_id = "lab"`),
		`(?s)Windows Server 2016 Is Not Supported.*WINSRV02 runs Windows Server 2016 \(build\s+14393\).*Nothing was changed on the server`, 1)
}

// The server already runs a kubelet: another Kubernetes installation. Every other problem is
// reported with it.
func TestAccWindowsNode_kubeletRunning(t *testing.T) {
	t.Parallel()
	srv, m := winrmServer(t)
	m.Facts.Services = []guest.Service{{Name: "kubelet", Running: true}}
	m.Facts.PortsInUse = []int{10250}
	badServer(t, srv, winrmPassword, winrmNodeConfig(srv, `  cluster_id = "lab"`),
		`(?s)Port In Use.*10250.*Kubernetes Already Installed.*WINSRV02 has a kubelet service \(running\)`, 1)
}
