package nodecmd

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
)

// Memory accounting of a Windows node. Windows has no cgroups that fence the node's own
// processes off from pods (the kubelet runs with cgroupsPerQOS false and enforces no node
// allocatable): the reservations lower the allocatable memory the scheduler places pods
// against, and the hard eviction threshold on memory.available is what the Windows kubelet
// acts on when the machine runs short (kubernetes/website
// content/en/docs/concepts/configuration/windows-resource-management.md: "use --kube-reserved
// and/or --system-reserved to account for memory usage on the node (other than containers)").
const (
	// defaultSystemReservedMemory is what AKS reserves for Windows itself ("AKS reserves an
	// extra 2 GB for system processes in Windows nodes", MicrosoftDocs/azure-aks-docs
	// articles/aks/node-resource-reservations.md; aks-engine pkg/api/defaults-kubelet.go,
	// staticWindowsKubeletConfig["--system-reserved"] = "memory=2Gi").
	defaultSystemReservedMemory = "2Gi"
	// defaultEvictionHardMemory is AKS's memory.available threshold that goes with its
	// regressive kube-reserved rate (node-resource-reservations.md, "memory.available<750Mi").
	defaultEvictionHardMemory = "750Mi"
)

// kubeReservedTiers is AKS's regressive rate of kube-reserved memory: each tier's percentage
// applies to the memory between the previous tier's end and its own (in GiB); the last tier
// has no end (node-resource-reservations.md: 25% of the first 4 GB, 20% of the next 4 GB, 10%
// of the next 8 GB, 6% of the next 112 GB, 2% of any memory above 128 GB).
var kubeReservedTiers = []struct{ upToGiB, percent int64 }{{4, 25}, {8, 20}, {16, 10}, {128, 6}, {0, 2}}

// KubeReservedMemory is AKS's kube-reserved memory for a machine with total bytes of memory,
// rounded down to a MiB.
func KubeReservedMemory(total uint64) resource.Quantity {
	const gib, mib = int64(1) << 30, int64(1) << 20
	left, from, reserved := int64(total), int64(0), int64(0)
	for _, t := range kubeReservedTiers {
		span := left
		if t.upToGiB > 0 {
			span = min(left, (t.upToGiB-from)*gib)
			from = t.upToGiB
		}
		reserved += span * t.percent / 100
		if left -= span; left == 0 {
			break
		}
	}
	return *resource.NewQuantity(reserved/mib*mib, resource.BinarySI)
}

// memoryAccounting is the kubelet's memory reservations and eviction threshold.
type memoryAccounting struct {
	system, kube, eviction resource.Quantity
}

// memoryAccountingOf takes kubelet's settings and fills the unset ones in from the machine's
// memory. With memory zero (unknown: a check before any machine exists) kube-reserved is
// left out unless set, and the total is not checked.
func memoryAccountingOf(k v1alpha1.Kubelet, memory uint64) (memoryAccounting, error) {
	var a memoryAccounting
	var err error
	if a.system, err = quantityOr(k.SystemReservedMemory, defaultSystemReservedMemory); err != nil {
		return a, fmt.Errorf("kubelet.systemReservedMemory %q: %w", k.SystemReservedMemory, err)
	}
	if a.eviction, err = quantityOr(k.EvictionHardMemory, defaultEvictionHardMemory); err != nil {
		return a, fmt.Errorf("kubelet.evictionHardMemory %q: %w", k.EvictionHardMemory, err)
	}
	switch {
	case k.KubeReservedMemory != "":
		if a.kube, err = resource.ParseQuantity(k.KubeReservedMemory); err != nil {
			return a, fmt.Errorf("kubelet.kubeReservedMemory %q: %w", k.KubeReservedMemory, err)
		}
	case memory > 0:
		a.kube = KubeReservedMemory(memory)
	}
	if memory == 0 {
		return a, nil
	}
	sum := a.system.DeepCopy()
	sum.Add(a.kube)
	sum.Add(a.eviction)
	if sum.Value() >= int64(memory) {
		return a, fmt.Errorf("the kubelet's memory reservations (kubelet.systemReservedMemory %s + kubelet.kubeReservedMemory %s + "+
			"kubelet.evictionHardMemory %s "+
			"= %s) leave no memory for pods on this machine, which has %s: lower them, or use a VM size with more memory",
			a.system.String(), a.kube.String(), a.eviction.String(), sum.String(), resource.NewQuantity(int64(memory), resource.BinarySI).String())
	}
	return a, nil
}

func quantityOr(s, def string) (resource.Quantity, error) {
	if s == "" {
		s = def
	}
	return resource.ParseQuantity(s)
}

// reserved is a kubelet reservation map of memory q, nil for zero (the kubelet's default).
func reserved(q resource.Quantity) map[string]string {
	if q.IsZero() {
		return nil
	}
	return map[string]string{"memory": q.String()}
}

// evictionHard is the kubelet's hard eviction thresholds: memory.available at threshold and
// the Windows kubelet's defaults for the file system signals, which a configuration that sets
// any signal would otherwise set to zero (k8s.io/kubelet config/v1beta1 evictionHard and
// mergeDefaultEvictionSettings; kubernetes pkg/kubelet/apis/config/v1beta1/defaults_windows.go
// DefaultEvictionHard: nodefs.available 10%, imagefs.available 15%).
func evictionHard(threshold resource.Quantity) map[string]string {
	return map[string]string{"memory.available": threshold.String(), "nodefs.available": "10%", "imagefs.available": "15%"}
}
