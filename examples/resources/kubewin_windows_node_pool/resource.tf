resource "kubewin_cluster" "dev" {
  name = "dev"
}

# Three Windows Server nodes from an image baked with the kubewin Packer plugin.
resource "kubewin_windows_node_pool" "win" {
  name       = "win"
  cluster_id = kubewin_cluster.dev.id
  image      = "${path.module}/output/kubewin-local"
  node_count = 3

  labels = { "example.com/team" = "web" }
  taints = [{ key = "os", value = "windows", effect = "NoSchedule" }]

  drain = {
    timeout           = "10m"
    ignore_daemonsets = true
  }
  max_surge = 1

  timeouts = {
    create = "15m"
  }
}

# Upstream L3 routing: each node's pod CIDR through the node.
resource "kubewin_pod_route" "win" {
  for_each = { for n in kubewin_windows_node_pool.win.nodes : n.name => n }

  route_table = "windows-pods"
  name        = each.key
  destination = each.value.pod_cidr
  next_hop    = each.value.ip
}
