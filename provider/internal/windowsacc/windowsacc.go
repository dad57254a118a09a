// Package windowsacc names the Windows Server the kubewin_windows_node acceptance suite joins.
// With KUBEWIN_ACC_WINDOWS_HOST in the environment the target is that server, reached over SSH
// or WinRM with the credentials the environment holds, joining the cluster of the kubeconfig
// the environment names, once for each network mode; without it the suite skips with one line
// naming what it needs. Secrets stay in the environment: the configuration a target writes
// names the variables that hold them (the resource's password_env and private_key_env), so
// they are in no configuration, plan or log.
package windowsacc

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/kubewin/kubewin/internal/api"
	"github.com/kubewin/kubewin/internal/api/v1alpha1"
)

// The environment of the real-Windows track.
const (
	// EnvHost is the server's address; set, it selects the track.
	EnvHost = "KUBEWIN_ACC_WINDOWS_HOST"
	// EnvTransport is ssh or winrm.
	EnvTransport = "KUBEWIN_ACC_WINDOWS_TRANSPORT"
	// EnvPort is the transport's port (default: the resource's, 22 or 5986).
	EnvPort = "KUBEWIN_ACC_WINDOWS_PORT"
	// EnvUser is an administrator of the server.
	EnvUser = "KUBEWIN_ACC_WINDOWS_USER"
	// EnvPassword holds the user's password, for winrm.
	EnvPassword = "KUBEWIN_ACC_WINDOWS_PASSWORD"
	// EnvWinRMAuth is ntlm (default) or basic.
	EnvWinRMAuth = "KUBEWIN_ACC_WINDOWS_WINRM_AUTH"
	// EnvWinRMCAFile is a PEM file of the CAs that sign the server's WinRM certificate
	// (default: the system's).
	EnvWinRMCAFile = "KUBEWIN_ACC_WINDOWS_WINRM_CA_FILE"
	// EnvTLSServerName is the name on the server's WinRM certificate, when it is not the host.
	EnvTLSServerName = "KUBEWIN_ACC_WINDOWS_WINRM_TLS_SERVER_NAME"
	// EnvSSHPrivateKey holds the user's private key (PEM or OpenSSH), for ssh.
	EnvSSHPrivateKey = "KUBEWIN_ACC_WINDOWS_SSH_PRIVATE_KEY"
	// EnvSSHHostKey is the server's public host key, as ssh-keyscan prints it without the host.
	EnvSSHHostKey = "KUBEWIN_ACC_WINDOWS_SSH_HOST_KEY"
	// EnvKubeconfig is the kubeconfig of the cluster to join, a cluster the maintainer made.
	EnvKubeconfig = "KUBEWIN_ACC_WINDOWS_KUBECONFIG"
	// EnvKubeContext is the kubeconfig's context (default: its current one).
	EnvKubeContext = "KUBEWIN_ACC_WINDOWS_KUBE_CONTEXT"
	// EnvClusterCIDR and EnvServiceCIDR are the cluster's networks, for a cluster without
	// kube-system/kubeadm-config.
	EnvClusterCIDR = "KUBEWIN_ACC_WINDOWS_CLUSTER_CIDR"
	EnvServiceCIDR = "KUBEWIN_ACC_WINDOWS_SERVICE_CIDR"
	// EnvRelease is a bake plan file (the manifest a kubewin-release data source resolves) to
	// install; unset, the server must have been created from a kubewin image.
	EnvRelease = "KUBEWIN_ACC_WINDOWS_RELEASE"
	// EnvTransfer is the install's transfer, guest-fetch (default) or host-cache.
	EnvTransfer = "KUBEWIN_ACC_WINDOWS_TRANSFER"
	// EnvInterface is the server's adapter the pod network binds to (default: the resource's).
	EnvInterface = "KUBEWIN_ACC_WINDOWS_INTERFACE"
	// EnvNetworkModes lists the network modes to join with, comma-separated (default: all).
	EnvNetworkModes = "KUBEWIN_ACC_WINDOWS_NETWORK_MODES"
)

// Needs is the line a suite skips with when the environment names no server.
const Needs = "needs a Windows Server: set " + EnvHost + ", " + EnvTransport + " (ssh or winrm), " + EnvUser + ", " + EnvPassword +
	" (winrm) or " + EnvSSHPrivateKey + " and " + EnvSSHHostKey + " (ssh), and " + EnvKubeconfig +
	" (the cluster to join); see design/acceptance-windows.md"

