package cmd

import (
	"io"
	"os"

	"github.com/kubewin/kubewin/nodeboot/internal/platform"
	"github.com/kubewin/kubewin/nodeboot/internal/platform/windows"
)

// platforms are the machines this nodeboot runs on. nodeboot.exe runs only on Windows: the
// simulated machine (and its simulated kubelet) is not built into it.
var platforms = []string{"windows"}

func openPlatform(string, string) (platform.Platform, error) { return windows.Native(), nil }

// serialConsole is the machine's first serial port, which Azure's boot diagnostics (and other
// clouds' serial consoles) record; nil when the machine has none.
func serialConsole(string) io.Writer {
	f, err := os.OpenFile("COM1", os.O_WRONLY, 0)
	if err != nil {
		return nil
	}
	return f
}
