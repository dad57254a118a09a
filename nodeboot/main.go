// Command nodeboot joins a Windows Server machine to a Kubernetes cluster and runs its node
// components. It is baked into every kubewin image.
package main

import (
	"os"

	"github.com/kubewin/kubewin/nodeboot/internal/cmd"
)

func main() {
	if err := cmd.New(os.Stdout, os.Stderr).Execute(); err != nil {
		os.Exit(1)
	}
}
