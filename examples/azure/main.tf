# Windows Server nodes on Azure joining an existing cluster: a virtual machine scale set created
# from an image the kubewin Packer plugin published (examples/packer/azure-ws2022.pkr.hcl), and
# a route per node in the route table of the nodes' subnet ("upstream L3 routing" for l2bridge).
#
# Credentials are read as the azurerm provider reads them: ARM_* environment variables (a
# client secret or certificate, OIDC — Terraform Cloud's Azure dynamic credentials need nothing
# more — or a managed identity), or `az login`. The cluster is a kubeadm cluster reachable with
# a kubeconfig (for one without kube-system/kubeadm-config, such as AKS, set the kubernetes block's
# cluster_cidr and service_cidr); its pod network must be routable in the VNet.
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
  description = "Kubeconfig of the cluster the nodes join."
  default     = "~/.kube/config"
}

variable "resource_group_name" {
  type        = string
  description = "Resource group of the scale set."
}

variable "location" {
  type    = string
  default = "westeurope"
}

variable "subnet_id" {
  type        = string
  description = "The nodes' subnet (e.g. azurerm_subnet.nodes.id), with a NAT gateway or a route of 0.0.0.0/0 to a firewall for the nodes' outbound connections (the plan warns when it has neither)."
}

variable "route_table_id" {
  type        = string
  description = "The route table associated with the nodes' subnet (e.g. azurerm_route_table.pods.id)."
}

variable "image_id" {
  type        = string
  description = "The gallery image version the kubewin Packer plugin published, with its kubewin.io/* tags."
}

variable "node_count" {
  type    = number
  default = 3
}

provider "kubewin" {
  kubernetes {
    config_path = var.kubeconfig
  }
  # Subscription and credentials from ARM_* variables, as for azurerm.
  azure {}
}

resource "kubewin_windows_node_pool" "win" {
  name       = "win"
  node_count = var.node_count
  taints     = [{ key = "os", value = "windows", effect = "NoSchedule" }]
  drain      = { timeout = "10m" }

  azure {
    resource_group_name = var.resource_group_name
    location            = var.location
    vm_size             = "Standard_D4s_v5"
    subnet_id           = var.subnet_id
    image_id            = var.image_id
    zones               = ["1", "2", "3"]
  }
}

resource "kubewin_pod_route" "win" {
  count = var.node_count

  name        = kubewin_windows_node_pool.win.nodes[count.index].name
  destination = kubewin_windows_node_pool.win.nodes[count.index].pod_cidr
  next_hop    = kubewin_windows_node_pool.win.nodes[count.index].ip

  azure {
    route_table_id = var.route_table_id
  }
}

output "nodes" {
  value = kubewin_windows_node_pool.win.nodes
}

output "scale_set_id" {
  value = kubewin_windows_node_pool.win.azure.scale_set_id
}
