// Package cmd holds nodeboot's command line.
package cmd

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/kubewin/kubewin/internal/version"
)

// New returns nodeboot's root command.
func New(out, errOut io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "nodeboot",
		Short: "Join a Windows Server node to a Kubernetes cluster and run its components",
		Long: `nodeboot is the agent baked into every kubewin image. It reads the NodeConfig the
provisioner hands the machine and the image manifest baked with it, joins the node
(kubeadm-compatible discovery, CA pinning, TLS bootstrap), prepares the HNS network and CNI
configuration, and runs the kubelet and kube-proxy as Windows services.`,
		SilenceUsage: true,
	}
	root.SetOut(out)
	root.SetErr(errOut)
	var machine machineFlags
	machine.add(root)
	root.AddCommand(newVersion(), newConfig(), newJoin(&machine), newRun(&machine), newStatus(&machine), newReset(&machine), newBake(&machine),
		newDiagnose(&machine), newServiceHost())
	return root
}

func newVersion() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print nodeboot's version",
		Args:  cobra.NoArgs,
		Run: func(c *cobra.Command, _ []string) {
			_, _ = fmt.Fprintln(c.OutOrStdout(), version.Version)
		},
	}
}
