resource "kubewin_cluster" "dev" {
  name = "dev"
  local {}
}

# Three simulated Windows Server nodes on this host (the local backend), from an image baked
# with the kubewin Packer plugin's kubewin-local builder.
resource "kubewin_windows_node_pool" "win" {
  name       = "win"
  cluster_id = kubewin_cluster.dev.id
  node_count = 3

  local {
    image = "${path.module}/output/kubewin-local"
  }

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

# Upstream L3 routing: each node's pod CIDR through the node. Node names are known only after
# the pool is created, so the routes follow the node count (for_each over the names would not
# plan in the same apply).
resource "kubewin_pod_route" "win" {
  count = kubewin_windows_node_pool.win.node_count

  name        = kubewin_windows_node_pool.win.nodes[count.index].name
  destination = kubewin_windows_node_pool.win.nodes[count.index].pod_cidr
  next_hop    = kubewin_windows_node_pool.win.nodes[count.index].ip

  local {
    route_table = "windows-pods"
  }
}
