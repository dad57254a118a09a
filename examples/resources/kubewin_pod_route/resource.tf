# Upstream L3 routing for an l2bridge pool: one route per node, pod CIDR -> node IP, in a route
# table of the local backend.
resource "kubewin_pod_route" "node" {
  for_each = {
    win000000 = { pod_cidr = "10.244.3.0/24", ip = "10.240.0.4" }
    win000001 = { pod_cidr = "10.244.4.0/24", ip = "10.240.0.5" }
  }

  name        = each.key
  destination = each.value.pod_cidr
  next_hop    = each.value.ip

  local {
    route_table = "windows-pods"
  }
}
