// Command containerdconfig (containerd 2.x) loads a containerd configuration file with
// containerd's own loader and decodes the CRI plugins' sections into containerd's own plugin
// configuration types, then prints them as JSON: the configuration containerd would run with.
// A key containerd does not know is dropped here as containerd drops it.
//
// It is its own module so that a test can build it against each containerd minor the images
// may ship (go run -modfile=go.<minor>.mod .).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	srvconfig "github.com/containerd/containerd/v2/cmd/containerd/server/config"
	_ "github.com/containerd/containerd/v2/plugins/cri/images"
	_ "github.com/containerd/containerd/v2/plugins/cri/runtime"
	"github.com/containerd/plugin"
	"github.com/containerd/plugin/registry"
)

func main() {
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(path string) error {
	ctx := context.Background()
	var c srvconfig.Config
	if err := srvconfig.LoadConfig(ctx, path, &c); err != nil {
		return err
	}
	if err := c.ValidateVersion(); err != nil {
		return err
	}
	out := map[string]any{"version": c.Version}
	for _, r := range registry.Graph(func(*plugin.Registration) bool { return false }) {
		if r.Config == nil {
			continue
		}
		decoded, err := c.Decode(ctx, r.URI(), r.Config)
		if err != nil {
			return fmt.Errorf("plugin %s: %w", r.URI(), err)
		}
		out[r.URI()] = decoded
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}
