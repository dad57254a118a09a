//go:build tools

package tools

import (
	_ "github.com/Microsoft/hcsshim/cmd/containerd-shim-runhcs-v1"
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
	_ "github.com/containernetworking/plugins/plugins/ipam/host-local"
	_ "github.com/containernetworking/plugins/plugins/main/windows/win-bridge"
	_ "github.com/containernetworking/plugins/plugins/main/windows/win-overlay"
)
