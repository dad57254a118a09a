# An existing Windows Server 2022, created from a kubewin image, joins the cluster of the
# provider's kubernetes block over WinRM (HTTPS, its certificate checked against the site's CA).
variable "admin_password" {
  type      = string
  sensitive = true
  ephemeral = true
}

variable "corp_ca" {
  type        = string
  description = "PEM certificate of the CA that signed the server's WinRM certificate."
}

resource "kubewin_windows_node" "app1" {
  host = "app1.corp.example"

  winrm {
    user           = "Administrator"
    password_wo    = var.admin_password # a destroy reads $KUBEWIN_WINRM_PASSWORD
    ca_certificate = var.corp_ca
  }

  labels = { "example.com/team" = "payments" }
  drain  = { timeout = "10m" }
}

# A clean server reached over SSH: kubewin installs the payload from a host cache (the server
# has no Internet access) and removes it again on destroy.
variable "ssh_private_key" {
  type      = string
  sensitive = true
  ephemeral = true
}

variable "release_plan" {
  type        = string
  description = "The bake plan: the manifest the kubewin-release Packer data source resolves."
}

resource "kubewin_windows_node" "app2" {
  host = "10.20.0.13"

  ssh {
    user           = "Administrator"
    private_key_wo = var.ssh_private_key # a destroy reads $KUBEWIN_SSH_PRIVATE_KEY
    host_key       = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMpawMhyTmRPODRZF/US/5EwullXR7jDBOChUh/jLJBx"
  }

  install {
    release  = var.release_plan
    transfer = "host-cache"
  }
}
