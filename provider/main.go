// Command terraform-provider-kubewin is the kubewin Terraform provider: Windows Server node
// pools, pod routes and clusters for Kubernetes.
package main

import (
	"context"
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/kubewin/kubewin/internal/version"
	"github.com/kubewin/kubewin/provider/internal/provider"
)

// Address is the provider's registry address.
const Address = "registry.terraform.io/kubewin/kubewin"

func main() {
	var debug bool
	flag.BoolVar(&debug, "debug", false, "start the provider with support for debuggers like delve")
	flag.Parse()
	err := providerserver.Serve(context.Background(), provider.New(version.Version), providerserver.ServeOpts{
		Address: Address,
		Debug:   debug,
	})
	if err != nil {
		log.Fatal(err)
	}
}
