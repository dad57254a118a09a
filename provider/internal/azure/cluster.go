package azure

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"

	"github.com/kubewin/kubewin/internal/ipam"
	"github.com/kubewin/kubewin/internal/kubeadmboot"
	"github.com/kubewin/kubewin/provider/internal/azurecsi"
)

// An azure cluster is what acs-engine deployed, made with kubeadm: a virtual network with a
// subnet for the control plane and one for the agents (or existing subnets), a network security
// group on each, a route table on the agents' subnet for kubenet-style routing (a route per node:
// its pod CIDR to its address), a Standard load balancer whose frontend is the API server
// endpoint (public: a static public IP, with outbound rules for the masters and agents; or
// internal), 1, 3 or 5 Ubuntu control planes (VMs with static addresses in the load balancer's
// pool, across zones) bootstrapped by cloud-init running `kubeadm init` and `kubeadm join
// --control-plane` with stacked etcd, and a scale set of Linux agents (`kubeadm join`) for CoreDNS
// and the other Linux-only system pods. Windows pools join it as kubewin_windows_node_pools.
//
// PKI: the first control plane's kubeadm makes the CA; its key never leaves the control planes.
// They share it through kubeadm's encrypted certificate upload (a certificate key that exists
// only in the joining control planes' custom data); a control plane added later gets a fresh
// upload. The provider learns the CA certificate from the first control plane's serial console
// (boot diagnostics, behind ARM's authorization) and takes short-lived admin certificates for its
// own key through a run command on a control plane (see access.go). Nothing secret is kept.

// ClusterSpec is an azure cluster.
type ClusterSpec struct {
	Name, ResourceGroup, Location string
	// KubernetesVersion is a release, "v1.37.1".
	KubernetesVersion     string
	PodCIDR, ServiceCIDR  string
	NodeCIDRMaskSize      int
	Network               ClusterNetwork
	ControlPlanes, Agents MachineSpec
	// AdminUsername and SSHPublicKeys are the machines' administrator; without keys nobody
	// can log on (a key nobody holds is set, as Azure wants one).
	AdminUsername string
	SSHPublicKeys []string
	Tags          map[string]string
	// APIServerSourcePrefixes may reach the API server (the masters' security group); empty:
	// any.
	APIServerSourcePrefixes []string
	// CloudProvider turns the out-of-tree Azure cloud provider on; nil: off.
	CloudProvider *CloudProviderSpec
	// Storage runs the Azure CSI drivers, with the cloud provider; nil: kubewin leaves them
	// alone (a cluster whose state predates them).
	Storage *StorageSpec
	// AgentRegistry makes the Linux agents' kubelets pull from Azure Container Registry as a
	// user-assigned identity the agents carry; nil: without it.
	AgentRegistry *AgentRegistrySpec
}

// AgentRegistrySpec is how the Linux agents' kubelets pull from Azure Container Registry.
type AgentRegistrySpec struct {
	// IdentityID is the user-assigned identity's resource ID, which holds AcrPull.
	IdentityID string
	// ProviderVersion is the cloud-provider-azure release whose acr-credential-provider the
	// agents download at boot, "v1.37.1".
	ProviderVersion string
}

// ACRCredentialProviderURL is the download of cloud-provider-azure's acr-credential-provider
// for Linux at a release, kubeadmboot.ArchPlaceholder standing for the architecture: the release
// workflow publishes azure-acr-credential-provider-linux-<amd64|arm|arm64>
// (kubernetes-sigs/cloud-provider-azure .github/workflows/release.yaml).
func ACRCredentialProviderURL(version string) string {
	return "https://github.com/kubernetes-sigs/cloud-provider-azure/releases/download/" + version +
		"/azure-acr-credential-provider-linux-" + kubeadmboot.ArchPlaceholder
}

// StorageSpec says which Azure CSI drivers the cluster runs, at which releases; the drivers
// that are off are removed.
type StorageSpec struct {
	AzureDisk, AzureFile bool
	Versions             azurecsi.Versions
}

// ClusterNetwork is where the cluster's machines are.
type ClusterNetwork struct {
	// VNetCIDR, MasterSubnetCIDR and AgentSubnetCIDR make kubewin's virtual network, unless
	// ControlPlaneSubnetID and AgentSubnetID name existing subnets.
	VNetCIDR, ControlPlaneSubnetCIDR, AgentSubnetCIDR string
	ControlPlaneSubnetID, AgentSubnetID               string
	// PublicAPIServer gives the load balancer a public frontend (with DNSPrefix as the DNS
	// label of its address, when set); else its frontend is in the masters' subnet.
	PublicAPIServer bool
	DNSPrefix       string
}

// MachineSpec is a group of machines.
type MachineSpec struct {
	Count        int
	VMSize       string
	Image        Image
	Zones        []string
	OSDiskSizeGB int32
}

// Image is a marketplace image (publisher, offer, SKU, version) or a managed or gallery image (ID).
type Image struct {
	ID, Publisher, Offer, SKU, Version string
}

// UbuntuLTS is the masters' and agents' default image.
var UbuntuLTS = Image{Publisher: "Canonical", Offer: "ubuntu-24_04-lts", SKU: "server", Version: "latest"}

// Tags on everything a cluster creates: kubewin never deletes or takes over what it did not.
const (
	TagCluster = "kubewin.io/cluster"
	// TagMasters on the load balancer is the number of control planes.
	TagControlPlanes = "kubewin.io/masters"
)

