# Existing Windows servers join a cluster kubewin did not create: the original guides' manual
# deployment, one kubewin_windows_node per server. web1 is a clean Windows Server 2022 reached
# over WinRM (HTTPS, its certificate checked against the site's CA): kubewin installs the payload
# it downloads itself from a mirror. web2 was created from a kubewin image and is reached over
# Windows Server's OpenSSH.
#
# Secrets never reach the plan or the state: they come from ephemeral variables into write-only
# attributes. Terraform gives a destroy no configuration, so a destroy reads them from the
# environment: export KUBEWIN_WINRM_PASSWORD and KUBEWIN_SSH_PRIVATE_KEY before
# `terraform destroy` (or before an apply that replaces a node).
#
#   terraform apply -var release_plan=kubewin-release-ws2022.json -var ca_certificate=corp-ca.pem \
#     -var admin_password="$KUBEWIN_WINRM_PASSWORD" -var ssh_private_key="$KUBEWIN_SSH_PRIVATE_KEY"
terraform {
  required_version = ">= 1.11"
  required_providers {
    kubewin = {
      source = "kubewin/kubewin"
    }
  }
}

variable "kubeconfig" {
  type        = string
  description = "Kubeconfig of the cluster (a kubeadm cluster: its kubeadm-config names the pod and service networks)."
  default     = "~/.kube/config"
}

variable "admin_password" {
  type        = string
  description = "Password of web1's Administrator."
  sensitive   = true
  ephemeral   = true
}

variable "ssh_private_key" {
  type        = string
  description = "Private key of web2's administrator, whose public key is in C:\\ProgramData\\ssh\\administrators_authorized_keys."
  sensitive   = true
  ephemeral   = true
}

variable "release_plan" {
  type        = string
  description = "File holding the bake plan: the manifest the kubewin-release Packer data source resolves, for Windows Server 2022."
}

variable "ca_certificate" {
  type        = string
  description = "File holding the PEM certificate of the CA that signed web1's WinRM certificate."
}

provider "kubewin" {
  kubernetes {
    config_path = var.kubeconfig
  }
}

resource "kubewin_windows_node" "web1" {
  host           = "web1.corp.example"
  interface_name = "Ethernet0"

  winrm {
    user           = "WEB1\\Administrator"
    password_wo    = var.admin_password
    ca_certificate = file(var.ca_certificate)
  }

  install {
    release = file(var.release_plan)
    mirror  = "https://mirror.corp.example/kubewin"
  }

  labels = { "example.com/site" = "dc1" }
  taints = [{ key = "os", value = "windows", effect = "NoSchedule" }]
  drain  = { timeout = "10m" }
}

resource "kubewin_windows_node" "web2" {
  host = "10.20.0.12"

  ssh {
    user           = "Administrator"
    private_key_wo = var.ssh_private_key
    host_key       = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMpawMhyTmRPODRZF/US/5EwullXR7jDBOChUh/jLJBx"
  }

  labels = { "example.com/site" = "dc2" }
}

output "nodes" {
  value = { for n in [kubewin_windows_node.web1, kubewin_windows_node.web2] : n.id => { ready = n.ready, build = n.windows_build, kubernetes = n.kubernetes_version } }
}
