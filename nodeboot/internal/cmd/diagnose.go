package cmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubewin/kubewin/internal/nodecmd"
	"github.com/kubewin/kubewin/internal/nodestatus"
	"github.com/kubewin/kubewin/nodeboot/internal/diagnose"
)

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
credentials are removed. It prints the bundle's summary, the join report as one line
("` + nodestatus.SerialPrefix + `<json>"), then "` + nodestatus.BundleLinePrefix + `<path>"; with --output - it
writes the archive to standard output and the rest to standard error. It changes nothing on the
node and works on a node that never joined.`,
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
			// The summary, then the report as one line, for a provisioner to read (the serial
			// console's line, which the report is not written to on Azure: EMS holds COM1).
			text := b.Summary
			if in.Report != nil {
				line, err := nodestatus.SerialLine(in.Report)
				if err != nil {
					return err
				}
				text += string(line)
			}
			if output == "-" {
				_, _ = fmt.Fprint(c.ErrOrStderr(), text)
				_, err := c.OutOrStdout().Write(archive.Bytes())
				return err
			}
			if err := p.WriteSecret(output, archive.Bytes()); err != nil {
				return fmt.Errorf("write the diagnostics bundle: %w", err)
			}
			_, _ = fmt.Fprintf(c.OutOrStdout(), "%s%s%s\n", text, nodestatus.BundleLinePrefix, output)
			return nil
		},
	}
	c.Flags().StringVar(&output, "output", nodecmd.DefaultPaths().DiagnosticsBundle(),
		`where to write the bundle (a Windows path on the node; "-": standard output)`)
	return c
}
