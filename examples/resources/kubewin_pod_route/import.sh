# A route of the local backend is imported as <route_table>/<name>.
terraform import 'kubewin_pod_route.node["win000000"]' windows-pods/win000000

# A route of an Azure route table is imported by its resource ID.
terraform import 'kubewin_pod_route.node["win000000"]' /subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/k8s/providers/Microsoft.Network/routeTables/windows-pods/routes/win000000
