package provider

// The windows_node resource's errors: a failure to reach the server, or of a command on it or in the cluster, as diagnostics.

import (
	"errors"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"

	"github.com/kubewin/kubewin/internal/guest"
	"github.com/kubewin/kubewin/internal/remote"
	"github.com/kubewin/kubewin/provider/internal/pool"
)

// connectionError turns a failure to reach or log in to the server into a diagnostic that
// names the attribute to fix.
func (m *windowsNodeModel) connectionError(err error) diag.Diagnostics {
	var diags diag.Diagnostics
	conn, ssh := pathWinRM, m.SSH != nil
	if ssh {
		conn = pathSSH
	}
	switch remote.KindOf(err) {
	case remote.Unreachable:
		fix := "that the WinRM listener runs (`winrm quickconfig -transport:https` creates an HTTPS one, port 5986)"
		if ssh {
			fix = "that the OpenSSH server runs (`Add-WindowsCapability -Online -Name OpenSSH.Server~~~~0.0.1.0; Start-Service sshd`)"
		}
		diags.AddAttributeError(path.Root("host"), "Cannot Reach the Server", fmt.Sprintf("%s.\n\nCheck host and %s.port, that the server is up, %s, and "+
			"that no firewall is in the way. Nothing was changed on the server.", err, conn, fix))
	case remote.Unauthorized:
		fix := fmt.Sprintf("Check winrm.user and the password (winrm.password_wo, or $%s). With auth = \"basic\" the server must allow it "+
			"(`winrm set winrm/config/service/auth @{Basic=\"true\"}`); a local account other than the built-in Administrator also needs "+
			"LocalAccountTokenFilterPolicy = 1 for remote administration.", m.winrmEnv())
		if ssh {
			fix = fmt.Sprintf("Check ssh.user and the key (ssh.private_key_wo, or $%s): its public key must be in the user's authorized keys "+
				"(for administrators, C:\\ProgramData\\ssh\\administrators_authorized_keys).", m.sshEnv())
		}
		diags.AddAttributeError(conn.AtName("user"), "Server Refused the Credentials", fmt.Sprintf("%s.\n\n%s Nothing was changed on the "+
			"server.", err, fix))
	case remote.Untrusted:
		if ssh {
			diags.AddAttributeError(conn.AtName("host_key"), "Unexpected Host Key", fmt.Sprintf("%s.\n\nIf the server's key changed on purpose, "+
				"set ssh.host_key to the new one (`ssh-keyscan -t ed25519 <host>`); otherwise something poses as the server. Nothing was changed on it.", err))
		} else {
			diags.AddAttributeError(conn.AtName("ca_certificate"), "Untrusted Server Certificate", fmt.Sprintf("%s.\n\nSet winrm.ca_certificate to the PEM "+
				"certificate of the CA that signed the server's WinRM certificate (or to the certificate itself when it is self-signed), and "+
				"winrm.tls_server_name when connecting by a name the certificate does not carry. Only on a network you trust, "+
				"winrm.insecure_skip_tls_verify = true accepts any certificate. Nothing was changed on the server.", err))
		}
	default:
		diags.AddAttributeError(conn, "Cannot Connect to the Server", err.Error())
	}
	return diags
}

// commandError turns a failure on the server or in the cluster into a diagnostic.
func commandError(err error) diag.Diagnostics {
	var diags diag.Diagnostics
	var je *pool.JoinError
	var exit *guest.ExitError
	switch {
	case errors.As(err, &je):
		diags.AddError("Node Failed to Join", je.Detail())
	case errors.As(err, &exit):
		diags.AddError("Command Failed on the Server", err.Error())
	case remote.KindOf(err) != 0:
		diags.AddError("Lost the Connection to the Server", err.Error())
	default:
		diags.AddError("Cannot Join the Server", err.Error())
	}
	return diags
}
