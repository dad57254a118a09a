package cmd

import (
	"github.com/kubewin/kubewin/nodeboot/internal/platform"
	"github.com/kubewin/kubewin/nodeboot/internal/platform/windows"
)

func windowsPlatform() (platform.Platform, error) { return windows.New(), nil }
