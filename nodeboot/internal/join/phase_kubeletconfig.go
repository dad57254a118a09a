package join

import (
	"context"

	"github.com/kubewin/kubewin/internal/nodestatus"
	"github.com/kubewin/kubewin/nodeboot/internal/platform"
)

// kubeletConfigData is what the kubelet-config phase reads.
type kubeletConfigData interface {
	renderData
	machine() platform.Platform
}

// runKubeletConfig writes the kubelet, kube-proxy and runtime configuration: the rendered
// files other than the CNI configuration, which the network phase writes.
func runKubeletConfig(_ context.Context, d kubeletConfigData) error {
	p, err := plan(d)
	if err != nil {
		return nodestatus.Errorf(nodestatus.CodeKubeletConfigFailed, "%w", err)
	}
	return writeFiles(d.machine(), d.paths(), p, false, nodestatus.CodeKubeletConfigFailed)
}
