# A cluster of the local backend is imported by its name.
terraform import kubewin_cluster.dev dev
