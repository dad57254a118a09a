# A node pool of the local backend is imported by its name.
terraform import kubewin_windows_node_pool.win win
