# The manifest `packer build` wrote next to the image.
data "kubewin_image_manifest" "ws2022" {
  path = "${path.module}/output/kubewin-manifest.json"
}

output "image" {
  value = "Windows Server ${data.kubewin_image_manifest.ws2022.windows_release} with Kubernetes ${data.kubewin_image_manifest.ws2022.kubernetes_version} on ${data.kubewin_image_manifest.ws2022.runtime}"
}
