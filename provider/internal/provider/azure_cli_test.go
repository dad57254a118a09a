package provider

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubewin/kubewin/internal/api"
	"github.com/kubewin/kubewin/internal/proc"
	"github.com/kubewin/kubewin/internal/testkit/armtest"
)

// These tests run the provider as terraform does in production — a separate process, installed
// through a dev override — against the ARM test server, which that process reaches through the
// environment alone (ARM_* variables, SSL_CERT_FILE).

// azurePoolCLI prepares a configuration with a local cluster and an azure pool of count nodes.
func azurePoolCLI(t testing.TB, f *azureFixture, provider string, extra string) *cli {
	t.Helper()
	c := newCLI(t, t.TempDir(), provider+fmt.Sprintf(`
variable "node_count" {
  type    = number
  default = 2
}

resource "kubewin_cluster" "test" {
  name = "pooltest"
  local {}
}

resource "kubewin_windows_node_pool" "win" {
  name       = "win"
  cluster_id = kubewin_cluster.test.id
  node_count = var.node_count
  azure {
    resource_group_name = %q
    location            = %q
    vm_size             = "Standard_D4s_v5"
    subnet_id           = %q
    image_id            = %q
%s
  }
}
`, f.group, armServer.Location(), f.subnetID, f.imageA, extra))
	c.env = append(c.env, armServer.Env()...)
	return c
}

func acceptance(t testing.TB) {
	t.Helper()
	if os.Getenv("TF_ACC") == "" {
		t.Skip("an acceptance test: set TF_ACC=1 (make test does)")
	}
}

// A provider killed in the middle of an apply, while ARM creates the scale set, leaves machines
// that the next apply adopts: it waits for them to join and creates no duplicates.
func TestAccAzureKilledMidApply(t *testing.T) {
	t.Parallel()
	acceptance(t)
	state, provider := testAccLocal(t)
	f := newAzureFixture(t, state)
	c := azurePoolCLI(t, f, provider, "")
	c.run(t, "apply", "-auto-approve", "-input=false", "-target=kubewin_cluster.test")
	t.Cleanup(func() { _, _, _ = c.try("destroy", "-auto-approve", "-input=false") })
	before := f.scaleSetWrites()

	hold := armServer.HoldOperations(armtest.Match{Method: "PUT", Path: armtest.InGroup(f.group, `/virtualMachineScaleSets/win$`)})
	var out bytes.Buffer
	cmd := exec.Command(c.tf, "-chdir="+c.dir, "apply", "-auto-approve", "-input=false")
	cmd.Env, cmd.Stdout, cmd.Stderr = c.env, &out, &out
	cmd.SysProcAttr = proc.SysProcAttr(false) // its own process group
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := hold.WaitHits(ctx, 1); err != nil {
		t.Fatalf("the apply never created the scale set: %v\n%s", err, out.String())
	}
	// terraform and the provider die together, with the scale set's creation in progress.
	_ = proc.Kill(-cmd.Process.Pid)
	_ = cmd.Wait()
	hold.Remove()

	c.run(t, "apply", "-auto-approve", "-input=false")
	if got := armServer.Instances(f.scaleSetID()); len(got) != 2 {
		t.Errorf("%d instances after the second apply, want 2: %v", len(got), got)
	}
	if n := f.scaleSetWrites() - before; n != 1 {
		t.Errorf("%d scale set writes in both applies, want 1 (the second apply only waits for the machines)", n)
	}
}

// A pool on a subnet without an outbound path (the fixture's: no NAT gateway, no default route to
// an appliance) is warned about at plan, naming the subnet and the fix (azure.SubnetOutbound).
func TestAccAzurePoolSubnetWithoutOutbound(t *testing.T) {
	t.Parallel()
	acceptance(t)
	state, provider := testAccLocal(t)
	f := newAzureFixture(t, state)
	c := azurePoolCLI(t, f, provider, "")
	_, out, err := c.try("plan", "-input=false", "-no-color")
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, out)
	}
	for _, want := range []string{"Warning: The Pool's Subnet Has No Outbound Path", f.subnetID, "Associate a NAT gateway"} {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), want) {
			t.Errorf("the plan's output does not say %q:\n%s", want, out)
		}
	}
}

