terraform {
  required_providers {
    kubewin = {
      source = "kubewin/kubewin"
    }
  }
}

provider "kubewin" {
  # The local backend: clusters and simulated Windows machines on this machine.
  local {
    state_dir = "${path.root}/.kubewin"
    bin_path  = ["${path.root}/../../bin", "${path.root}/../../.testbin"]
  }
}
