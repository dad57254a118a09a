//go:build !windows

package cmd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/kubewin/kubewin/nodeboot/internal/platform"
	"github.com/kubewin/kubewin/nodeboot/internal/platform/sim"
)

// platforms are the machines this nodeboot runs on, the default first. Off Windows there is only
// the local backend's simulated machine.
var platforms = []string{"sim", "windows"}

func openPlatform(name, root string) (platform.Platform, error) {
	switch {
	case name == "windows":
		return nil, errors.New("--platform windows runs only on Windows: use --platform sim with --root here")
	case root == "":
		return nil, fmt.Errorf("--platform sim needs --root, the simulated machine's system drive")
	}
	return sim.Load(root)
}

// serialConsole is the simulated machine's serial console: a file next to its description,
// which the test ARM server's boot diagnostics serve.
func serialConsole(root string) io.Writer {
	if root == "" {
		return nil
	}
	f, err := os.OpenFile(filepath.Join(root, filepath.FromSlash(sim.SerialLog)), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil
	}
	return f
}
