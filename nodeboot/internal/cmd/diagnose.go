package cmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubewin/kubewin/internal/nodecmd"
	"github.com/kubewin/kubewin/nodeboot/internal/diagnose"
)

// DiagnosticsBundle is where `nodeboot diagnose` writes the bundle by default, owner-only; each
// run replaces the last one.
const DiagnosticsBundle = `C:\ProgramData\kubewin\nodeboot\diagnostics.tar.gz`

// BundleLinePrefix starts the last line `nodeboot diagnose` prints when it wrote the bundle to
// a file: the prefix and the bundle's Windows path.
const BundleLinePrefix = "bundle: "

func newDiagnose(f *machineFlags) *cobra.Command {
	var output string
	c := &cobra.Command{
		Use:   "diagnose",
		Short: "Write a diagnostics bundle of this node, without secrets, and print its summary",
		Long: `Diagnose writes one archive (gzipped tar) of what it takes to find out why a node does not
join or work: the join's state and report, the health ` + "`nodeboot run`" + ` last found, the rendered
configuration (NodeConfig, kubelet, kube-proxy, kubeconfig, CNI, containerd), the end of the
kubelet's, kube-proxy's, the runtime's and nodeboot's logs, HNS's networks, endpoints and policy
lists as JSON, the services' states, the routing table and the event log entries about the node
(docs/nodeboot-diagnostics.md lists the files). Bootstrap tokens, private keys and kubeconfig
credentials are removed. It prints the bundle's summary, then "` + BundleLinePrefix + `<path>"; with
--output - it writes the archive to standard output and the summary to standard error. It
changes nothing on the node and works on a node that never joined.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			p, err := f.open()
			if err != nil {
				return err
			}
			in := diagnose.Input{Platform: p, Paths: nodecmd.DefaultPaths(), NodeConfig: f.config}
			if n, err := f.node(c.Context(), io.Discard, false); err != nil {
				in.Problem = err
			} else {
				in.Node = n.Name
				in.Report = n.Report()
				if in.State, err = json.MarshalIndent(n.State(), "", "  "); err != nil {
					return err
				}
				if h, ran, err := n.Health(); err != nil {
					in.Problem = err
				} else if ran {
					in.Health = &h
				}
			}
			now := time.Now()
			in.Now = func() time.Time { return now }
			b := diagnose.Collect(c.Context(), in)
			var archive bytes.Buffer
			if err := b.Write(&archive, now); err != nil {
				return err
			}
			if output == "-" {
				_, _ = fmt.Fprint(c.ErrOrStderr(), b.Summary)
				_, err := c.OutOrStdout().Write(archive.Bytes())
				return err
			}
			if err := p.WriteSecret(output, archive.Bytes()); err != nil {
				return fmt.Errorf("write the diagnostics bundle: %w", err)
			}
			_, _ = fmt.Fprintf(c.OutOrStdout(), "%s%s%s\n", b.Summary, BundleLinePrefix, output)
			return nil
		},
	}
	c.Flags().StringVar(&output, "output", DiagnosticsBundle, `where to write the bundle (a Windows path on the node; "-": standard output)`)
	return c
}