// Transports.
const (
	SSH   = "ssh"
	WinRM = "winrm"
)

// Target is a server to join and the cluster it joins.
type Target struct {
	Host, Transport string
	// Port is 0 for the transport's default.
	Port int
	User string
	// WinRMAuth, CACertificate (PEM) and TLSServerName are the winrm block's.
	WinRMAuth, CACertificate, TLSServerName string
	// HostKey is the ssh block's host_key.
	HostKey string
	// Kubeconfig, KubeContext, ClusterCIDR and ServiceCIDR are the provider's kubernetes block's.
	Kubeconfig, KubeContext, ClusterCIDR, ServiceCIDR string
	// Release is the bake plan to install (JSON), empty for a server made from a kubewin image.
	Release, Transfer string
	Interface         string
	NetworkModes      []v1alpha1.NetworkMode
	// Simulated makes the server a simulated machine over SSH. The environment never sets it: a
	// test that started the machine and made the cluster does, so no environment can join a
	// simulated node to a cluster someone else made.
	Simulated *Simulated
}

// Simulated is a simulated Windows machine: the resource's simulated block.
type Simulated struct{ Root, Nodeboot string }

// FromEnv returns the server the environment names, or nil when EnvHost is unset. A server
// named without what reaching and joining it takes is an error saying what to set.
func FromEnv() (*Target, error) {
	host := os.Getenv(EnvHost)
	if host == "" {
		return nil, nil
	}
	t := &Target{
		Host: host, Transport: os.Getenv(EnvTransport), User: os.Getenv(EnvUser), WinRMAuth: os.Getenv(EnvWinRMAuth),
		TLSServerName: os.Getenv(EnvTLSServerName), HostKey: os.Getenv(EnvSSHHostKey), Kubeconfig: os.Getenv(EnvKubeconfig),
		KubeContext: os.Getenv(EnvKubeContext), ClusterCIDR: os.Getenv(EnvClusterCIDR), ServiceCIDR: os.Getenv(EnvServiceCIDR),
		Transfer: os.Getenv(EnvTransfer), Interface: os.Getenv(EnvInterface),
	}
	var missing []string
	need := func(name, why string) {
		if os.Getenv(name) == "" {
			missing = append(missing, name+" ("+why+")")
		}
	}
	need(EnvUser, "an administrator of the server")
	need(EnvKubeconfig, "the kubeconfig of the cluster to join")
	switch t.Transport {
	case SSH:
		need(EnvSSHPrivateKey, "the user's private key")
		need(EnvSSHHostKey, "the server's host key, as ssh-keyscan -t ed25519 prints it")
	case WinRM:
		need(EnvPassword, "the user's password")
	default:
		return nil, fmt.Errorf("%s is set, so the windows node suite targets that server: set %s to ssh or winrm, not %q",
			EnvHost, EnvTransport, t.Transport)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s is set, so the windows node suite targets that server: also set %s", EnvHost, strings.Join(missing, ", "))
	}
	if p := os.Getenv(EnvPort); p != "" {
		port, err := strconv.Atoi(p)
		if err != nil || port < 1 || port > 65535 {
			return nil, fmt.Errorf("%s = %q is not a port: set it to a number from 1 to 65535, or unset it for the transport's default", EnvPort, p)
		}
		t.Port = port
	}
	if (t.ClusterCIDR == "") != (t.ServiceCIDR == "") {
		return nil, fmt.Errorf("set both %s and %s (a cluster without kube-system/kubeadm-config), or neither", EnvClusterCIDR, EnvServiceCIDR)
	}
	for name, to := range map[string]*string{EnvWinRMCAFile: &t.CACertificate, EnvRelease: &t.Release} {
		if f := os.Getenv(name); f != "" {
			b, err := os.ReadFile(f)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			*to = string(b)
		}
	}
	if t.Release != "" {
		if _, err := api.LoadImageManifest([]byte(t.Release)); err != nil {
			return nil, fmt.Errorf("%s = %s is not a kubewin bake plan: %w", EnvRelease, os.Getenv(EnvRelease), err)
		}
	}
	modes, err := parseModes(os.Getenv(EnvNetworkModes))
	if err != nil {
		return nil, err
	}
	t.NetworkModes = modes
	return t, nil
}

