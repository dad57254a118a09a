# An acs-engine api model's settings, here inline; usually file("windows.json").
locals {
  acs = provider::kubewin::acs_apimodel(jsonencode({
    apiVersion = "vlabs"
    properties = {
      orchestratorProfile = { orchestratorType = "Kubernetes", orchestratorVersion = "1.37.1", kubernetesConfig = { networkPlugin = "kubenet" } }
      masterProfile       = { count = 3, dnsPrefix = "hybrid", vmSize = "Standard_D2s_v3" }
      agentPoolProfiles = [
        { name = "linuxpool", count = 2, vmSize = "Standard_D2s_v3" },
        { name = "winpool", count = 3, vmSize = "Standard_D4s_v5", osType = "Windows", availabilityProfile = "VirtualMachineScaleSets" },
      ]
      windowsProfile = { adminUsername = "azureuser", WindowsSku = "2022-datacenter-core-smalldisk" }
      linuxProfile   = { adminUsername = "azureuser", ssh = { publicKeys = [{ keyData = "" }] } }
    }
  }))
}

output "cluster" {
  value = local.acs.cluster # name "hybrid", 3 masters, a Linux pool of 2, Kubernetes 1.37.1
}

output "windows_pools" {
  value = local.acs.windows_pools # winpool: 3 nodes of Standard_D4s_v5, node names winpool000000, ...
}

output "ignored_fields" {
  value = local.acs.warnings
}
