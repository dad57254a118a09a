# kubewin end to end on this machine: a real control plane, a pool of SIMULATED Windows Server
# nodes (nodeboot processes whose join is real and whose simulated kubelet runs no containers)
# that join it, and a pod route per node. The README's local path runs it step by step: the
# image from
#   packer build -var-file=bin/release.pkrvars.hcl examples/packer/local.pkr.hcl
# and, with the provider from make build (export TF_CLI_CONFIG_FILE=$PWD/bin/terraformrc),
#   terraform -chdir=examples/local init && terraform -chdir=examples/local apply
terraform {
  required_version = ">= 1.11"
  required_providers {
    kubewin = {
      source = "kubewin/kubewin"
    }
  }
}

variable "image" {
  type        = string
  description = "Image directory built by the kubewin-local Packer builder."
  default     = "../../images/ws2022"
}

variable "node_count" {
  type    = number
  default = 3
}

provider "kubewin" {
  local {
    state_dir = "${path.root}/.kubewin"
    bin_path  = ["${path.root}/../../bin", "${path.root}/../../.testbin"]
  }
}

resource "kubewin_cluster" "demo" {
  name = "demo"
  local {}
}

resource "kubewin_windows_node_pool" "win" {
  name       = "win"
  cluster_id = kubewin_cluster.demo.id
  node_count = var.node_count
  labels     = { "example.com/team" = "windows" }
  drain      = { timeout = "2m" }

  local {
    image = var.image
  }
}

# Upstream L3 routing for l2bridge: each node's pod CIDR goes to the node.
resource "kubewin_pod_route" "node" {
  count       = var.node_count
  name        = kubewin_windows_node_pool.win.nodes[count.index].name
  destination = kubewin_windows_node_pool.win.nodes[count.index].pod_cidr
  next_hop    = kubewin_windows_node_pool.win.nodes[count.index].ip

  local {
    route_table = "windows-pods"
  }
}

output "endpoint" {
  value = kubewin_cluster.demo.endpoint
}

output "nodes" {
  value = kubewin_windows_node_pool.win.nodes
}

output "routes" {
  value = { for r in kubewin_pod_route.node : r.destination => r.next_hop }
}

output "kubeconfig_path" {
  value = kubewin_cluster.demo.kubeconfig_path
}
