# A cluster in Azure: 3 Ubuntu control planes by kubeadm behind a public Standard load balancer,
# 2 Linux agents, and a Windows pool that joins it, with a route per Windows node in the
# cluster's route table. Credentials come from ARM_* variables or `az login`, as azurerm's.
provider "kubewin" {
  azure {}
}

variable "ssh_public_key" {
  type        = string
  description = "The OpenSSH public key for the Linux machines' admin user (azureuser)."
}

variable "windows_image_id" {
  type        = string
  description = "A Windows image the kubewin Packer plugin published."
}

resource "kubewin_cluster" "prod" {
  name               = "prod"
  kubernetes_version = "1.37.1"

  azure {
    resource_group_name = "kubewin-prod"
    location            = "westeurope"
    dns_prefix          = "kubewin-prod"
    ssh_public_keys     = [var.ssh_public_key]
    masters             = { count = 3, vm_size = "Standard_D4s_v3", zones = ["1", "2", "3"] }
    linux_pool          = { node_count = 2 }
  }
}

resource "kubewin_windows_node_pool" "win" {
  name       = "win"
  cluster_id = kubewin_cluster.prod.id
  node_count = 3

  azure {
    resource_group_name = "kubewin-prod"
    location            = "westeurope"
    vm_size             = "Standard_D4s_v5"
    subnet_id           = kubewin_cluster.prod.azure.agent_subnet_id
    image_id            = var.windows_image_id
  }
}

# The routes follow the pool's node_count, so that they change with it.
resource "kubewin_pod_route" "win" {
  count       = kubewin_windows_node_pool.win.node_count
  name        = kubewin_windows_node_pool.win.nodes[count.index].name
  destination = kubewin_windows_node_pool.win.nodes[count.index].pod_cidr
  next_hop    = kubewin_windows_node_pool.win.nodes[count.index].ip
  azure {
    route_table_id = kubewin_cluster.prod.azure.route_table_id
  }
}

# Admin access for the kubernetes and helm providers, never in the state.
ephemeral "kubewin_cluster_credentials" "prod" {
  cluster_id = kubewin_cluster.prod.id
}

output "endpoint" {
  value = kubewin_cluster.prod.endpoint
}
