# The admin credential of a local cluster, handed to the kubernetes provider for this run only.
ephemeral "kubewin_cluster_credentials" "dev" {
  cluster_id = kubewin_cluster.dev.id
}

provider "kubernetes" {
  host                   = ephemeral.kubewin_cluster_credentials.dev.host
  cluster_ca_certificate = ephemeral.kubewin_cluster_credentials.dev.cluster_ca_certificate
  client_certificate     = ephemeral.kubewin_cluster_credentials.dev.client_certificate
  client_key             = ephemeral.kubewin_cluster_credentials.dev.client_key
}
