package cmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kubewin/kubewin/internal/api"
	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/nodecmd"
	"github.com/kubewin/kubewin/nodeboot/internal/join"
	"github.com/kubewin/kubewin/nodeboot/internal/platform"
)

// machineFlags select the machine nodeboot acts on.
type machineFlags struct {
	platform string
	root     string
	config   string
}

func (f *machineFlags) add(c *cobra.Command) {
	c.PersistentFlags().StringVar(&f.platform, "platform", platforms[0], `the machine: `+strings.Join(platforms, ", ")+
		` ("sim" is a simulated machine of the local backend, with --root; nodeboot.exe has only "windows")`)
	c.PersistentFlags().StringVar(&f.root, "root", "", "system drive of the simulated machine (--platform sim)")
	c.PersistentFlags().StringVar(&f.config, "config", nodecmd.DefaultPaths().CustomData, "NodeConfig path on the node (Windows path)")
}

func (f *machineFlags) open() (platform.Platform, error) {
	if !slices.Contains(platforms, f.platform) {
		return nil, fmt.Errorf("--platform %q: this nodeboot knows %s", f.platform, strings.Join(platforms, ", "))
	}
	return openPlatform(f.platform, f.root)
}

// node loads the machine's NodeConfig and image manifest and opens its join state. A joined
// node's NodeConfig no longer holds the bootstrap token. With firstBoot it first waits for
// Windows setup and the NodeConfig (waitFirstBoot).
func (f *machineFlags) node(ctx context.Context, out io.Writer, firstBoot bool) (*join.Node, error) {
	p, err := f.open()
	if err != nil {
		return nil, err
	}
	// Progress and reports also go to the serial console, which a cloud keeps when nothing else
	// of the machine can be seen.
	out = withEventLog(out)
	serial := serialConsole(f.root)
	if serial != nil {
		out = io.MultiWriter(out, serial)
	}
	if firstBoot {
		if err := waitFirstBoot(ctx, p, out, f.config); err != nil {
			return nil, err
		}
	}
	paths := nodecmd.DefaultPaths()
	raw, err := os.ReadFile(p.Path(f.config))
	if err != nil {
		return nil, fmt.Errorf("read the NodeConfig: %w", err)
	}
	cfg, err := api.DecodeNodeConfig(raw)
	if err != nil {
		return nil, err
	}
	cfg.Default()
	raw, err = os.ReadFile(p.Path(paths.ImageManifest))
	if err != nil {
		return nil, fmt.Errorf("read the image manifest: %w", err)
	}
	m, err := api.LoadImageManifest(raw)
	if err != nil {
		return nil, err
	}
	name := cfg.Node.Name
	if name == "" {
		if name, err = nodeName(ctx, p, out); err != nil {
			return nil, err
		}
	}
	n := &join.Node{Config: cfg, Manifest: m, Platform: p, Paths: paths, Name: name, Out: out, Serial: serial, Timeouts: join.DefaultTimeouts}
	if err := n.Open(); err != nil {
		return nil, err
	}
	errs := cfg.Validate()
	if n.State().Done(join.PhaseTLSBootstrap) {
		errs = errs.Filter(func(e error) bool { return strings.Contains(e.Error(), "cluster.bootstrapToken") })
	}
	if len(errs) > 0 {
		return nil, &api.ValidationError{Kind: v1alpha1.KindNodeConfig, Errs: errs}
	}
	return n, nil
}

// scrubToken removes the bootstrap token from the NodeConfig on disk once the node has its own
// credentials: it is never needed again and must not outlive the join.
func (f *machineFlags) scrubToken(n *join.Node) error {
	if n.Config.Cluster.BootstrapToken == "" {
		return nil
	}
	scrubbed := *n.Config
	scrubbed.Cluster.BootstrapToken = ""
	b, err := api.EncodeJSON(scrubbed)
	if err != nil {
		return err
	}
	if err := n.Platform.WriteSecret(f.config, b); err != nil {
		return fmt.Errorf("remove the bootstrap token from %s: %w", f.config, err)
	}
	n.Config.Cluster.BootstrapToken = ""
	return nil
}
