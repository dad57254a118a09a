package join

import (
	"context"

	"github.com/kubewin/kubewin/internal/nodestatus"
	"github.com/kubewin/kubewin/nodeboot/internal/platform"
)

// servicesData is what the services phase reads.
type servicesData interface {
	renderData
	machine() platform.Platform
}

// serviceSpecs are the node's services in start order. nodeboot starts them itself on every
// boot, after the network they need exists: the service manager never starts them on its own
// (as aks-engine registers the kubelet and kube-proxy services, SERVICE_DEMAND_START, and
// starts the kubelet from its boot script after re-creating the network:
// parts/k8s/windowskubeletfunc.ps1, staging/provisioning/windows/windowsnodereset.ps1).
func serviceSpecs(d renderData) ([]platform.ServiceSpec, error) {
	p, err := plan(d)
	if err != nil {
		return nil, err
	}
	paths := d.paths()
	bin := paths.BinDir
	logRunner := bin + `\kube-log-runner.exe`
	runtimeDep := string(d.config().Runtime.Name)
	var specs []platform.ServiceSpec
	if args, ok := p.Services["cri-dockerd"]; ok {
		// cri-dockerd has no Windows service mode (Mirantis/cri-dockerd has no service
		// handler), and kube-log-runner has none either: nodeboot hosts it.
		host := []string{"service-host", "--log-file=" + paths.LogDir + `\cri-dockerd.log`, "--", paths.CRIDockerd}
		specs = append(specs, platform.ServiceSpec{Name: "cri-dockerd", DisplayName: "cri-dockerd",
			Description: "CRI for Docker Engine, hosted by nodeboot (kubewin)", Executable: bin + `\nodeboot.exe`,
			Args: append(host, args...), Dependencies: []string{"docker"}, Start: platform.StartByNodeboot})
		runtimeDep = "cri-dockerd"
	}
	specs = append(specs, platform.ServiceSpec{Name: "kubelet", DisplayName: "Kubernetes kubelet", Description: "Kubernetes node agent (kubewin)",
		Executable: bin + `\kubelet.exe`, Args: p.Services["kubelet"], Dependencies: []string{runtimeDep}, Start: platform.StartByNodeboot,
		LogFile: paths.LogDir + `\kubelet.log`, LogRunner: logRunner})
	if args, ok := p.Services["kube-proxy"]; ok {
		specs = append(specs, platform.ServiceSpec{Name: "kube-proxy", DisplayName: "Kubernetes kube-proxy",
			Description: "Kubernetes service proxy (kubewin)", Executable: bin + `\kube-proxy.exe`,
			Args: args, Dependencies: []string{"kubelet"}, Start: platform.StartByNodeboot, LogFile: paths.LogDir + `\kube-proxy.log`, LogRunner: logRunner})
	}
	return specs, nil
}

// runServices installs and starts the node services; Serve runs it on every boot.
func runServices(ctx context.Context, d servicesData) error {
	specs, err := serviceSpecs(d)
	if err != nil {
		return nodestatus.Errorf(nodestatus.CodeServiceFailed, "%w", err)
	}
	services := d.machine().Services()
	for _, s := range specs {
		if err := services.Ensure(ctx, s); err != nil {
			return nodestatus.Errorf(nodestatus.CodeServiceFailed, "install service %s: %w", s.Name, err)
		}
		if err := services.Start(ctx, s.Name); err != nil {
			return nodestatus.Errorf(nodestatus.CodeServiceFailed, "start service %s: %w", s.Name, err)
		}
	}
	return nil
}
