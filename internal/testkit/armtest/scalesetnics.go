package armtest

import (
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"
)

// The network interfaces of scale-set instances, as Microsoft.Network lists them.

// listScaleSetNICs lists the network interfaces of a scale set's instances, as
// InterfacesClient.NewListVirtualMachineScaleSetNetworkInterfacesPager reads them.
func (s *Server) listScaleSetNICs(w http.ResponseWriter, q *armRequest) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, e := s.scaleSet(q)
	if e != nil {
		return e
	}
	var nics []*armnetwork.Interface
	for _, in := range ss.sortedInstances() {
		for _, n := range in.nics {
			nics = append(nics, nicView(ss, in, n))
		}
	}
	start, end, next, e := s.page(q, len(nics))
	if e != nil {
		return e
	}
	writeJSON(w, http.StatusOK, armnetwork.InterfaceListResult{Value: append([]*armnetwork.Interface{}, nics[start:end]...), NextLink: next})
	return nil
}

func nicView(ss *scaleSet, in *vmInstance, n instanceNIC) *armnetwork.Interface {
	vmID := in.resourceID(ss)
	id := vmID + "/networkInterfaces/" + n.name
	nic := &armnetwork.Interface{
		ID: to.Ptr(id), Name: to.Ptr(n.name), Type: to.Ptr("Microsoft.Network/networkInterfaces"), Location: to.Ptr(ss.location),
		Properties: &armnetwork.InterfacePropertiesFormat{
			EnableIPForwarding:          to.Ptr(n.ipForwarding),
			EnableAcceleratedNetworking: to.Ptr(n.accelerated),
			Primary:                     to.Ptr(n.primary),
			MacAddress:                  to.Ptr(n.mac),
			VirtualMachine:              &armnetwork.SubResource{ID: to.Ptr(vmID)},
			ProvisioningState:           to.Ptr(armnetwork.ProvisioningStateSucceeded),
		},
	}
	for _, c := range n.ipConfigs {
		nic.Properties.IPConfigurations = append(nic.Properties.IPConfigurations, &armnetwork.InterfaceIPConfiguration{
			ID: to.Ptr(id + "/ipConfigurations/" + c.name), Name: to.Ptr(c.name),
			Properties: &armnetwork.InterfaceIPConfigurationPropertiesFormat{
				Primary:                   to.Ptr(c.primary),
				PrivateIPAddress:          to.Ptr(c.addr.String()),
				PrivateIPAddressVersion:   to.Ptr(armnetwork.IPVersionIPv4),
				PrivateIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodDynamic),
				Subnet:                    &armnetwork.Subnet{ID: to.Ptr(c.subnet.id)},
				ProvisioningState:         to.Ptr(armnetwork.ProvisioningStateSucceeded),
			},
		})
	}
	return nic
}
