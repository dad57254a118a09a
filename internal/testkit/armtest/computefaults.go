package armtest

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
)

// How Compute's operations that create machines fail, as Azure's do: a region without capacity
// for the size, a guest that does not report provisioned in time, a core quota, an operation a
// more recent one preempted, and the eviction of a Spot machine.

// failureEffect is what an operation that ended Failed left of the machines it was creating. The
// zero value: the machines are Failed and never started (AllocationFailed, and the errors of
// FailOperations).
type failureEffect int

const (
	// effectStarted: one machine is Failed in ARM but started; the others succeeded
	// (OSProvisioningTimedOut).
	effectStarted failureEffect = iota + 1
	// effectPreempted: nothing of the operation applies, and it ends Canceled (OperationPreempted).
	effectPreempted
)

// FailAllocation ends matching operations as Compute does when the region or zone has no
// capacity for the VM size: Failed with AllocationFailed, the machines they were creating Failed
// and never started. The message is Compute's, quoted in "Troubleshoot allocation failures when
// you create, restart, or resize VMs in Azure"
// (https://learn.microsoft.com/troubleshoot/azure/virtual-machines/windows/allocation-failure).
func (s *Server) FailAllocation(m Match) *Fault {
	return s.addFault(m, faultFailOperation, newError(http.StatusOK, "AllocationFailed",
		"Allocation failed. We do not have sufficient capacity for the requested VM size in this region. "+
			"Read more about improving likelihood of allocation success at http://aka.ms/allocation-guidance"))
}

// TimeOutProvisioning ends matching operations as Compute does when a machine's guest does not
// report its provisioning complete within the limit (40 minutes, 90 with extensions): Failed with
// OSProvisioningTimedOut for the first machine the operation creates, which is Failed in ARM but
// runs ("The VM may still finish provisioning successfully"); the others succeed. Message and shape:
// Azure/aks-engine#3694, Azure/azure-sdk-for-node#2459, MicrosoftDocs/SupportArticles-docs#1787 (the
// timeouts), https://learn.microsoft.com/troubleshoot/azure/virtual-machines/windows/troubleshoot-deployment-new-vm-windows.
func (s *Server) TimeOutProvisioning(m Match) *Fault {
	e := newError(http.StatusOK, "OSProvisioningTimedOut", "")
	e.effect = effectStarted
	return s.addFault(m, faultFailOperation, e)
}

// osProvisioningTimedOut is the message of OSProvisioningTimedOut for the named VM.
func osProvisioningTimedOut(vm string) string {
	return fmt.Sprintf("OS Provisioning for VM '%s' did not finish in the allotted time. The VM may still finish provisioning successfully. "+
		"Please check provisioning state later. For details on how to check current provisioning state of Windows VMs, refer to "+
		"https://aka.ms/WindowsVMLifecycle and Linux VMs, refer to https://aka.ms/LinuxVMLifecycle.", vm)
}

// PreemptOperations ends matching operations as Compute does when a more recent operation on the
// resource preempts them, rather than refusing that one with 409: Canceled, with OperationPreempted
// and the message cloud-provider-azure matches (sigs.k8s.io/cloud-provider-azure pkg/consts
// OperationPreemptedErrorMessage; the Canceled status: Azure/azure-sdk-for-net's LRO test mocks).
// Nothing of the preempted operation applies. Scale-set writes and deleteInstances are preempted
// so; other operations end Failed.
func (s *Server) PreemptOperations(m Match) *Fault {
	e := newError(http.StatusOK, "OperationPreempted", "Operation execution has been preempted by a more recent operation.")
	e.effect = effectPreempted
	return s.addFault(m, faultFailOperation, e)
}

// vmSizes are the sizes armtest knows the quota family and vCPUs of (the Dsv5, Dsv3 and Dv3
// series' pages under https://learn.microsoft.com/azure/virtual-machines/sizes/general-purpose/;
// the family names are those `az vm list-usage` and the quota error name).
var vmSizes = map[string]struct {
	family string
	cores  int
}{
	"standard_d2s_v5": {"standardDSv5Family", 2}, "standard_d4s_v5": {"standardDSv5Family", 4},
	"standard_d2s_v3": {"standardDSv3Family", 2}, "standard_d4s_v3": {"standardDSv3Family", 4},
	"standard_d2_v3": {"standardDv3Family", 2},
}