// No credential reaches the state, a saved plan or the logs: not the ARM client secret, not the
// VMs' administrator password (write-only), not the pools' bootstrap tokens.
func TestAccAzureNoSecretsInStateOrLogs(t *testing.T) {
	t.Parallel()
	acceptance(t)
	state, provider := testAccLocal(t)
	f := newAzureFixture(t, state)
	const password = "Kw-Adm1n-Passw0rd-Not-For-Logs!"
	// The machine settings a user may give, so that their bodies reach ARM (and its schemas).
	c := azurePoolCLI(t, f, provider+`
variable "admin_password" {
  type      = string
  sensitive = true
  ephemeral = true
}
`, `    admin_password_wo              = var.admin_password
    admin_username                 = "nodeadmin"
    zones                          = ["1", "2"]
    accelerated_networking_enabled = true
    os_disk_storage_account_type   = "Premium_LRS"
    os_disk_size_gb                = 128
    os_disk_caching                = "ReadWrite"
    priority                       = "Spot"
    max_bid_price                  = 0.25
    tags                           = { team = "windows" }`)
	c.env = append(c.env, "TF_VAR_admin_password="+password)
	t.Cleanup(func() { _, _, _ = c.try("destroy", "-auto-approve", "-input=false") })
	scan := runForSecretScan(t, c, [][]string{
		{"plan", "-input=false", "-out=plan.out"},
		{"apply", "-input=false", "plan.out"},
		{"plan", "-input=false", "-out=plan2.out", "-var", "node_count=3"},
		{"apply", "-input=false", "plan2.out"},
	})
	// The secrets ARM received: the password in the scale set's model, the tokens in its custom data.
	secrets := map[string]string{"ARM client secret": armServer.Credentials().ClientSecret}
	sawPassword := false
	for _, r := range armServer.Requests() {
		if r.ResourceType != "Microsoft.Compute/virtualMachineScaleSets" || (r.Method != "PUT" && r.Method != "PATCH") {
			continue
		}
		sawPassword = sawPassword || strings.Contains(string(r.Body), password)
		var body struct {
			Properties struct {
				VirtualMachineProfile struct {
					OSProfile struct {
						CustomData string `json:"customData"`
					} `json:"osProfile"`
				} `json:"virtualMachineProfile"`
			} `json:"properties"`
		}
		if json.Unmarshal(r.Body, &body) != nil || body.Properties.VirtualMachineProfile.OSProfile.CustomData == "" {
			continue
		}
		raw, _ := base64.StdEncoding.DecodeString(body.Properties.VirtualMachineProfile.OSProfile.CustomData)
		if cfg, err := api.DecodeNodeConfig(raw); err == nil && strings.Contains(r.Path, "/"+f.group+"/") {
			_, secret, _ := strings.Cut(cfg.Cluster.BootstrapToken, ".")
			secrets["bootstrap token secret of "+r.Method] = secret
		}
	}
	if !sawPassword || len(secrets) < 3 {
		t.Fatalf("ARM never received the password (%v) or two tokens (%d secrets): the check below would prove nothing", sawPassword, len(secrets))
	}
	secrets["administrator password"] = password
	scan.check(t, secrets)
}

// secretScan runs a configuration's plan and apply steps with TF_LOG=TRACE and keeps what a
// secret must never reach: the log, the state and the last saved plan (as JSON).
type secretScan struct {
	logs, state, plan string
}

