# Windows Server 2025 + containerd, published to an Azure Compute Gallery:
#   az login && packer init . && packer build -var subscription_id=... -var resource_group=... \
#     -var gallery_name=... examples/packer/azure-ws2025.pkr.hcl
# The gallery image definition (Hyper-V generation V2) must exist.
packer {
  required_plugins {
    azure = {
      source  = "github.com/hashicorp/azure"
      version = ">= 2.3.0"
    }
    kubewin = {
      source  = "github.com/kubewin/kubewin"
      version = ">= 0.1.0"
    }
  }
}

variable "subscription_id" {
  type = string
}

variable "resource_group" {
  type        = string
  description = "Resource group of the gallery."
}

variable "gallery_name" {
  type = string
}

variable "location" {
  type    = string
  default = "westeurope"
}

variable "kubernetes_version" {
  type    = string
  default = "v1.37.1"
}

variable "image_version" {
  type    = string
  default = "1.0.0"
}

variable "hyperv_isolation" {
  type        = bool
  default     = false
  description = "Bake Hyper-V isolation too (the Hyper-V feature and containerd's runhcs-wcow-hypervisor handler): down-level container images run under RuntimeClass windows-hyperv. The build VM and the pool's VMs need a size with nested virtualization (Standard_D4s_v5 has it)."
}

# With hyperv_isolation the release plans both isolation modes: the kubewin-node provisioner bakes
# Hyper-V from it, and its azure_tags say so in kubewin.io/isolation.
data "kubewin-release" "node" {
  kubernetes_version = var.kubernetes_version
  windows_version    = "2025"
  runtime            = "containerd"
  hyperv_isolation   = var.hyperv_isolation
}

source "azure-arm" "ws2025" {
  use_azure_cli_auth = true
  subscription_id    = var.subscription_id
  location           = var.location
  vm_size            = "Standard_D4s_v5"

  os_type         = "Windows"
  image_publisher = "MicrosoftWindowsServer"
  image_offer     = "WindowsServer"
  image_sku       = "2025-datacenter-core-g2"

  communicator   = "winrm"
  winrm_use_ssl  = true
  winrm_insecure = true
  winrm_timeout  = "10m"
  winrm_username = "packer"

  # kubewin's azure backend reads the image's Windows build, Kubernetes version, runtime and
  # isolation modes from these tags, which go on the gallery image version too.
  azure_tags = data.kubewin-release.node.azure_tags

  shared_image_gallery_destination {
    subscription   = var.subscription_id
    resource_group = var.resource_group
    gallery_name   = var.gallery_name
    image_name     = "kubewin-ws2025-containerd"
    image_version  = var.image_version
  }
}

build {
  sources = ["source.azure-arm.ws2025"]

  # Containers feature (with Hyper-V when the release asks for it; one restart), containerd, CNI plugins, node binaries,
  # pause image for build 26100, nodeboot: all fetched by the VM itself, verified.
  provisioner "kubewin-node" {
    release           = data.kubewin-release.node.manifest
    elevated_user     = build.User
    elevated_password = build.Password
    manifest_output   = "kubewin-ws2025-manifest.json"
  }

  # Generalize last: the guest agent must be running, and no restart may be pending.
  provisioner "powershell" {
    inline = [
      "foreach ($service in Get-Service -Name RdAgent, WindowsAzureGuestAgent -ErrorAction SilentlyContinue) { while ((Get-Service $service.Name).Status -ne 'Running') { Start-Sleep -Seconds 5 } }",
      "& $env:SystemRoot\\System32\\Sysprep\\Sysprep.exe /oobe /generalize /quiet /quit /mode:vm",
      "while ($true) { $state = (Get-ItemProperty HKLM:\\SOFTWARE\\Microsoft\\Windows\\CurrentVersion\\Setup\\State).ImageState; if ($state -ne 'IMAGE_STATE_GENERALIZE_RESEAL_TO_OOBE') { Write-Output $state; Start-Sleep -Seconds 10 } else { break } }",
    ]
  }
}