// LimitCores sets the subscription's quota of vCPUs of a VM family (e.g. standardDSv5Family) in
// the server's location; a negative limit removes it. A scale set or VM write that would take the
// family's usage past it is refused with 409 OperationNotAllowed and nothing changes, as Compute
// does (https://learn.microsoft.com/azure/quotas/per-vm-quota-requests; the message as
// nforgeio/neonKUBE#1671 and microsoft/onefuzz#605 quote it).
func (s *Server) LimitCores(family string, limit int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if limit < 0 {
		delete(s.coreQuota, strings.ToLower(family))
		return
	}
	s.coreQuota[strings.ToLower(family)] = limit
}

// checkCores refuses adding machines of size whose vCPUs exceed the family's quota; s.mu is held.
func (s *Server) checkCores(size string, machines int) *apiError {
	sz, ok := vmSizes[strings.ToLower(size)]
	if !ok || machines <= 0 {
		return nil
	}
	limit, ok := s.coreQuota[strings.ToLower(sz.family)]
	if !ok {
		return nil
	}
	usage := 0
	for _, ss := range s.scaleSets {
		if v := vmSizes[strings.ToLower(deref(ss.model.SKU.Name))]; v.family == sz.family {
			for _, in := range ss.instances {
				if in.state != stateDeleting {
					usage += v.cores
				}
			}
		}
	}
	for _, vm := range s.vms {
		if hp := vm.model.Properties.HardwareProfile; hp != nil && hp.VMSize != nil && vm.state != stateDeleting {
			if v := vmSizes[strings.ToLower(string(*hp.VMSize))]; v.family == sz.family {
				usage += v.cores
			}
		}
	}
	need := machines * sz.cores
	if usage+need <= limit {
		return nil
	}
	return newError(http.StatusConflict, "OperationNotAllowed",
		"Operation could not be completed as it results in exceeding approved %s Cores quota. Additional details - Deployment Model: "+
			"Resource Manager, Location: %s, Current Limit: %d, Current Usage: %d, Additional Required: %d, (Minimum) New Limit Required: %d. "+
			"Submit a request for Quota increase at https://aka.ms/ProdportalCRP/#blade/Microsoft_Azure_Capacity/UsageAndQuota.ReactView "+
			"by specifying parameters listed in the 'Details' section for deployment to succeed. Please read more about quota limits at "+
			"https://docs.microsoft.com/en-us/azure/azure-supportability/per-vm-quota-requests",
		sz.family, s.opts.Location, limit, usage, need, usage+need)
}

// Evict evicts a Spot instance of a scale set (by instance ID) as Azure does when it needs the
// capacity back or the price passes the instance's maximum: with the Delete eviction policy the
// machine stops and the instance is deleted, and the scale set's capacity drops by one ("you can
// create new VMs by increasing the scale set instance count property",
// https://learn.microsoft.com/azure/virtual-machine-scale-sets/use-spot#eviction-policy). Instances
// that are not Spot are never evicted: Evict returns an error for them.
func (s *Server) Evict(scaleSetID, instanceID string) error {
	s.mu.Lock()
	ss := s.scaleSets[strings.ToLower(scaleSetID)]
	if ss == nil {
		s.mu.Unlock()
		return fmt.Errorf("no scale set %s", scaleSetID)
	}
	p := ss.model.Properties.VirtualMachineProfile
	if p.Priority == nil || *p.Priority != armcompute.VirtualMachinePriorityTypesSpot {
		s.mu.Unlock()
		return fmt.Errorf("scale set %s is not made of Spot VMs: Azure evicts Spot VMs only", scaleSetID)
	}
	n, err := strconv.Atoi(instanceID)
	in := ss.instances[n]
	if err != nil || in == nil || in.state == stateDeleting {
		s.mu.Unlock()
		return fmt.Errorf("scale set %s has no instance %s", scaleSetID, instanceID)
	}
	gone := []*vmInstance{in}
	if p.EvictionPolicy != nil && *p.EvictionPolicy == armcompute.VirtualMachineEvictionPolicyTypesDeallocate {
		s.mu.Unlock()
		return fmt.Errorf("scale set %s deallocates evicted instances; armtest models the Delete eviction policy only", scaleSetID)
	}
	s.removeInstances(ss, gone)
	ss.model.SKU.Capacity = to.Ptr(*ss.model.SKU.Capacity - 1)
	s.mu.Unlock()
	s.shutdownAll(machinesOf(gone))
	return nil
}
