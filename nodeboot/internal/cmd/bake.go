package cmd

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/kubewin/kubewin/internal/nodecmd"
	"github.com/kubewin/kubewin/nodeboot/internal/bake"
)

func newBake(f *machineFlags) *cobra.Command {
	var (
		manifest  string
		pullPause string
		opts      bake.FetchOptions
	)
	c := &cobra.Command{
		Use:   "bake",
		Short: "Prepare this machine as a kubewin image (run by the Packer plugin)",
		Long: `Bake gets the payload an image manifest lists onto this machine and verifies every file's
sha256: files already present (uploaded by Packer) are checked, missing ones are downloaded
from their source URLs or a mirror, several at once, resuming interrupted downloads; a file
whose content differs from the manifest stops the bake, naming it. With --pull-pause the pause
image (the manifest's reference and digest) is pulled from its registry into the payload as an
OCI archive. Archives the manifest marks for unpacking (containerd, CNI plugins) are extracted.
Bake then installs the final manifest, prepares the node's directories, firewall rules and
antivirus exclusions, configures the runtime, imports the pause image and the workload images
the manifest lists (their archives, uploaded by Packer) into the runtime's image store, and
registers nodeboot to start at every boot: the first boot joins the node and downloads nothing.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			p, err := f.open()
			if err != nil {
				return err
			}
			m, ok := p.(bake.Machine)
			if !ok {
				return fmt.Errorf("platform %s cannot bake images", f.platform)
			}
			doc, err := os.ReadFile(manifest)
			if err != nil {
				return err
			}
			if err := installEventSource(); err != nil {
				return fmt.Errorf("register the nodeboot event source: %w", err)
			}
			ctx, stop := signalContext()
			defer stop()
			_, err = bake.Bake(ctx, bake.Options{Machine: m, Paths: nodecmd.DefaultPaths(), Manifest: doc, Fetch: opts, PullPause: pullPause,
				Out: c.OutOrStdout()})
			return err
		},
	}
	c.Flags().StringVarP(&manifest, "manifest", "m", "", "image manifest file (a local path)")
	c.Flags().StringVar(&opts.Mirror, "mirror", "", "fetch every file from <mirror>/<path> instead of its source URL")
	c.Flags().IntVar(&opts.Parallel, "parallel", 4, "files downloaded at once")
	c.Flags().StringVar(&pullPause, "pull-pause", "", "pull the manifest's pause image into an OCI archive at this payload path and add it to the image")
	_ = c.MarkFlagRequired("manifest")
	return c
}
