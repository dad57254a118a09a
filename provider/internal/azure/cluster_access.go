package azure

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	"k8s.io/client-go/rest"

	"github.com/kubewin/kubewin/internal/kubeadmboot"
)

// Access is a short-lived cluster-admin credential of an azure cluster.
type Access struct {
	// Endpoint is the API server, host:port (the load balancer's frontend).
	Endpoint string
	// CACert is the cluster CA certificate; Cert and Key the admin's certificate and key (PEM).
	CACert, Cert, Key []byte
	// Expires is when the certificate expires.
	Expires time.Time
	dial    func(ctx context.Context, network, address string) (net.Conn, error) // Client.dial
}

// REST is a client configuration with the credential.
func (a *Access) REST() *rest.Config {
	return &rest.Config{Host: "https://" + a.Endpoint, TLSClientConfig: rest.TLSClientConfig{CAData: a.CACert, CertData: a.Cert, KeyData: a.Key},
		Dial: a.dial}
}

// AdminGroup is the group kubeadm binds to cluster-admin; the admin certificates are in it.
const AdminGroup = "kubeadm:cluster-admins"

// adminValidity is how long an admin certificate is valid.
const adminValidity = time.Hour

// Access takes a cluster-admin certificate for a key made here: a run command on a control
// plane submits its signing request to the cluster's CSR API with kubeadm's admin credential,
// approves it and prints the certificate and the CA certificate. The key never leaves this
// process; the run command's output holds only certificates. The control planes are tried in
// turn, so that one lost control plane does not lock the cluster out.
func (c *Cluster) Access(ctx context.Context, endpoint string, masters int) (*Access, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "kubewin",
		Organization: []string{AdminGroup}}}, key)
	if err != nil {
		return nil, err
	}
	name := "kubewin-admin-" + randomHex(6)
	script, err := kubeadmboot.AdminCertificateScript(name, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
		int(adminValidity/time.Second))
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	var errs []error
	for i := range max(masters, 1) {
		out, err := c.RunScript(ctx, i, script)
		if err == nil {
			var cert, ca []byte
			if cert, ca, err = kubeadmboot.ParseAdminCertificate(out); err == nil {
				return &Access{Endpoint: endpoint, CACert: ca, Cert: cert, Key: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
					Expires: time.Now().Add(adminValidity), dial: c.Client.dial}, nil
			}
		}
		errs = append(errs, fmt.Errorf("%s: %w", c.masterName(i), err))
	}
	return nil, fmt.Errorf("no control plane of cluster %s signed an admin certificate: %w", c.Spec.Name, errors.Join(errs...))
}

