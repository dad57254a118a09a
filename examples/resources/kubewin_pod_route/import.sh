# A route is imported as <route_table>/<name>.
terraform import 'kubewin_pod_route.node["win000000"]' windows-pods/win000000
