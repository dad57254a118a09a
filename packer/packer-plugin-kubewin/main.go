// Command packer-plugin-kubewin is the kubewin Packer plugin: it bakes Windows Server images
// with everything a Kubernetes node needs, so that first boot downloads nothing. Components:
// the kubewin-release data source, the kubewin-node provisioner and the kubewin-local builder.
//
// The plugin lives in a directory named packer-plugin-kubewin because packer-sdc finds a
// plugin's root by that prefix.
package main

import (
	"fmt"
	"os"

	"github.com/hashicorp/packer-plugin-sdk/plugin"
	packerversion "github.com/hashicorp/packer-plugin-sdk/version"

	"github.com/kubewin/kubewin/internal/version"
	"github.com/kubewin/kubewin/packer/packer-plugin-kubewin/builder/local"
	"github.com/kubewin/kubewin/packer/packer-plugin-kubewin/datasource/release"
	"github.com/kubewin/kubewin/packer/packer-plugin-kubewin/provisioner/node"
)

func main() {
	set := plugin.NewSet()
	set.RegisterDatasource("release", new(release.Datasource))
	set.RegisterProvisioner("node", new(node.Provisioner))
	set.RegisterBuilder("local", new(local.Builder))
	set.SetVersion(packerversion.NewRawVersion(version.Version))
	if err := set.Run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