// RunScript runs a shell script on control plane i through ARM's run command and returns its
// output; a script that fails is an error with its output. The script runs once however often
// the POST is sent (runOnce): azcore sends it again when its answer is lost (a connection error
// or timeout), and Compute answers 409 Conflict while the machine still runs it, which is sent
// again too, until the recorded result is replayed.
func (c *Cluster) RunScript(ctx context.Context, i int, script string) (string, error) {
	tflog.Debug(ctx, "run command", map[string]any{"vm": c.masterName(i)})
	once := runOnce(randomHex(8), script)
	p, err := c.Client.compute.NewVirtualMachinesClient().BeginRunCommand(policy.WithRetryOptions(ctx, runCommandRetryOptions), c.Spec.ResourceGroup,
		c.masterName(i), armcompute.RunCommandInput{
			CommandID: to.Ptr("RunShellScript"), Script: to.SliceOfPtrs(strings.Split(strings.TrimRight(once, "\n"), "\n")...),
		}, nil)
	r, err := wait(ctx, c.Client, p, err)
	if err != nil {
		return "", err
	}
	var out strings.Builder
	failed := false
	for _, st := range r.Value {
		if st == nil {
			continue
		}
		failed = failed || strings.Contains(deref(st.Code), "failed")
		out.WriteString(deref(st.Message))
	}
	if failed {
		return "", fmt.Errorf("the run command failed: %s", strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// runCommandRetryOptions are retryOptions that also send a run command again when Compute refuses
// it because a run command is in progress on the machine (409 Conflict: one script runs at a
// time, https://learn.microsoft.com/azure/virtual-machines/linux/run-command#restrictions): the
// one in progress may be this one, whose answer was lost.
var runCommandRetryOptions = func() policy.RetryOptions {
	o := retryOptions
	o.ShouldRetry = func(resp *http.Response, err error) bool {
		return retryOptions.ShouldRetry(resp, err) || resp != nil && resp.StatusCode == http.StatusConflict && errorCode(resp) == "Conflict"
	}
	return o
}()

// runCommandDir is where runOnce keeps the results of run commands on a machine.
const runCommandDir = "/var/lib/kubewin/run-commands"

// runOnce wraps a script so that it runs once per id: its output, error output and exit status
// are kept on the machine, and the same script sent again (a retried POST) prints them again
// instead of running. Results older than a day are removed. The script runs in a subshell, its
// own `set -e` and traps included.
func runOnce(id, script string) string {
	d := runCommandDir + "/" + id
	return strings.Join([]string{
		"d=" + d,
		`if [ -f "$d/exit" ]; then cat "$d/stdout"; cat "$d/stderr" >&2; exit "$(cat "$d/exit")"; fi`,
		"find " + runCommandDir + " -mindepth 1 -maxdepth 1 -mmin +1440 -exec rm -rf {} + 2>/dev/null",
		`mkdir -p -m 0700 "$d"`,
		"(",
		strings.TrimRight(script, "\n"),
		`) >"$d/stdout" 2>"$d/stderr"`,
		`echo $? >"$d/exit.new" && mv "$d/exit.new" "$d/exit"`,
		`cat "$d/stdout"; cat "$d/stderr" >&2; exit "$(cat "$d/exit")"`,
	}, "\n") + "\n"
}

// Endpoint reads the API server's endpoint (host:port) from the load balancer's frontend, and
// the number of control planes from its tag.
func (c *Cluster) Endpoint(ctx context.Context) (endpoint string, masters int, err error) {
	lb, err := c.Client.network.NewLoadBalancersClient().Get(ctx, c.Spec.ResourceGroup, c.lbName(), nil)
	if err != nil {
		return "", 0, fmt.Errorf("read %s: %w", c.ID(), err)
	}
	if err := c.ours(c.ID(), lb.Tags); err != nil {
		return "", 0, err
	}
	masters, _ = strconv.Atoi(deref(lb.Tags[TagControlPlanes]))
	if lb.Properties == nil || len(lb.Properties.FrontendIPConfigurations) == 0 || lb.Properties.FrontendIPConfigurations[0].Properties == nil {
		return "", 0, fmt.Errorf("load balancer %s has no frontend", c.ID())
	}
	fp := lb.Properties.FrontendIPConfigurations[0].Properties
	host := deref(fp.PrivateIPAddress)
	if fp.PublicIPAddress != nil {
		pip, err := c.Client.network.NewPublicIPAddressesClient().Get(ctx, c.Spec.ResourceGroup, c.publicIPName(), nil)
		if err != nil {
			return "", 0, fmt.Errorf("read the API server's public IP address: %w", err)
		}
		if pip.Properties != nil {
			host = deref(pip.Properties.IPAddress)
		}
	}
	if host == "" {
		return "", 0, fmt.Errorf("load balancer %s's frontend has no address", c.ID())
	}
	return net.JoinHostPort(host, strconv.Itoa(kubeadmboot.APIServerPort)), masters, nil
}

// OpenCluster is the cluster of an ID, for access (its spec holds its name and place only).
func (c *Client) OpenCluster(id string) (*Cluster, error) {
	group, name, err := ParseClusterID(id)
	if err != nil {
		return nil, err
	}
	if r, _ := arm.ParseResourceID(id); !strings.EqualFold(r.SubscriptionID, c.SubscriptionID) {
		return nil, fmt.Errorf("cluster %s is in subscription %s, the provider's azure connection in %s", id, r.SubscriptionID, c.SubscriptionID)
	}
	return &Cluster{Client: c, Spec: ClusterSpec{Name: name, ResourceGroup: group}}, nil
}
