//go:build !windows

package cmd

import (
	"errors"

	"github.com/kubewin/kubewin/nodeboot/internal/platform"
)

// windowsPlatform is only available on Windows.
func windowsPlatform() (platform.Platform, error) {
	return nil, errors.New("--platform windows runs only on Windows: use --platform sim with --root here")
}
