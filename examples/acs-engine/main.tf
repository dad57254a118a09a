# The original guides' hybrid cluster, from the acs-engine api model they deploy (windows.json),
# made by kubewin: Linux control planes by kubeadm behind a load balancer, a Linux agent pool for
# CoreDNS, and the model's Windows pool as a scale set of the kubewin image, with a route per
# Windows node in the cluster's route table (kubenet-style routing, l2bridge on Windows).
#
# windows.json is the guides' file with its placeholders filled in. The function drops its
# administrator password with a warning (a function's result, which Terraform stores, holds no
# secret); give a Windows password with the pools' write-only azure.admin_password_wo if you need
# one. Its Kubernetes 1.11.1 is long unsupported, so the cluster takes var.kubernetes_version.
#
# Credentials are read as the azurerm provider reads them (ARM_* variables or `az login`);
# windows_image_id is an image the kubewin Packer plugin published
# (examples/packer/azure-ws2022.pkr.hcl).
terraform {
  required_version = ">= 1.11"
  required_providers {
    kubewin = {
      source = "kubewin/kubewin"
    }
  }
}

variable "resource_group_name" {
  type        = string
  description = "An existing resource group for the cluster."
}

variable "location" {
  type    = string
  default = "westeurope"
}

variable "kubernetes_version" {
  type        = string
  description = "Kubernetes release of the cluster, when the api model names none kubewin supports."
  default     = "1.37.1"
}

variable "windows_image_id" {
  type        = string
  description = "The Windows image the kubewin Packer plugin published, for pools whose model names none."
}

provider "kubewin" {
  azure {}
}

locals {
  acs = provider::kubewin::acs_apimodel(file("${path.module}/windows.json"))
}

# What kubewin ignores of the model, named field by field.
check "api_model" {
  assert {
    condition     = length(local.acs.warnings) == 0
    error_message = "windows.json has fields kubewin ignores:\n${join("\n", local.acs.warnings)}"
  }
}

resource "kubewin_cluster" "acs" {
  name               = local.acs.cluster.name
  kubernetes_version = coalesce(local.acs.cluster.kubernetes_version, var.kubernetes_version)
  cluster_cidr       = local.acs.cluster.cluster_cidr
  service_cidr       = local.acs.cluster.service_cidr

  azure {
    resource_group_name             = var.resource_group_name
    location                        = coalesce(local.acs.cluster.location, var.location)
    dns_prefix                      = local.acs.cluster.azure.dns_prefix
    api_server_access               = local.acs.cluster.azure.api_server_access
    api_server_authorized_ip_ranges = local.acs.cluster.azure.api_server_authorized_ip_ranges
    vnet_cidr                       = local.acs.cluster.azure.vnet_cidr
    admin_username                  = local.acs.cluster.azure.admin_username
    ssh_public_keys                 = local.acs.cluster.azure.ssh_public_keys
    masters                         = local.acs.cluster.azure.masters
    linux_pool                      = local.acs.cluster.azure.linux_pool
  }
}

resource "kubewin_windows_node_pool" "acs" {
  for_each = { for p in local.acs.windows_pools : p.name => p }

  name               = each.value.name
  node_name_prefix   = each.value.node_name_prefix
  cluster_id         = kubewin_cluster.acs.id
  node_count         = each.value.node_count
  max_pods           = each.value.max_pods
  labels             = each.value.labels
  kubelet_extra_args = each.value.kubelet_extra_args

  azure {
    resource_group_name            = var.resource_group_name
    location                       = kubewin_cluster.acs.azure.location
    vm_size                        = each.value.azure.vm_size
    subnet_id                      = coalesce(each.value.azure.subnet_id, kubewin_cluster.acs.azure.agent_subnet_id)
    image_id                       = coalesce(each.value.azure.image_id, var.windows_image_id)
    zones                          = each.value.azure.zones
    os_disk_size_gb                = each.value.azure.os_disk_size_gb
    os_disk_caching                = each.value.azure.os_disk_caching
    admin_username                 = each.value.azure.admin_username
    priority                       = each.value.azure.priority
    max_bid_price                  = each.value.azure.max_bid_price
    accelerated_networking_enabled = each.value.azure.accelerated_networking_enabled
    tags                           = each.value.azure.tags
  }
}

locals {
  windows_nodes = flatten([for p in kubewin_windows_node_pool.acs : p.nodes])
}

# Upstream L3 routing: each Windows node's pod CIDR to the node (the cluster routes its Linux
# agents' itself).
resource "kubewin_pod_route" "windows" {
  count = sum(concat([0], [for p in local.acs.windows_pools : p.node_count]))

  name        = local.windows_nodes[count.index].name
  destination = local.windows_nodes[count.index].pod_cidr
  next_hop    = local.windows_nodes[count.index].ip

  azure {
    route_table_id = kubewin_cluster.acs.azure.route_table_id
  }
}

output "endpoint" {
  value = kubewin_cluster.acs.endpoint
}

output "ca_cert_hash" {
  value = kubewin_cluster.acs.ca_cert_hash
}

output "windows_nodes" {
  value = local.windows_nodes
}

output "windows_image" {
  description = "What the Windows image should be baked from, as the api model says."
  value       = local.acs.windows_image
}
