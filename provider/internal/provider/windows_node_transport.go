package provider

// The windows_node resource's transport: WinRM or SSH, its checks, its secret and its connection.

import (
	"context"
	"fmt"
	"os"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/kubewin/kubewin/internal/guest"
	"github.com/kubewin/kubewin/internal/remote"
)

// Defaults of the connections. Terraform gives a resource no configuration when it destroys
// it, so the secret a destroy connects with comes from the environment.
const (
	defaultPasswordEnv   = "KUBEWIN_WINRM_PASSWORD"
	defaultPrivateKeyEnv = "KUBEWIN_SSH_PRIVATE_KEY"
	winrmHTTPSPort       = 5986
	winrmHTTPPort        = 5985
	sshPort              = 22
)

// tfconfig is the configuration a request carries; nil for a destroy, which has none.
type tfconfig interface {
	GetAttribute(ctx context.Context, p path.Path, target any) diag.Diagnostics
}

// secret returns the connection's secret: the write-only attribute from the configuration
// when there is one, else the environment variable.
func (m *windowsNodeModel) secret(ctx context.Context, config tfconfig) (string, diag.Diagnostics) {
	var diags diag.Diagnostics
	at, envAttr, env := pathWinRM.AtName("password_wo"), m.winrmEnv(), "password"
	if m.SSH != nil {
		at, envAttr, env = pathSSH.AtName("private_key_wo"), m.sshEnv(), "private key"
	}
	if config != nil {
		var v types.String
		diags.Append(config.GetAttribute(ctx, at, &v)...)
		if known(v) && v.ValueString() != "" {
			return v.ValueString(), diags
		}
	}
	if s := os.Getenv(envAttr); s != "" {
		return s, diags
	}
	detail := fmt.Sprintf("No %s to connect with: set %s, or the environment variable %s.", env, at, envAttr)
	if config == nil {
		detail = fmt.Sprintf("Destroying the node needs the %s to connect to the server, and Terraform gives a destroy no configuration "+
			"(so %s is not available): set the environment variable %s.", env, at, envAttr)
	}
	diags.AddAttributeError(at, "Missing Credential", detail)
	return "", diags
}

func (m *windowsNodeModel) winrmEnv() string {
	if m.WinRM != nil && known(m.WinRM.PasswordEnv) {
		return m.WinRM.PasswordEnv.ValueString()
	}
	return defaultPasswordEnv
}

func (m *windowsNodeModel) sshEnv() string {
	if m.SSH != nil && known(m.SSH.PrivateKeyEnv) {
		return m.SSH.PrivateKeyEnv.ValueString()
	}
	return defaultPrivateKeyEnv
}

// connect opens the connection to the server and returns it with a function that closes it.
func (m *windowsNodeModel) connect(ctx context.Context, secret string) (guest.Shell, func(), error) {
	host := m.Host.ValueString()
	if s := m.SSH; s != nil {
		port := int(s.Port.ValueInt64())
		if s.Port.IsNull() {
			port = sshPort
		}
		c, err := remote.SSH{Host: host, Port: port, User: s.User.ValueString(), PrivateKey: []byte(secret),
			HostKey: s.HostKey.ValueString(), InsecureIgnoreHostKey: s.InsecureIgnoreHostKey.ValueBool()}.Dial(ctx)
		if err != nil {
			return guest.Shell{}, nil, err
		}
		var lang guest.Lang = guest.Windows{SSH: true}
		if sim := m.Simulated; sim != nil {
			lang = guest.Sim{Root: sim.Root.ValueString(), Binary: sim.Nodeboot.ValueString()}
		}
		return guest.Shell{Runner: c, Lang: lang}, func() { _ = c.Close() }, nil
	}
	w := m.WinRM
	http := w.InsecureUseHTTP.ValueBool()
	port := int(w.Port.ValueInt64())
	if w.Port.IsNull() {
		port = winrmHTTPSPort
		if http {
			port = winrmHTTPPort
		}
	}
	auth := w.Auth.ValueString()
	if auth == "" {
		auth = remote.AuthNTLM
	}
	c, err := remote.WinRM{Host: host, Port: port, HTTP: http, User: w.User.ValueString(), Password: secret, Auth: auth,
		CACertificates: []byte(w.CACertificate.ValueString()), TLSServerName: w.TLSServerName.ValueString(),
		InsecureSkipVerify: w.InsecureSkipTLSVerify.ValueBool()}.Client()
	if err != nil {
		return guest.Shell{}, nil, err
	}
	return guest.Shell{Runner: c, Lang: guest.Windows{}}, func() {}, nil
}

