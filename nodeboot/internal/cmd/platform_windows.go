package cmd

import (
	"github.com/kubewin/kubewin/nodeboot/internal/platform"
	"github.com/kubewin/kubewin/nodeboot/internal/platform/windows"
)

// platforms are the machines this nodeboot runs on. nodeboot.exe runs only on Windows: the
// simulated machine (and its simulated kubelet) is not built into it.
var platforms = []string{"windows"}

func openPlatform(string, string) (platform.Platform, error) { return windows.Native(), nil }
