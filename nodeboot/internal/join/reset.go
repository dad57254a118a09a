package join

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/nodeboot/internal/platform"
)

// nodebootService is nodeboot's own service, which the bake registers.
const nodebootService = "nodeboot"

// Reset returns the machine to the state its image left it in, undoing everything the join and
// `nodeboot run` did on it, as kubeadm reset does on Linux and Windows setups' reset scripts do
// (microsoft/SDN Kubernetes/flannel/l2bridge/reset.ps1, aks-engine windowsnodereset.ps1): it
// stops nodeboot's own service (registered by the bake, it stays, stopped, to join again at the
// next boot), removes the node services (newest first), the pods' containers, kube-proxy's load
// balancers and the pods' endpoints, the kubewin routes, the pod network and the External
// bootstrap network (which takes the vSwitch down and gives the adapter its address back), the
// files the join wrote (component configuration, CNI configuration, the kubelet's credentials
// and certificates, the cluster CA, the join state and the health file), the kubelet's root
// directory (pod directories) and CNI's state (address leases, result cache). What the bake
// installed stays. The cluster is not touched.
func (n *Node) Reset(ctx context.Context) error {
	// nodeboot run reprograms routes and restarts services: it stops first.
	if err := n.Platform.Services().Stop(ctx, nodebootService); err != nil {
		return fmt.Errorf("stop the %s service: %w", nodebootService, err)
	}
	var errs []error
	if specs, err := serviceSpecs(n); err == nil {
		slices.Reverse(specs)
		for _, s := range specs {
			if err := n.Platform.Services().Delete(ctx, s.Name); err != nil {
				errs = append(errs, fmt.Errorf("remove service %s: %w", s.Name, err))
			}
		}
	} else {
		// Without the join's facts the command lines cannot be rendered, but the services may
		// exist: remove them by name.
		for _, name := range []string{"kube-proxy", "kubelet", "cri-dockerd"} {
			if err := n.Platform.Services().Delete(ctx, name); err != nil {
				errs = append(errs, fmt.Errorf("remove service %s: %w", name, err))
			}
		}
	}
	if err := n.Platform.RemovePods(ctx, n.Config.Runtime.Name); err != nil {
		errs = append(errs, err)
	}
	if _, err := n.Platform.Routes().Replace(ctx, nil); err != nil {
		errs = append(errs, fmt.Errorf("remove the kubewin routes: %w", err))
	}
	if n.Config.Network.Mode != v1alpha1.NetworkModeExternal {
		if err := n.Platform.Network().RemovePodState(ctx, n.Config.Network.Name); err != nil {
			errs = append(errs, fmt.Errorf("remove the pods' endpoints and load balancers: %w", err))
		}
		for _, name := range []string{n.Config.Network.Name, platform.BootstrapNetworkName} {
			if err := n.Platform.Network().Delete(ctx, name); err != nil {
				errs = append(errs, fmt.Errorf("delete HNS network %s: %w", name, err))
			}
		}
	}
	for _, f := range n.joinFiles() {
		if err := n.Platform.RemoveFile(f); err != nil {
			errs = append(errs, err)
		}
	}
	for _, dir := range []string{n.Paths.KubeletRootDir, n.Paths.CNIStateDir} {
		if err := n.Platform.RemoveAll(dir); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	_, _ = fmt.Fprintf(n.Out, "[reset] node %s: services, pods, routes, networks, credentials and state removed; "+
		"drain and delete the Node in the cluster\n", n.Name)
	return n.Open()
}

// joinFiles are the files the join and the node's components write: the rendered
// configuration (when the join got far enough to render it), every file in the kubelet's
// certificate directory (the bootstrap pair, the kubelet's client and serving certificates),
// the kubeconfig, the cluster CA, the join state and the health `nodeboot run` recorded.
func (n *Node) joinFiles() []string {
	files := []string{n.Paths.KubeletKubeconfig, n.Paths.ClusterCA, n.statePath(), n.healthPath()}
	if p, err := plan(n); err == nil {
		for f := range p.Files {
			files = append(files, f)
		}
	}
	if entries, err := os.ReadDir(n.Platform.Path(n.Paths.KubeletCertDir)); err == nil {
		for _, e := range entries {
			if !e.IsDir() {
				files = append(files, strings.TrimSuffix(n.Paths.KubeletCertDir, `\`)+`\`+e.Name())
			}
		}
	}
	files = append(files, n.bootstrapKeyFile(), n.currentPEM())
	slices.Sort(files)
	return slices.Compact(files)
}
