terraform {
  required_providers {
    kubewin = {
      source = "kubewin/kubewin"
    }
  }
}

provider "kubewin" {}
