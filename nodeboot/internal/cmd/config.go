package cmd

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kubewin/kubewin/internal/api"
	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/ipam"
	"github.com/kubewin/kubewin/internal/nodecmd"
	"github.com/kubewin/kubewin/nodeboot/internal/nodefiles"
)

func newConfig() *cobra.Command {
	c := &cobra.Command{
		Use:   "config",
		Short: "Check and render node configuration",
	}
	c.AddCommand(newConfigValidate(), newConfigRender())
	return c
}

type docFlags struct {
	config, manifest string
}

func (f *docFlags) add(c *cobra.Command, manifestRequired bool) {
	c.Flags().StringVarP(&f.config, "config", "c", "", "NodeConfig file (YAML or JSON)")
	c.Flags().StringVarP(&f.manifest, "manifest", "m", "", "ImageManifest file of the image")
	_ = c.MarkFlagRequired("config")
	if manifestRequired {
		_ = c.MarkFlagRequired("manifest")
	}
}

// load reads, defaults and validates the documents named by the flags, and checks that they
// fit together.
func (f *docFlags) load() (*v1alpha1.NodeConfig, *v1alpha1.ImageManifest, error) {
	b, err := os.ReadFile(f.config)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := api.LoadNodeConfig(b)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", f.config, err)
	}
	if f.manifest == "" {
		return cfg, nil, nil
	}
	if b, err = os.ReadFile(f.manifest); err != nil {
		return nil, nil, err
	}
	m, err := api.LoadImageManifest(b)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", f.manifest, err)
	}
	if errs := v1alpha1.CheckCompatible(cfg, m); len(errs) > 0 {
		return nil, nil, fmt.Errorf("%s does not fit image %s: %w", f.config, f.manifest, errs.ToAggregate())
	}
	return cfg, m, nil
}

func newConfigValidate() *cobra.Command {
	var f docFlags
	c := &cobra.Command{
		Use:   "validate",
		Short: "Check a NodeConfig (and, with --manifest, that it fits the image)",
		Long: `Decode a NodeConfig strictly (unknown fields are errors), fill its defaults and report
every problem with its field path. With --manifest, also check the image manifest and that
the two fit together (runtime, version skew).`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if _, _, err := f.load(); err != nil {
				return err
			}
			_, _ = fmt.Fprintln(c.OutOrStdout(), "valid")
			return nil
		},
	}
	f.add(c, false)
	return c
}

func newConfigRender() *cobra.Command {
	var (
		f                         docFlags
		nodeName, nodeIP, podCIDR string
		outDir                    string
	)
	c := &cobra.Command{
		Use:   "render",
		Short: "Write the files and service command lines nodeboot would set up on this node",
		Long: `Render the kubelet and kube-proxy configuration files and command lines, the CNI
configuration and the runtime configuration for a node, into a directory: each Windows path
C:\a\b becomes <out>/C/a/b, and services.txt lists each service's arguments.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cfg, m, err := f.load()
			if err != nil {
				return err
			}
			facts := nodefiles.Facts{NodeName: nodeName}
			if facts.NodeIP, err = ipam.ParseAddr(nodeIP); err != nil {
				return fmt.Errorf("--node-ip: %w", err)
			}
			if podCIDR == "" {
				podCIDR = cfg.Node.PodCIDR
			}
			if facts.PodCIDR, err = ipam.ParsePrefix(podCIDR); err != nil {
				return fmt.Errorf("--pod-cidr (or node.podCIDR): %w", err)
			}
			if facts.NodeName == "" {
				facts.NodeName = cfg.Node.Name
			}
			if facts.NodeName == "" {
				return fmt.Errorf("--node-name is required when node.name is not set")
			}
			plan, err := nodefiles.Render(cfg, m, facts, nodecmd.DefaultPaths())
			if err != nil {
				return err
			}
			return writePlan(outDir, plan, c)
		},
	}
	f.add(c, true)
	c.Flags().StringVar(&nodeName, "node-name", "", "Node name (default: node.name)")
	c.Flags().StringVar(&nodeIP, "node-ip", "", "the node's IPv4 address")
	c.Flags().StringVar(&podCIDR, "pod-cidr", "", "the node's pod CIDR (default: node.podCIDR)")
	c.Flags().StringVarP(&outDir, "out", "o", "", "directory to write into")
	_ = c.MarkFlagRequired("node-ip")
	_ = c.MarkFlagRequired("out")
	return c
}

func writePlan(dir string, p *nodefiles.Plan, c *cobra.Command) error {
	files := make([]string, 0, len(p.Files))
	for f := range p.Files {
		files = append(files, f)
	}
	slices.Sort(files)
	for _, win := range files {
		local := filepath.Join(dir, localPath(win))
		if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(local, p.Files[win], 0o644); err != nil {
			return err
		}
		_, _ = fmt.Fprintf(c.OutOrStdout(), "wrote %s\n", win)
	}
	var services strings.Builder
	names := make([]string, 0, len(p.Services))
	for n := range p.Services {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(&services, "%s %s\n", n, strings.Join(p.Services[n], " "))
	}
	if err := os.WriteFile(filepath.Join(dir, "services.txt"), []byte(services.String()), 0o644); err != nil {
		return err
	}
	_, _ = fmt.Fprintf(c.OutOrStdout(), "wrote %s\n", filepath.Join(dir, "services.txt"))
	return nil
}

// localPath maps C:\a\b to C/a/b.
func localPath(win string) string {
	return strings.ReplaceAll(strings.Replace(win, ":", "", 1), `\`, "/")
}