// Cluster manages an azure cluster.
type Cluster struct {
	Client *Client
	Spec   ClusterSpec
}

// Names of the cluster's resources.
func (c *Cluster) nsgName(role string) string { return c.Spec.Name + "-" + role + "-nsg" }
func (c *Cluster) vnetName() string           { return c.Spec.Name + "-vnet" }
func (c *Cluster) routeTableName() string     { return c.Spec.Name + "-routetable" }
func (c *Cluster) publicIPName() string       { return c.Spec.Name + "-apiserver-ip" }
func (c *Cluster) outboundIPName() string     { return c.Spec.Name + "-outbound-ip" }
func (c *Cluster) natGatewayName() string     { return c.Spec.Name + "-natgw" }
func (c *Cluster) lbName() string             { return c.Spec.Name + "-apiserver" }
func (c *Cluster) masterName(i int) string    { return fmt.Sprintf("%s-master-%d", c.Spec.Name, i) }
func (c *Cluster) nicName(i int) string       { return c.masterName(i) + "-nic" }
func (c *Cluster) scaleSetName() string       { return c.Spec.Name + "-agents" }

// AgentNamePrefix is the agents' computer name prefix: their node names are it and 6 base-36
// digits.
func (c *Cluster) AgentNamePrefix() string { return c.Spec.Name + "-agent-" }

// ID is the cluster's ID: its load balancer's resource ID.
func (c *Cluster) ID() string { return c.id(typeLoadBalancer, c.lbName()).String() }

// RouteTableID is the route table of the masters' and the agents' subnets.
func (c *Cluster) RouteTableID() string {
	return c.id(typeRouteTable, c.routeTableName()).String()
}

// ClusterRouteTableID is the route table of the azure cluster whose ID is id.
func ClusterRouteTableID(id string) (string, error) {
	group, name, err := ParseClusterID(id)
	if err != nil {
		return "", err
	}
	r, err := arm.ParseResourceID(id)
	if err != nil {
		return "", err
	}
	c := &Cluster{Client: &Client{SubscriptionID: r.SubscriptionID}, Spec: ClusterSpec{Name: name, ResourceGroup: group}}
	return c.RouteTableID(), nil
}

// ScaleSetID is the Linux agents' scale set.
func (c *Cluster) ScaleSetID() string {
	return c.id(typeScaleSet, c.scaleSetName()).String()
}

// ControlPlaneSubnetID and AgentSubnetID are the subnets of the control planes and agents.
func (c *Cluster) ControlPlaneSubnetID() string {
	if id := c.Spec.Network.ControlPlaneSubnetID; id != "" {
		return id
	}
	return c.id(typeVirtualNetwork, c.vnetName()).child("subnets", "masters")
}

func (c *Cluster) AgentSubnetID() string {
	if id := c.Spec.Network.AgentSubnetID; id != "" {
		return id
	}
	return c.id(typeVirtualNetwork, c.vnetName()).child("subnets", "agents")
}

// VNetID is kubewin's virtual network, "" with existing subnets.
func (c *Cluster) VNetID() string {
	if c.Spec.Network.ControlPlaneSubnetID != "" {
		return ""
	}
	return c.id(typeVirtualNetwork, c.vnetName()).String()
}

func (c *Cluster) tags(extra ...string) map[string]*string {
	out := map[string]*string{TagCluster: to.Ptr(c.Spec.Name), TagManagedBy: to.Ptr("kubewin")}
	for k, v := range c.Spec.Tags {
		out[k] = to.Ptr(v)
	}
	for i := 0; i+1 < len(extra); i += 2 {
		out[extra[i]] = to.Ptr(extra[i+1])
	}
	return out
}

// ours checks that an existing resource is this cluster's.
func (c *Cluster) ours(id string, tags map[string]*string) error {
	if v := tags[TagCluster]; v == nil || *v != c.Spec.Name {
		return fmt.Errorf("%s exists and is not kubewin cluster %s's (its %s tag is not %q): kubewin does not take over resources it did not create; "+
			"name the cluster differently or remove it", id, c.Spec.Name, TagCluster, c.Spec.Name)
	}
	return nil
}

// masterAddress is the static address of control plane i: the masters' subnet's sixth address
// on (the first four are Azure's and the fifth is an internal frontend's), as acs-engine's
// firstConsecutiveStaticIP.
func controlPlaneAddress(subnet netip.Prefix, i int) (netip.Addr, error) {
	return ipam.Nth(subnet, uint64(5+i))
}

// frontendAddress is an internal load balancer's frontend address in the masters' subnet.
func frontendAddress(subnet netip.Prefix) (netip.Addr, error) { return ipam.Nth(subnet, 4) }

// ParseClusterID splits an azure cluster's ID (its load balancer's resource ID) into its resource
// group and name.
func ParseClusterID(id string) (resourceGroup, name string, err error) {
	r, err := arm.ParseResourceID(id)
	if err != nil || !strings.EqualFold(r.ResourceType.String(), "Microsoft.Network/loadBalancers") || !strings.HasSuffix(r.Name, "-apiserver") {
		return "", "", fmt.Errorf("%q is not the id of an azure kubewin_cluster (the resource ID of its <name>-apiserver load balancer)", id)
	}
	return r.ResourceGroupName, strings.TrimSuffix(r.Name, "-apiserver"), nil
}

// IsClusterID reports whether id looks like an azure cluster's ID rather than a local cluster's
// name.
func IsClusterID(id string) bool { return strings.HasPrefix(strings.ToLower(id), "/subscriptions/") }
