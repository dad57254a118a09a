# A cluster on this machine, for development, demos and CI.
resource "kubewin_cluster" "dev" {
  name         = "dev"
  cluster_cidr = "10.244.0.0/16"
  service_cidr = "10.96.0.0/12"
  local {}
}

output "endpoint" {
  value = kubewin_cluster.dev.endpoint
}

output "kubeconfig" {
  value = kubewin_cluster.dev.kubeconfig_path
}
