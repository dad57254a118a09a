package azure

import (
	"encoding/json"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"

	"github.com/kubewin/kubewin/internal/routetable"
	"github.com/kubewin/kubewin/internal/testkit/golden"
)

// assertBody compares a request body, as the SDK sends it, with testdata/name.
func assertBody(t *testing.T, name string, body any) {
	t.Helper()
	b, err := json.MarshalIndent(body, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden.Assert(t, name, append(b, '\n'))
}

const testVNet = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/net/providers/Microsoft.Network/virtualNetworks/v"

func bodyCluster(public bool) *Cluster {
	spec := ClusterSpec{
		Name: "acs", ResourceGroup: "rg", Location: "westeurope", KubernetesVersion: "v1.37.1",
		PodCIDR: "10.244.0.0/16", ServiceCIDR: "10.96.0.0/12", NodeCIDRMaskSize: 24,
		Network: ClusterNetwork{
			VNetCIDR: "10.240.0.0/16", ControlPlaneSubnetCIDR: "10.240.255.0/24", AgentSubnetCIDR: "10.240.0.0/20",
			PublicAPIServer: true, DNSPrefix: "acs-rg",
		},
		ControlPlanes:           MachineSpec{Count: 3, VMSize: "Standard_D2s_v3", Image: UbuntuLTS, Zones: []string{"1", "2", "3"}, OSDiskSizeGB: 64},
		Agents:                  MachineSpec{Count: 2, VMSize: "Standard_D4s_v3", Image: Image{ID: "/subscriptions/s/images/ubuntu"}},
		AdminUsername:           "azureuser",
		SSHPublicKeys:           []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKubewinTestKeyOnly admin"},
		Tags:                    map[string]string{"env": "test"},
		APIServerSourcePrefixes: []string{"203.0.113.0/24"},
	}
	if public {
		spec.CloudProvider = &CloudProviderSpec{Routes: true, Version: "v1.37.5"}
		spec.AgentRegistry = &AgentRegistrySpec{IdentityID: "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ids/providers/" +
			"Microsoft.ManagedIdentity/userAssignedIdentities/kubelet", ProviderVersion: "v1.37.5"}
	} else {
		spec.Network = ClusterNetwork{
			ControlPlaneSubnetID: testVNet + "/subnets/m", AgentSubnetID: testVNet + "/subnets/a",
		}
		spec.APIServerSourcePrefixes = []string{"10.0.0.0/8", "192.168.0.0/16"}
	}
	return &Cluster{Client: &Client{SubscriptionID: "00000000-0000-0000-0000-000000000000", providerCloud: ProviderCloud{Name: "AzurePublicCloud"}},
		Spec: spec}
}

// The request bodies of a cluster's resources: with its own network, a public API server, the
// cloud provider (its control planes carry its identity) and agents pulling from Azure Container
// Registry as a kubelet identity (they carry it), and in existing subnets with an internal one.
func TestClusterBodies(t *testing.T) {
	subnet := netip.MustParsePrefix("10.240.255.0/24")
	for _, tc := range []struct {
		dir    string
		public bool
	}{{"cluster-public", true}, {"cluster-internal", false}} {
		t.Run(tc.dir, func(t *testing.T) {
			c := bodyCluster(tc.public)
			linux, err := c.linuxConfiguration()
			if err != nil {
				t.Fatal(err)
			}
			lb, err := c.loadBalancerBody(subnet)
			if err != nil {
				t.Fatal(err)
			}
			addr, err := controlPlaneAddress(subnet, 1)
			if err != nil {
				t.Fatal(err)
			}
			bodies := map[string]any{
				"nsg-masters.json":            c.securityGroupBody("masters", nil),
				"load-balancer.json":          lb,
				"master-1-nic.json":           c.controlPlaneNICBody(addr),
				"master-1-vm.json":            c.controlPlaneVMBody(1, linux, []byte("#cloud-config\n")),
				"agents-scale-set.json":       c.agentScaleSetBody(2, linux, []byte("#cloud-config\n")),
				"agents-scale-set-scale.json": c.agentScaleSetUpdate(3, nil),
			}
			if tc.public {
				// The NAT gateway's address (from RFC 5737's documentation range) may reach the
				// API server with the authorized ranges.
				bodies["nsg-masters.json"] = c.securityGroupBody("masters", []string{"198.51.100.7"})
				bodies["nsg-agents.json"] = c.securityGroupBody("agents", nil)
				bodies["nat-gateway.json"] = c.natGatewayBody()
				bodies["outbound-ip.json"] = c.outboundIPBody()
				bodies["route-table.json"] = c.routeTableBody()
				bodies["vnet.json"] = c.vnetBody()
				bodies["public-ip.json"] = c.publicIPBody()
				bodies["agents-scale-set-add.json"] = c.agentScaleSetUpdate(3, []byte("#cloud-config\n"))
			}
			for name, body := range bodies {
				assertBody(t, tc.dir+"/"+name, body)
			}
		})
	}
}

// The request bodies of a pool's scale set: created (Spot, in zones, carrying the kubelet's
// identity) and scaled out.
func TestScaleSetBodies(t *testing.T) {
	s := &ScaleSet{
		Client: &Client{SubscriptionID: "00000000-0000-0000-0000-000000000000"}, Name: "win", Pool: "win", ComputerNamePrefix: "win",
		Machines: Machines{
			ResourceGroup: "rg", Location: "westeurope", VMSize: "Standard_D4s_v5",
			SubnetID: "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/a",
			ImageID: "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/img" +
				"/providers/Microsoft.Compute/galleries/g/images/w/versions/1.0.0",
			AdminUsername: "kubewin", Zones: []string{"1", "2"}, IPForwarding: true, AcceleratedNetworking: true,
			OSDisk: OSDisk{StorageAccountType: "Premium_LRS", Caching: "ReadWrite", SizeGB: 128},
			Spot:   true, MaxBidPrice: -1, Tags: map[string]string{"env": "test"},
			KubeletIdentityID: "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/" +
				"Microsoft.ManagedIdentity/userAssignedIdentities/kubelet",
		},
	}
	assertBody(t, "pool/scale-set.json", s.body(2, "password-of-the-test", []byte("<powershell/>")))
	assertBody(t, "pool/scale-set-add.json", s.update(nil, 5, []byte("<powershell/>")))
}

// The identity a scale-out PATCH gives the scale set: the kubelet identity alone, the others it
// carries named with null (which removes them), type None once there is none (a system-assigned
// identity kept), and no identity at all when nothing changes.
func TestIdentityUpdate(t *testing.T) {
	const kubelet, other = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities/kubelet",
		"/subscriptions/s/resourceGroups/rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities/other"
	has := func(typ armcompute.ResourceIdentityType, ids ...string) *armcompute.VirtualMachineScaleSetIdentity {
		i := &armcompute.VirtualMachineScaleSetIdentity{Type: to.Ptr(typ), UserAssignedIdentities: map[string]*armcompute.UserAssignedIdentitiesValue{}}
		for _, id := range ids {
			i.UserAssignedIdentities[id] = &armcompute.UserAssignedIdentitiesValue{PrincipalID: to.Ptr("p"), ClientID: to.Ptr("c")}
		}
		return i
	}
	for _, c := range []struct {
		name, want string
		has        *armcompute.VirtualMachineScaleSetIdentity
		patch      string
	}{
		{"none stays none", "", nil, `null`},
		{"none left as None", "", has(armcompute.ResourceIdentityTypeNone), `null`},
		{"added", kubelet, nil, `{"type":"UserAssigned","userAssignedIdentities":{"` + kubelet + `":{}}}`},
		{"kept", kubelet, has(armcompute.ResourceIdentityTypeUserAssigned, strings.ToUpper(kubelet)), `null`},
		{"removed", "", has(armcompute.ResourceIdentityTypeUserAssigned, kubelet), `{"type":"None"}`},
		{"removed, system-assigned kept", "", has(armcompute.ResourceIdentityTypeSystemAssignedUserAssigned, kubelet), `{"type":"SystemAssigned"}`},
		{"replaced", kubelet, has(armcompute.ResourceIdentityTypeUserAssigned, other),
			`{"type":"UserAssigned","userAssignedIdentities":{"` + kubelet + `":{},"` + other + `":null}}`},
		{"added beside system-assigned", kubelet, has(armcompute.ResourceIdentityTypeSystemAssigned),
			`{"type":"SystemAssigned, UserAssigned","userAssignedIdentities":{"` + kubelet + `":{}}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &ScaleSet{Machines: Machines{KubeletIdentityID: c.want}}
			b, err := json.Marshal(s.identityUpdate(c.has))
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != c.patch {
				t.Errorf("PATCH identity %s, want %s", b, c.patch)
			}
		})
	}
}

// The request body of a route table's write: the table as read, with a pod route put and another
// deleted; its tags, BGP setting and another writer's route kept, and what only the server sets
// (etag, provisioning states, resource GUID, subnets, hasBgpOverride) left out.
func TestRouteTableBody(t *testing.T) {
	const id = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/net/providers/Microsoft.Network/routeTables/pods"
	succeeded := to.Ptr(armnetwork.ProvisioningStateSucceeded)
	read := armnetwork.RouteTable{
		ID: to.Ptr(id), Name: to.Ptr("pods"), Type: to.Ptr("Microsoft.Network/routeTables"), Etag: to.Ptr(`W/"1"`),
		Location: to.Ptr("westeurope"), Tags: map[string]*string{"owner": to.Ptr("network-team")},
		Properties: &armnetwork.RouteTablePropertiesFormat{
			DisableBgpRoutePropagation: to.Ptr(true), ProvisioningState: succeeded, ResourceGUID: to.Ptr("guid"),
			Subnets: []*armnetwork.Subnet{{ID: to.Ptr(testVNet + "/subnets/nodes")}},
			Routes: []*armnetwork.Route{
				{ID: to.Ptr(id + "/routes/to-partner"), Name: to.Ptr("to-partner"), Etag: to.Ptr(`W/"1"`), Properties: &armnetwork.RoutePropertiesFormat{
					AddressPrefix: to.Ptr("203.0.113.0/24"), NextHopType: to.Ptr(armnetwork.RouteNextHopTypeInternet), HasBgpOverride: to.Ptr(false),
					ProvisioningState: succeeded,
				}},
				{ID: to.Ptr(id + "/routes/node-0"), Name: to.Ptr("node-0"), Properties: &armnetwork.RoutePropertiesFormat{
					AddressPrefix: to.Ptr("10.244.0.0/24"), NextHopType: to.Ptr(armnetwork.RouteNextHopTypeVirtualAppliance),
					NextHopIPAddress: to.Ptr("10.240.0.4"), ProvisioningState: succeeded,
				}},
			},
		},
	}
	r := routetable.Route{Name: "node-1", Destination: netip.MustParsePrefix("10.244.1.0/24"), NextHop: netip.MustParseAddr("10.240.0.5")}
	routes, errs, changed := applyChanges(id, read, []*routeChange{{name: r.Name, route: &r}, {name: "node-0"}})
	if !changed || errs[0] != nil || errs[1] != nil {
		t.Fatalf("changed %v, errors %v", changed, errs)
	}
	assertBody(t, "route-table.json", tableBody(read, routes))
}

// The request bodies of the cloud provider's identity and its role assignments (Storage
// Account Contributor with the Azure File CSI driver).
func TestIdentityBodies(t *testing.T) {
	c := bodyCluster(true)
	assertBody(t, "cloud-provider/identity.json", c.identityBody())
	names := map[string]bool{}
	for _, r := range append(slices.Clone(CloudProviderRoles), StorageAccountContributor) {
		name := c.roleAssignmentName(r)
		if names[name] {
			t.Errorf("two assignments are named %s", name)
		}
		names[name] = true
		assertBody(t, "cloud-provider/role-"+strings.ReplaceAll(strings.ToLower(r.Name), " ", "-")+".json",
			map[string]any{"name": name, "body": c.roleAssignmentBody(r, "22222222-0000-0000-0000-000000000000")})
	}
}
