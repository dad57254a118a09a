// Command containerdconfig (containerd 1.7) loads a containerd configuration file with
// containerd's own loader and decodes the CRI plugin's section into containerd's own plugin
// configuration type, registered as pkg/cri/cri.go registers it, then prints it as JSON: the
// configuration containerd would run with. A key containerd does not know is dropped here as
// containerd drops it.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	criconfig "github.com/containerd/containerd/pkg/cri/config"
	"github.com/containerd/containerd/plugin"
	srvconfig "github.com/containerd/containerd/services/server/config"
)

func main() {
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(path string) error {
	var c srvconfig.Config
	if err := srvconfig.LoadConfig(path, &c); err != nil {
		return err
	}
	if err := c.ValidateV2(); err != nil {
		return err
	}
	cri := criconfig.DefaultConfig()
	r := &plugin.Registration{Type: plugin.GRPCPlugin, ID: "cri", Config: &cri}
	decoded, err := c.Decode(r)
	if err != nil {
		return fmt.Errorf("plugin %s: %w", r.URI(), err)
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]any{"version": c.Version, r.URI(): decoded})
}