// runForSecretScan runs steps (plan -out=<file>, apply <file>, ...) and returns their log, the
// state and the JSON of the last plan file; the CLI's environment gets TF_LOG=TRACE.
func runForSecretScan(t *testing.T, c *cli, steps [][]string) secretScan {
	t.Helper()
	c.env = append(c.env, "TF_LOG=TRACE")
	var logs strings.Builder
	planFile := ""
	for _, args := range steps {
		_, out, err := c.try(args...)
		logs.WriteString(out)
		if err != nil {
			t.Fatalf("%s: %v\n%s", args[0], err, tail(out, 60))
		}
		for _, a := range args {
			if f, ok := strings.CutPrefix(a, "-out="); ok {
				planFile = f
			}
		}
	}
	_, planJSON, err := c.try("show", "-json", planFile)
	if err != nil {
		t.Fatal(err)
	}
	state, err := os.ReadFile(filepath.Join(c.dir, "terraform.tfstate"))
	if err != nil {
		t.Fatal(err)
	}
	return secretScan{logs: logs.String(), state: string(state), plan: planJSON}
}

// check fails the test for every secret found in the log, the state or the plan.
func (s secretScan) check(t *testing.T, secrets map[string]string) {
	t.Helper()
	for what, secret := range secrets {
		for where, text := range map[string]string{"the TF_LOG=TRACE output": s.logs, "the state": s.state, "the plan": s.plan} {
			if strings.Contains(text, secret) {
				t.Errorf("the %s is in %s", what, where)
			}
		}
	}
}

// A plan warns when a route's Azure route table is associated with no subnet holding its next
// hop: the nodes' traffic would not use it.
func TestAccAzureRouteTableNotAssociated(t *testing.T) {
	t.Parallel()
	acceptance(t)
	state, provider := testAccLocal(t)
	f := newAzureFixture(t, state)
	lonely, err := armServer.AddRouteTable(f.group, "lonely")
	if err != nil {
		t.Fatal(err)
	}
	route := func(table string) string {
		return provider + fmt.Sprintf(`resource "kubewin_pod_route" "test" {
  name        = "win000000"
  destination = "10.244.0.0/24"
  next_hop    = "10.240.0.4"
  azure {
    route_table_id = %q
  }
}
`, table)
	}
	warning := "Route Table Not Associated With the Nodes' Subnet"
	for table, warned := range map[string]bool{lonely: true, f.routeTableID: false} {
		c := newCLI(t, t.TempDir(), route(table))
		c.env = append(c.env, armServer.Env()...)
		_, out, err := c.try("plan", "-input=false", "-no-color")
		if err != nil {
			t.Fatalf("plan: %v\n%s", err, out)
		}
		if strings.Contains(out, warning) != warned {
			t.Errorf("route table %s: warned %v, want %v:\n%s", table, !warned, warned, out)
		}
	}
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// BenchmarkAzurePoolApply measures terraform apply creating an azure pool of 1, 10 and 50 nodes
// through the ARM test server (each instance a simulated machine that joins the local control
// plane), and counts the ARM writes for the scale set: the same for every size.
func BenchmarkAzurePoolApply(b *testing.B) {
	state, provider := testAccLocal(b)
	f := newAzureFixture(b, state)
	c := azurePoolCLI(b, f, provider, "")
	c.run(b, "apply", "-auto-approve", "-input=false", "-target=kubewin_cluster.test")
	defer c.run(b, "destroy", "-auto-approve", "-input=false")
	for _, n := range []int{1, 10, 50} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			var total time.Duration
			var writes int
			for range b.N {
				before := f.scaleSetWrites()
				total += c.run(b, "apply", "-auto-approve", "-input=false", "-var", fmt.Sprintf("node_count=%d", n))
				writes += f.scaleSetWrites() - before
				b.StopTimer()
				c.run(b, "destroy", "-auto-approve", "-input=false", "-target=kubewin_windows_node_pool.win")
				b.StartTimer()
			}
			b.ReportMetric((total / time.Duration(b.N)).Seconds(), "s/apply")
			b.ReportMetric(float64(writes)/float64(b.N), "arm-writes/apply")
		})
	}
}
