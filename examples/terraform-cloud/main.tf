# A Windows node pool on Azure, applied by a Terraform Cloud (HCP Terraform) workspace with Azure
# dynamic credentials: the run gets a short-lived OIDC token for the workspace and exchanges it
# for an Entra token, so no Azure secret is stored anywhere. See README.md for the workspace's
# variables and the Entra application's federated credentials.
terraform {
  required_version = ">= 1.11"

  cloud {
    organization = "acme"
    workspaces {
      name = "windows-nodes"
    }
  }

  required_providers {
    kubewin = {
      source  = "kubewin/kubewin"
      version = ">= 0.1.0"
    }
  }
}

# The cluster the nodes join, a kubeadm cluster whose API server the runners reach at plan time
# too, with a token of the service account the Terraform Cloud guide's RBAC manifest makes
# (docs/guides/terraform-cloud.md). Set them as workspace variables, the token sensitive.
variable "cluster_endpoint" {
  type = string
}

variable "cluster_ca_certificate" {
  type = string
}

variable "cluster_token" {
  type      = string
  sensitive = true
}

variable "resource_group_name" {
  type = string
}

variable "location" {
  type    = string
  default = "westeurope"
}

variable "subnet_id" {
  type = string
}

variable "route_table_id" {
  type = string
}

variable "image_id" {
  type = string
}

provider "kubewin" {
  kubernetes {
    host                   = var.cluster_endpoint
    cluster_ca_certificate = var.cluster_ca_certificate
    token                  = var.cluster_token
  }
  # The run's client ID and OIDC token (injected by Terraform Cloud) and ARM_SUBSCRIPTION_ID and
  # ARM_TENANT_ID (workspace variables) are read as the azurerm provider reads them; use_oidc
  # exchanges the token for an Entra token.
  azure {
    use_oidc = true
  }
}

resource "kubewin_windows_node_pool" "win" {
  name       = "win"
  node_count = 3
  taints     = [{ key = "os", value = "windows", effect = "NoSchedule" }]

  azure {
    resource_group_name = var.resource_group_name
    location            = var.location
    vm_size             = "Standard_D4s_v5"
    subnet_id           = var.subnet_id
    image_id            = var.image_id
  }
}

# The routes follow the pool's node_count.
resource "kubewin_pod_route" "win" {
  count = kubewin_windows_node_pool.win.node_count

  name        = kubewin_windows_node_pool.win.nodes[count.index].name
  destination = kubewin_windows_node_pool.win.nodes[count.index].pod_cidr
  next_hop    = kubewin_windows_node_pool.win.nodes[count.index].ip

  azure {
    route_table_id = var.route_table_id
  }
}
