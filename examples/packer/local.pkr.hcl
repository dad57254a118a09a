# A kubewin image for the Terraform provider's local backend, baked on this machine into
# images/ws2022, where examples/local looks for it. Without a network, from the release mirror
# on 127.0.0.1 that make release-mirror starts (the Windows node binaries make testenv builds and
# make build's nodeboot), as the README's local path and make demo do:
#   packer build -var-file=bin/release.pkrvars.hcl examples/packer/local.pkr.hcl
# Without the variables file it downloads from upstream (release_base_urls), nodeboot from
# kubewin's GitHub releases: set nodeboot_version to a released version.
packer {
  required_plugins {
    kubewin = {
      source  = "github.com/kubewin/kubewin"
      version = ">= 0.1.0"
    }
  }
}

variable "kubernetes_version" {
  type    = string
  default = "v1.37.1"
}

variable "windows_version" {
  type    = string
  default = "2022"
}

variable "output_directory" {
  type    = string
  default = "images/ws2022"
}

variable "nodeboot_path" {
  type        = string
  description = "nodeboot for this machine (make build writes bin/nodeboot)."
  default     = "bin/nodeboot"
}

# Where the release comes from: upstream by default, or a mirror (bin/release.pkrvars.hcl sets
# the local one).
variable "release_base_urls" {
  type = object({
    kubernetes  = string
    containerd  = string
    cni_plugins = string
    nodeboot    = string
  })
  default = {
    kubernetes  = "https://dl.k8s.io/release"
    containerd  = "https://github.com/containerd/containerd/releases/download"
    cni_plugins = "https://github.com/containernetworking/plugins/releases/download"
    nodeboot    = "https://github.com/kubewin/kubewin/releases/download"
  }
}

variable "nodeboot_version" {
  type    = string
  default = null
}

variable "pause_image" {
  type    = string
  default = "registry.k8s.io/pause:3.10.2"
}

data "kubewin-release" "node" {
  kubernetes_version   = var.kubernetes_version
  windows_version      = var.windows_version
  nodeboot_version     = var.nodeboot_version
  pause_image          = var.pause_image
  kubernetes_base_url  = var.release_base_urls.kubernetes
  containerd_base_url  = var.release_base_urls.containerd
  cni_plugins_base_url = var.release_base_urls.cni_plugins
  nodeboot_base_url    = var.release_base_urls.nodeboot
}

source "kubewin-local" "node" {
  output_directory = var.output_directory
  windows_version  = var.windows_version
  nodeboot_path    = var.nodeboot_path
}

build {
  sources = ["source.kubewin-local.node"]

  provisioner "kubewin-node" {
    release         = data.kubewin-release.node.manifest
    transfer        = "host-cache"
    manifest_output = "${var.output_directory}.manifest.json"
  }
}