// parseModes reads a comma-separated list of network modes; empty is every mode.
func parseModes(s string) ([]v1alpha1.NetworkMode, error) {
	if strings.TrimSpace(s) == "" {
		return slices.Clone(v1alpha1.NetworkModes), nil
	}
	var modes []v1alpha1.NetworkMode
	for _, f := range strings.Split(s, ",") {
		m := v1alpha1.NetworkMode(strings.TrimSpace(f))
		if !slices.Contains(v1alpha1.NetworkModes, m) {
			return nil, fmt.Errorf("%s = %q: %q is not a network mode; use some of %v", EnvNetworkModes, s, m, v1alpha1.NetworkModes)
		}
		if !slices.Contains(modes, m) {
			modes = append(modes, m)
		}
	}
	return modes, nil
}

// Config is the provider and the node in the target's cluster and network mode, as resource
// kubewin_windows_node.acc. It holds no secret: the resource reads them from EnvPassword or
// EnvSSHPrivateKey.
func (t *Target) Config(mode v1alpha1.NetworkMode) string {
	var b strings.Builder
	b.WriteString("provider \"kubewin\" {\n  kubernetes {\n")
	attr(&b, 4, "config_path", t.Kubeconfig)
	attr(&b, 4, "config_context", t.KubeContext)
	attr(&b, 4, "cluster_cidr", t.ClusterCIDR)
	attr(&b, 4, "service_cidr", t.ServiceCIDR)
	b.WriteString("  }\n}\n\nresource \"kubewin_windows_node\" \"acc\" {\n")
	attr(&b, 2, "host", t.Host)
	attr(&b, 2, "network_mode", string(mode))
	attr(&b, 2, "interface_name", t.Interface)
	fmt.Fprintf(&b, "\n  %s {\n", t.Transport)
	if t.Port != 0 {
		fmt.Fprintf(&b, "    port = %d\n", t.Port)
	}
	attr(&b, 4, "user", t.User)
	if t.Transport == SSH {
		attr(&b, 4, "private_key_env", EnvSSHPrivateKey)
		attr(&b, 4, "host_key", strings.TrimSpace(t.HostKey))
	} else {
		attr(&b, 4, "password_env", EnvPassword)
		attr(&b, 4, "auth", t.WinRMAuth)
		attr(&b, 4, "ca_certificate", t.CACertificate)
		attr(&b, 4, "tls_server_name", t.TLSServerName)
	}
	b.WriteString("  }\n")
	if t.Release != "" {
		b.WriteString("\n  install {\n")
		attr(&b, 4, "release", t.Release)
		attr(&b, 4, "transfer", t.Transfer)
		b.WriteString("  }\n")
	}
	if s := t.Simulated; s != nil {
		b.WriteString("\n  simulated {\n")
		attr(&b, 4, "root", s.Root)
		attr(&b, 4, "nodeboot", s.Nodeboot)
		b.WriteString("    join_simulated_nodes_to_existing_cluster = true\n  }\n")
	}
	b.WriteString("}\n")
	return b.String()
}

// attr writes name = "value" at an indent, nothing for an empty value. The value is a literal:
// its template sequences are escaped (HCL's "$${" and "%%{").
func attr(b *strings.Builder, indent int, name, value string) {
	if value != "" {
		value = strings.NewReplacer("${", "$${", "%{", "%%{").Replace(value)
		fmt.Fprintf(b, "%s%s = %q\n", strings.Repeat(" ", indent), name, value)
	}
}

// Phase is one phase of nodeboot join as its [phase] lines report it.
type Phase struct {
	Name string
	// Result is "done in <duration>", "already done" or "failed after <duration>: <error>".
	Result string
}

// phaseLine is a workflow's closing line of a phase (nodeboot/internal/workflow).
var phaseLine = regexp.MustCompile(`\[([a-z][a-z0-9-]*)\] (done in [0-9][0-9.a-zµ]*|already done|failed after [0-9][0-9.a-zµ]*: [^"\n]*)`)

// Phases reads the phases of a join from the lines nodeboot printed, as the provider logs
// them, in order.
func Phases(log string) []Phase {
	var out []Phase
	for _, m := range phaseLine.FindAllStringSubmatch(log, -1) {
		out = append(out, Phase{Name: m[1], Result: m[2]})
	}
	return out
}
