# A node pool of the local backend is imported by its name.
terraform import kubewin_windows_node_pool.win win

# An azure pool is imported by its scale set's resource ID; its settings as last applied are read
# from its cluster (the write-only admin_password_wo is not: set it again in the configuration).
terraform import kubewin_windows_node_pool.win /subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/kubewin-prod/providers/Microsoft.Compute/virtualMachineScaleSets/win
