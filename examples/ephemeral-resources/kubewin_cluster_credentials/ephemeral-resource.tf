resource "kubewin_cluster" "dev" {
  name = "dev"
  local {}
}

# The admin credential of a local cluster, for this run only: never in the plan or the state.
ephemeral "kubewin_cluster_credentials" "dev" {
  cluster_id = kubewin_cluster.dev.id
}

# Any provider that connects to Kubernetes takes it the same way (the kubernetes and helm
# providers have the same four arguments); here, a second configuration of this provider.
provider "kubewin" {
  alias = "dev_admin"
  kubernetes {
    host                   = ephemeral.kubewin_cluster_credentials.dev.host
    cluster_ca_certificate = ephemeral.kubewin_cluster_credentials.dev.cluster_ca_certificate
    client_certificate     = ephemeral.kubewin_cluster_credentials.dev.client_certificate
    client_key             = ephemeral.kubewin_cluster_credentials.dev.client_key
  }
}