// checkTransport reports every mistake in the winrm and ssh blocks against its attribute.
func (m *windowsNodeModel) checkTransport() diag.Diagnostics {
	var diags diag.Diagnostics
	switch {
	case m.WinRM == nil && m.SSH == nil:
		diags.AddAttributeError(pathWinRM, "Missing Connection", "Say how to reach the server: a winrm block (WinRM over HTTPS, user and password) or an "+
			"ssh block (OpenSSH, user and key).")
	case m.WinRM != nil && m.SSH != nil:
		diags.AddAttributeError(pathSSH, "Conflicting Connections", "Set either the winrm block or the ssh block, not both.")
	}
	if w := m.WinRM; w != nil {
		if w.User.IsNull() {
			diags.AddAttributeError(pathWinRM.AtName("user"), "Missing User", "Set winrm.user to an administrator of the server, such as \"Administrator\".")
		}
		http := w.InsecureUseHTTP.ValueBool()
		if http && w.Auth.ValueString() == remote.AuthBasic {
			diags.AddAttributeError(pathWinRM.AtName("auth"), "Basic Authentication Over Plain HTTP",
				"With insecure_use_http, auth = \"basic\" would send the user's password in the clear. Use auth = \"ntlm\" (the default), or HTTPS.")
		}
		if http && (known(w.CACertificate) || known(w.TLSServerName) || w.InsecureSkipTLSVerify.ValueBool()) {
			diags.AddAttributeError(pathWinRM.AtName("insecure_use_http"), "TLS Settings Without TLS",
				"insecure_use_http turns TLS off, so ca_certificate, tls_server_name and insecure_skip_tls_verify have nothing to apply to. Remove them, or "+
					"remove insecure_use_http.")
		}
		if w.InsecureSkipTLSVerify.ValueBool() && known(w.CACertificate) {
			diags.AddAttributeError(pathWinRM.AtName("insecure_skip_tls_verify"), "Conflicting Certificate Settings",
				"insecure_skip_tls_verify accepts any certificate, so ca_certificate would not be checked. Remove insecure_skip_tls_verify.")
		}
	}
	if s := m.SSH; s != nil {
		if s.User.IsNull() {
			diags.AddAttributeError(pathSSH.AtName("user"), "Missing User", "Set ssh.user to an administrator of the server.")
		}
		switch ignore := s.InsecureIgnoreHostKey.ValueBool(); {
		case s.HostKey.IsNull() && !ignore && !s.InsecureIgnoreHostKey.IsUnknown():
			diags.AddAttributeError(pathSSH.AtName("host_key"), "Missing Host Key",
				"Set ssh.host_key to the server's public host key, which `ssh-keyscan -t ed25519 <host>` prints (without the host name), so that "+
					"kubewin knows it talks to the server and not to someone posing as it. On a test network, ssh.insecure_ignore_host_key = true accepts any key.")
		case known(s.HostKey) && ignore:
			diags.AddAttributeError(pathSSH.AtName("insecure_ignore_host_key"), "Conflicting Host Key Settings", "host_key is set and "+
				"insecure_ignore_host_key would not check it. Remove one.")
		}
	}
	return diags
}
