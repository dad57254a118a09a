package provider

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/defaults"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/ipam"
	"github.com/kubewin/kubewin/internal/kubeversion"
	"github.com/kubewin/kubewin/provider/internal/azure"
	"github.com/kubewin/kubewin/provider/internal/azurecsi"
	"github.com/kubewin/kubewin/provider/internal/cluster"
	"github.com/kubewin/kubewin/provider/internal/pool"
)

// clusterAzureModel is an azure cluster's block. Names follow acs-engine's api model where it
// has one (dns_prefix, vnet_cidr) and azurerm's otherwise.
type clusterAzureModel struct {
	ResourceGroupName           types.String `tfsdk:"resource_group_name"`
	Location                    types.String `tfsdk:"location"`
	DNSPrefix                   types.String `tfsdk:"dns_prefix"`
	APIServerAccess             types.String `tfsdk:"api_server_access"`
	APIServerAuthorizedIPRanges types.List   `tfsdk:"api_server_authorized_ip_ranges"`
	VNetCIDR                    types.String `tfsdk:"vnet_cidr"`
	ControlPlaneSubnetCIDR      types.String `tfsdk:"master_subnet_cidr"`
	AgentSubnetCIDR             types.String `tfsdk:"agent_subnet_cidr"`
	ControlPlaneSubnetID        types.String `tfsdk:"master_subnet_id"`
	AgentSubnetID               types.String `tfsdk:"agent_subnet_id"`
	AdminUsername               types.String `tfsdk:"admin_username"`
	SSHPublicKeys               types.List   `tfsdk:"ssh_public_keys"`
	ControlPlanes               types.Object `tfsdk:"masters"`
	LinuxPool                   types.Object `tfsdk:"linux_pool"`
	CloudProvider               types.Object `tfsdk:"cloud_provider"`
	Storage                     types.Object `tfsdk:"storage"`
	Tags                        types.Map    `tfsdk:"tags"`
	APIServerFQDN               types.String `tfsdk:"api_server_fqdn"`
	VNetID                      types.String `tfsdk:"vnet_id"`
	RouteTableID                types.String `tfsdk:"route_table_id"`
	LinuxScaleSetID             types.String `tfsdk:"linux_scale_set_id"`
}

type controlPlanesModel struct {
	Count        types.Int64  `tfsdk:"count"`
	VMSize       types.String `tfsdk:"vm_size"`
	ImageID      types.String `tfsdk:"image_id"`
	Zones        types.List   `tfsdk:"zones"`
	OSDiskSizeGB types.Int64  `tfsdk:"os_disk_size_gb"`
}

type linuxPoolModel struct {
	NodeCount         types.Int64  `tfsdk:"node_count"`
	VMSize            types.String `tfsdk:"vm_size"`
	ImageID           types.String `tfsdk:"image_id"`
	Zones             types.List   `tfsdk:"zones"`
	OSDiskSizeGB      types.Int64  `tfsdk:"os_disk_size_gb"`
	KubeletIdentityID types.String `tfsdk:"kubelet_identity_id"`
}

// Defaults of an azure cluster.
const (
	defaultVMSize                 = "Standard_D2s_v3"
	defaultVNetCIDR               = "10.240.0.0/16"
	defaultControlPlaneSubnetCIDR = "10.240.255.0/24"
	defaultAgentSubnetCIDR        = "10.240.0.0/20"
	defaultLinuxNodes             = 2
)

var (
	pathClusterAzure       = path.Root("azure")
	controlPlanesAttrTypes = map[string]attr.Type{"count": types.Int64Type, "vm_size": types.StringType, "image_id": types.StringType,
		"zones": types.ListType{ElemType: types.StringType}, "os_disk_size_gb": types.Int64Type}
	linuxPoolAttrType = map[string]attr.Type{"node_count": types.Int64Type, "vm_size": types.StringType, "image_id": types.StringType,
		"zones": types.ListType{ElemType: types.StringType}, "os_disk_size_gb": types.Int64Type, "kubelet_identity_id": types.StringType}
	dnsLabelRE = regexp.MustCompile(`^[a-z][a-z0-9-]{1,61}[a-z0-9]$`)
)

func clusterAzureBlock(context.Context) schema.Block {
	keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	machine := func(countName, countDesc, zonesDesc string, def int64, countValidators []validator.Int64) map[string]schema.Attribute {
		return map[string]schema.Attribute{
			countName: schema.Int64Attribute{
				Optional:    true,
				Computed:    true,
				Default:     int64default.StaticInt64(def),
				Validators:  countValidators,
				Description: countDesc,
			},
			"vm_size": schema.StringAttribute{
				Optional:    true,
				Computed:    true,
				Default:     stringdefault.StaticString(defaultVMSize),
				Description: "Size of the VMs. Default `" + defaultVMSize + "`.",
			},
			"image_id": schema.StringAttribute{Optional: true,
				Description: "A managed or gallery image of Ubuntu to boot from, with cloud-init (and, to skip their installation, " +
					"kubeadm, the kubelet and containerd). Default: the marketplace's Ubuntu 24.04 LTS (`Canonical:ubuntu-24_04-lts:server:latest`)."},
			"zones": schema.ListAttribute{
				Optional:    true,
				ElementType: types.StringType,
				Description: "Availability zones, e.g. `[\"1\", \"2\", \"3\"]`; " + zonesDesc,
			},
			"os_disk_size_gb": schema.Int64Attribute{
				Optional:    true,
				Validators:  []validator.Int64{int64validator.Between(30, 4095)},
				Description: "Size of the OS disks in GB. Default: the image's.",
			},
		}
	}
	machinesDefault := func(attrTypes map[string]attr.Type, countName string, count int64) defaults.Object {
		values := map[string]attr.Value{
			countName: types.Int64Value(count), "vm_size": types.StringValue(defaultVMSize), "image_id": types.StringNull(),
			"zones": types.ListNull(types.StringType), "os_disk_size_gb": types.Int64Null(),
		}
		if _, ok := attrTypes["kubelet_identity_id"]; ok {
			values["kubelet_identity_id"] = types.StringNull()
		}
		return objectdefault.StaticValue(types.ObjectValueMust(attrTypes, values))
	}
	linuxPool := machine("node_count", fmt.Sprintf("Number of Linux agents; it changes in place (new ones join with a fresh bootstrap token; "+
		"removed ones are drained first). Default `%d`.", defaultLinuxNodes),
		"the agents' scale set spans them, and Azure spreads its instances across them (best effort).", defaultLinuxNodes,
		[]validator.Int64{int64validator.Between(1, 100)})
	linuxPool["kubelet_identity_id"] = kubeletIdentityAttribute("the Linux agents", "At boot the agents download the "+
		"credential provider of `cloud_provider.version`'s cloud-provider-azure release (or of kubewin's pin for the Kubernetes minor "+
		"when the cloud provider is off), `azure-acr-credential-provider-linux-<arch>` from its GitHub release, unless the image has it at "+
		"`/var/lib/kubelet/credential-provider/acr-credential-provider`. It cannot change once the cluster exists.")
	return schema.SingleNestedBlock{
		Description: "The cluster is made in Azure, with the provider's `azure` credentials, as acs-engine made it from an api model " +
			"(`provider::kubewin::acs_apimodel` reads one): a virtual network with a subnet for the control planes and one for the agents " +
			"(or existing subnets), a network security group on each, a NAT gateway on both (every machine's outbound connections: Azure gives " +
			"new subnets no default outbound access), a route table on both (kubenet-style routing: each node's pod CIDR to its address, so " +
			"that nodes and API servers reach pods; kubewin writes the Linux agents' routes, `kubewin_pod_route` the Windows nodes'), a Standard " +
			"load balancer whose " +
			"frontend " +
			"is the API server endpoint (a static public address with a health probe and a rule on 6443 and outbound rules for the control planes " +
			"and " +
			"agents; or internal), 1, 3 or 5 Ubuntu control planes with static addresses across zones, bootstrapped by cloud-init running " +
			"`kubeadm init` and `kubeadm join --control-plane` (stacked etcd), and a scale set of Linux agents joining with `kubeadm join`. " +
			"Windows " +
			"nodes join as `kubewin_windows_node_pool`s with `cluster_id` set to this cluster's `id`, in the agents' subnet.\n\n" +
			"PKI: the first control plane's kubeadm makes the cluster CA, whose private key never leaves the control planes: they share it through " +
			"kubeadm's encrypted certificate upload, with a certificate key that exists only in their custom data (a control plane added later " +
			"gets " +
			"a fresh upload from a running one). The provider reads the CA certificate from the first control plane's serial console (boot " +
			"diagnostics) and takes short-lived admin certificates for a key it keeps in memory through an ARM run command on a control plane, " +
			"which " +
			"has the cluster's CSR API sign it: every Terraform run that reaches the cluster costs one run command. The state holds no key, token " +
			"or " +
			"password; machines join with bootstrap tokens that are deleted once they joined.",
		Attributes: map[string]schema.Attribute{
			"resource_group_name": schema.StringAttribute{
				Optional:    true,
				Description: requiredInBlock + "Resource group the cluster's resources are made in (it must exist).",
			},
			"location": schema.StringAttribute{
				Optional:    true,
				Description: requiredInBlock + "Azure region, e.g. `westeurope`.",
			},
			"dns_prefix": schema.StringAttribute{
				Optional: true,
				Validators: []validator.String{stringvalidator.RegexMatches(dnsLabelRE, "must be a DNS label: 3-63 lower-case letters, digits and "+
					"'-', starting with a letter")},
				Description: "DNS label of the API server's public address (acs-engine's `masterProfile.dnsPrefix`): " +
					"`<dns_prefix>.<location>.cloudapp.azure.com`, also in the API server's certificate.",
			},
			"api_server_access": schema.StringAttribute{
				Optional:   true,
				Computed:   true,
				Default:    stringdefault.StaticString("public"),
				Validators: []validator.String{stringvalidator.OneOf("public", "internal")},
				Description: "`public`: the load balancer's frontend is a static public IP address; `internal`: the frontend is the control planes' " +
					"subnet's fifth address, and the cluster's machines reach it as `apiserver.<name>.kubewin.internal`, which their " +
					"`/etc/hosts` maps (on the control planes to themselves: a backend cannot reach its own internal load balancer's " +
					"frontend); the API server's certificate names both. Outbound connections go through the cluster's NAT gateway " +
					"either way (in existing subnets, the load balancer's outbound rules for the control planes and Linux agents of a " +
					"public cluster, and your NAT gateways). " +
					"Default `public`.",
			},
			"api_server_authorized_ip_ranges": schema.ListAttribute{
				Optional:    true,
				ElementType: types.StringType,
				Description: "Address prefixes that may reach the API server (the control planes' security group), besides the cluster's own " +
					"outbound address (its NAT gateway's), from which its machines reach a public frontend. Only with the cluster's own " +
					"network: with `master_subnet_id` it is refused (restrict the API server in your subnet's security group). Default: any.",
			},
			"vnet_cidr": schema.StringAttribute{
				Optional:    true,
				Computed:    true,
				Default:     stringdefault.StaticString(defaultVNetCIDR),
				Validators:  []validator.String{cidrValidator{}},
				Description: "Address space of the cluster's virtual network. Default `" + defaultVNetCIDR + "`.",
			},
			"master_subnet_cidr": schema.StringAttribute{
				Optional:   true,
				Computed:   true,
				Default:    stringdefault.StaticString(defaultControlPlaneSubnetCIDR),
				Validators: []validator.String{cidrValidator{}},
				Description: "The control planes' subnet; control plane i has its sixth address and on (acs-engine's `firstConsecutiveStaticIP`). " +
					"Default `" + defaultControlPlaneSubnetCIDR + "`.",
			},
			"agent_subnet_cidr": schema.StringAttribute{
				Optional:    true,
				Computed:    true,
				Default:     stringdefault.StaticString(defaultAgentSubnetCIDR),
				Validators:  []validator.String{cidrValidator{}},
				Description: "The agents' subnet, for the Linux agents and the Windows pools. Default `" + defaultAgentSubnetCIDR + "`.",
			},
			"master_subnet_id": schema.StringAttribute{
				Optional:      true,
				Computed:      true,
				PlanModifiers: keep,
				Description: "An existing subnet for the control planes, with `agent_subnet_id`: kubewin then makes no virtual network, no " +
					"security groups and no NAT gateway. Both subnets must be associated with `route_table_id` by you, the agents' subnet " +
					"(and the control planes' of an internal API server) with a NAT gateway, or the cluster is refused before anything " +
					"is made. Default: the cluster's own.",
			},
			"agent_subnet_id": schema.StringAttribute{
				Optional:      true,
				Computed:      true,
				PlanModifiers: keep,
				Description: "An existing subnet for the agents (see `master_subnet_id`). Default: the cluster's own; Windows pools take it as " +
					"`subnet_id`.",
			},
			"admin_username": schema.StringAttribute{
				Optional: true,
				Computed: true,
				Default:  stringdefault.StaticString("azureuser"),
				Validators: []validator.String{stringvalidator.RegexMatches(adminUsernameRE, "must be 1-20 letters, digits, '.', '_' or '-', "+
					"starting with a letter"), stringvalidator.NoneOfCaseInsensitive(reservedAdmins...)},
				Description: "The Linux machines' administrator. Default `azureuser`.",
			},
			"ssh_public_keys": schema.ListAttribute{
				Optional:    true,
				ElementType: types.StringType,
				Description: "OpenSSH public keys of the administrator (acs-engine's `linuxProfile.ssh.publicKeys`). Without one nobody can log " +
					"on: password logons are off.",
			},
			"masters": schema.SingleNestedAttribute{
				Optional:    true,
				Computed:    true,
				Default:     machinesDefault(controlPlanesAttrTypes, "count", 1),
				Description: "The control planes.",
				Attributes: machine("count", "Number of control planes: 1, 3 or 5 (stacked etcd keeps a quorum through the loss of 1 of 3 or 2 of 5). "+
					"It can grow in place. Default `1`.",
					"control planes are spread over them in turn (control plane i in zone i modulo their number).", 1,
					[]validator.Int64{int64validator.OneOf(1, 3, 5)}),
			},
			"linux_pool": schema.SingleNestedAttribute{
				Optional:    true,
				Computed:    true,
				Default:     machinesDefault(linuxPoolAttrType, "node_count", defaultLinuxNodes),
				Description: "The Linux agents, a scale set: CoreDNS and kube-proxy's Linux pods (and other Linux-only system pods) run there.",
				Attributes:  linuxPool,
			},
			"cloud_provider": cloudProviderAttribute(),
			"storage":        storageAttribute(),
			"tags": schema.MapAttribute{
				Optional:    true,
				ElementType: types.StringType,
				Description: "Tags of the cluster's resources, with kubewin's own `kubewin.io/cluster`.",
			},
			"api_server_fqdn": schema.StringAttribute{
				Computed:      true,
				PlanModifiers: keep,
				Description:   "DNS name of the API server's public address (with `dns_prefix`).",
			},
			"vnet_id": schema.StringAttribute{
				Computed:      true,
				PlanModifiers: keep,
				Description:   "The cluster's virtual network (null with existing subnets).",
			},
			"route_table_id": schema.StringAttribute{
				Computed:      true,
				PlanModifiers: keep,
				Description:   "The route table of the control planes' and the agents' subnets, for `kubewin_pod_route`s of the Windows nodes.",
			},
			"linux_scale_set_id": schema.StringAttribute{
				Computed:      true,
				PlanModifiers: keep,
				Description:   "The Linux agents' scale set.",
			},
		},
	}
}

// validate checks an azure cluster's configuration before anything is planned.
func (a *clusterAzureModel) validate(ctx context.Context, m *clusterModel) diag.Diagnostics {
	diags := validateCloudProvider(ctx, a.CloudProvider, m)
	diags.Append(validateStorage(ctx, a.Storage)...)
	for name, v := range map[string]types.String{"resource_group_name": a.ResourceGroupName, "location": a.Location} {
		if v.IsNull() {
			diags.AddAttributeError(pathClusterAzure.AtName(name), "Missing Azure Setting", "Set azure."+name+": the cluster's resources need it.")
		}
	}
	if m.KubernetesVersion.IsNull() {
		diags.AddAttributeError(path.Root("kubernetes_version"), "Missing Kubernetes Version",
			fmt.Sprintf("An azure cluster needs kubernetes_version, a release such as \"1.%d.1\" (1.%d to 1.%d): its control planes install that "+
				"version.", kubeversion.NewestMinor, kubeversion.OldestMinor, kubeversion.NewestMinor))
	}
	if a.ControlPlaneSubnetID.IsNull() != a.AgentSubnetID.IsNull() && !a.ControlPlaneSubnetID.IsUnknown() && !a.AgentSubnetID.IsUnknown() {
		diags.AddAttributeError(pathClusterAzure.AtName("master_subnet_id"), "Incomplete Existing Network",
			"Set both master_subnet_id and agent_subnet_id (existing subnets), or neither (the cluster's own virtual network).")
	}
	if !a.ControlPlaneSubnetID.IsNull() && !a.APIServerAuthorizedIPRanges.IsNull() && !a.APIServerAuthorizedIPRanges.IsUnknown() &&
		len(a.APIServerAuthorizedIPRanges.Elements()) > 0 {
		diags.AddAttributeError(pathClusterAzure.AtName("api_server_authorized_ip_ranges"), "Authorized Ranges Need the Cluster's Own Network",
			"api_server_authorized_ip_ranges is enforced by the security group kubewin makes for its own control planes' subnet; with existing "+
				"subnets (master_subnet_id, agent_subnet_id) kubewin makes no security group, so the ranges would be ignored and the API server "+
				"open to any source. Either remove master_subnet_id and agent_subnet_id (kubewin's own network allows these ranges and the "+
				"cluster's outbound address), or remove api_server_authorized_ip_ranges and restrict TCP 6443 in your subnet's network "+
				"security group: allow your ranges and every address the cluster's machines reach the API server from (the public "+
				"addresses of your subnets' NAT gateways and, for a public API server, the load balancer's frontend address, which its "+
				"outbound rules use), or the nodes are locked out.")
	}
	if a.APIServerAccess.ValueString() == "internal" && !a.DNSPrefix.IsNull() {
		diags.AddAttributeError(pathClusterAzure.AtName("dns_prefix"), "DNS Prefix Without Public Address",
			"dns_prefix names the public address of the API server; with api_server_access = \"internal\" there is none: remove it.")
	}
	// The cluster's own network: its subnets in its space, the pods' and services' outside.
	named := func(name string, v types.String, def string) (ipam.Named, bool) {
		s := def
		if !v.IsNull() {
			s = v.ValueString()
		}
		if v.IsUnknown() {
			return ipam.Named{}, false
		}
		p, err := ipam.ParsePrefix(s)
		return ipam.Named{Name: name, Prefix: p}, err == nil
	}
	vnet, ok1 := named("azure.vnet_cidr", a.VNetCIDR, defaultVNetCIDR)
	masters, ok2 := named("azure.master_subnet_cidr", a.ControlPlaneSubnetCIDR, defaultControlPlaneSubnetCIDR)
	agents, ok3 := named("azure.agent_subnet_cidr", a.AgentSubnetCIDR, defaultAgentSubnetCIDR)
	pods, ok4 := named("cluster_cidr", m.ClusterCIDR, v1alpha1.DefaultClusterCIDR)
	services, ok5 := named("service_cidr", m.ServiceCIDR, v1alpha1.DefaultServiceCIDR)
	if ok1 && ok2 && ok3 && ok4 && ok5 && a.ControlPlaneSubnetID.IsNull() {
		for _, sn := range []ipam.Named{masters, agents} {
			if !vnet.Prefix.Contains(sn.Prefix.Addr()) || sn.Prefix.Bits() < vnet.Prefix.Bits() {
				diags.AddAttributeError(pathClusterAzure.AtName(strings.TrimPrefix(sn.Name, "azure.")), "Subnet Outside the Virtual Network",
					fmt.Sprintf("%s %s is not inside azure.vnet_cidr %s.", sn.Name, sn.Prefix, vnet.Prefix))
			}
		}
		for _, err := range ipam.Overlaps(masters, agents, pods, services) {
			diags.AddAttributeError(pathClusterAzure, "Overlapping CIDRs", err.Error()+": the nodes' and the pods' and services' addresses must be apart.")
		}
		for _, err := range ipam.Overlaps(vnet, pods) {
			diags.AddAttributeError(path.Root("cluster_cidr"), "Overlapping CIDRs",
				err.Error()+": pods are routed by the route table and must be outside the virtual network.")
		}
	}
	return diags
}

// modifyPlan sets azure.cloud_provider's planned values, and refuses every change of an existing
// azure cluster that would need a new cluster: kubewin never destroys a cluster as a side effect
// of a change.
func (*clusterAzureModel) modifyPlan(ctx context.Context, data *providerData, req resource.ModifyPlanRequest, plan *clusterModel) diag.Diagnostics {
	var diags diag.Diagnostics
	if req.State.Raw.IsNull() || isLocalState(ctx, req.State) {
		if plan.Azure != nil {
			diags.Append(planCloudProvider(ctx, req, plan, nil)...)
			if !diags.HasError() {
				diags.Append(planStorage(ctx, req, plan, nil)...)
			}
			if !diags.HasError() {
				diags.Append(checkClusterPermissions(ctx, data, plan.Azure)...)
			}
			if !diags.HasError() {
				diags.Append(checkAgentKubeletIdentity(ctx, data, plan.Azure)...)
			}
		}
		return diags
	}
	var state clusterModel
	diags.Append(req.State.Get(ctx, &state)...)
	if diags.HasError() {
		return diags
	}
	if plan.Azure == nil {
		diags.AddAttributeError(pathClusterAzure, "Cluster Would Be Replaced",
			"Moving an azure cluster to another backend would destroy it: kubewin never destroys a cluster as a side effect of a change. Keep the "+
				"azure block; to remove the cluster, remove the resource.")
		return diags
	}
	if diags.Append(planCloudProvider(ctx, req, plan, &state)...); diags.HasError() {
		return diags
	}
	if diags.Append(planStorage(ctx, req, plan, &state)...); diags.HasError() {
		return diags
	}
	refuse := func(at path.Path, name, from, to string) {
		diags.AddAttributeError(at, "Change Would Replace the Cluster",
			fmt.Sprintf("Changing %s of azure cluster %q (from %q to %q) would need a new cluster, and kubewin never destroys a cluster as a side "+
				"effect of a change. "+
				"Keep %s = %q; to change it, make a new kubewin_cluster (another name), move the node pools to it, then remove this one.", name,
				state.Name.ValueString(), from, to, name, from))
	}
	same := func(a, b attr.Value) bool { return a.IsUnknown() || b.IsUnknown() || a.Equal(b) }
	for _, f := range []struct {
		at       path.Path
		name     string
		old, new attr.Value
	}{
		{path.Root("name"), "name", state.Name, plan.Name},
		{path.Root("kubernetes_version"), "kubernetes_version", state.KubernetesVersion, plan.KubernetesVersion},
		{path.Root("cluster_cidr"), "cluster_cidr", state.ClusterCIDR, plan.ClusterCIDR},
		{path.Root("service_cidr"), "service_cidr", state.ServiceCIDR, plan.ServiceCIDR},
		{path.Root("node_cidr_mask_size"), "node_cidr_mask_size", state.NodeCIDRMaskSize, plan.NodeCIDRMaskSize},
		{pathClusterAzure.AtName("resource_group_name"), "azure.resource_group_name", state.Azure.ResourceGroupName, plan.Azure.ResourceGroupName},
		{pathClusterAzure.AtName("location"), "azure.location", state.Azure.Location, plan.Azure.Location},
		{pathClusterAzure.AtName("dns_prefix"), "azure.dns_prefix", state.Azure.DNSPrefix, plan.Azure.DNSPrefix},
		{pathClusterAzure.AtName("api_server_access"), "azure.api_server_access", state.Azure.APIServerAccess, plan.Azure.APIServerAccess},
		{pathClusterAzure.AtName("api_server_authorized_ip_ranges"), "azure.api_server_authorized_ip_ranges", state.Azure.APIServerAuthorizedIPRanges,
			plan.Azure.APIServerAuthorizedIPRanges},
		{pathClusterAzure.AtName("vnet_cidr"), "azure.vnet_cidr", state.Azure.VNetCIDR, plan.Azure.VNetCIDR},
		{pathClusterAzure.AtName("master_subnet_cidr"), "azure.master_subnet_cidr", state.Azure.ControlPlaneSubnetCIDR, plan.Azure.ControlPlaneSubnetCIDR},
		{pathClusterAzure.AtName("agent_subnet_cidr"), "azure.agent_subnet_cidr", state.Azure.AgentSubnetCIDR, plan.Azure.AgentSubnetCIDR},
		{pathClusterAzure.AtName("master_subnet_id"), "azure.master_subnet_id", state.Azure.ControlPlaneSubnetID, plan.Azure.ControlPlaneSubnetID},
		{pathClusterAzure.AtName("agent_subnet_id"), "azure.agent_subnet_id", state.Azure.AgentSubnetID, plan.Azure.AgentSubnetID},
		{pathClusterAzure.AtName("admin_username"), "azure.admin_username", state.Azure.AdminUsername, plan.Azure.AdminUsername},
		{pathClusterAzure.AtName("ssh_public_keys"), "azure.ssh_public_keys", state.Azure.SSHPublicKeys, plan.Azure.SSHPublicKeys},
		{pathClusterAzure.AtName("tags"), "azure.tags", state.Azure.Tags, plan.Azure.Tags},
	} {
		if !same(f.old, f.new) {
			refuse(f.at, f.name, valueText(f.old), valueText(f.new))
		}
	}
	var sm, pm controlPlanesModel
	var sl, pl linuxPoolModel
	diags.Append(state.Azure.ControlPlanes.As(ctx, &sm, objectAsOptions)...)
	diags.Append(plan.Azure.ControlPlanes.As(ctx, &pm, objectAsOptions)...)
	diags.Append(state.Azure.LinuxPool.As(ctx, &sl, objectAsOptions)...)
	diags.Append(plan.Azure.LinuxPool.As(ctx, &pl, objectAsOptions)...)
	if diags.HasError() {
		return diags
	}
	masters, pool := pathClusterAzure.AtName("masters"), pathClusterAzure.AtName("linux_pool")
	for _, f := range []struct {
		at       path.Path
		name     string
		old, new attr.Value
	}{
		{masters.AtName("vm_size"), "azure.masters.vm_size", sm.VMSize, pm.VMSize},
		{masters.AtName("image_id"), "azure.masters.image_id", sm.ImageID, pm.ImageID},
		{masters.AtName("zones"), "azure.masters.zones", sm.Zones, pm.Zones},
		{masters.AtName("os_disk_size_gb"), "azure.masters.os_disk_size_gb", sm.OSDiskSizeGB, pm.OSDiskSizeGB},
		{pool.AtName("vm_size"), "azure.linux_pool.vm_size", sl.VMSize, pl.VMSize},
		{pool.AtName("image_id"), "azure.linux_pool.image_id", sl.ImageID, pl.ImageID},
		{pool.AtName("zones"), "azure.linux_pool.zones", sl.Zones, pl.Zones},
		{pool.AtName("os_disk_size_gb"), "azure.linux_pool.os_disk_size_gb", sl.OSDiskSizeGB, pl.OSDiskSizeGB},
		{pool.AtName("kubelet_identity_id"), "azure.linux_pool.kubelet_identity_id", sl.KubeletIdentityID, pl.KubeletIdentityID},
	} {
		if !same(f.old, f.new) {
			refuse(f.at, f.name, valueText(f.old), valueText(f.new))
		}
	}
	// The state counts the control planes that exist (Read): a lost one is made again.
	if !pm.Count.IsUnknown() && !sm.Count.IsUnknown() && pm.Count.ValueInt64() < sm.Count.ValueInt64() {
		diags.AddAttributeError(masters.AtName("count"), "Control Planes Cannot Be Removed",
			fmt.Sprintf("azure.masters.count goes from %d to %d: kubewin adds control planes in place but does not remove them (their etcd "+
				"members would have to leave first). Keep count = %d.",
				sm.Count.ValueInt64(), pm.Count.ValueInt64(), sm.Count.ValueInt64()))
	}
	return diags
}

func valueText(v attr.Value) string {
	if v.IsNull() {
		return "(unset)"
	}
	if s, ok := v.(types.String); ok {
		return s.ValueString()
	}
	return v.String()
}

// cluster is the cluster the model describes, at its backend.
func (a *clusterAzureModel) cluster(ctx context.Context, data *providerData, m *clusterModel) (azure.ClusterBackend, diag.Diagnostics) {
	var diags diag.Diagnostics
	client, err := data.azure(ctx)
	if err != nil {
		diags.AddAttributeError(pathClusterAzure, "Cannot Reach Azure", err.Error())
		return azure.ClusterBackend{}, diags
	}
	var mm controlPlanesModel
	var lp linuxPoolModel
	diags.Append(a.ControlPlanes.As(ctx, &mm, objectAsOptions)...)
	diags.Append(a.LinuxPool.As(ctx, &lp, objectAsOptions)...)
	keys, d := stringListOf(ctx, a.SSHPublicKeys)
	diags.Append(d...)
	ranges, d := stringListOf(ctx, a.APIServerAuthorizedIPRanges)
	diags.Append(d...)
	tags, d := stringMapOf(ctx, a.Tags)
	diags.Append(d...)
	controlPlaneZones, d := stringListOf(ctx, mm.Zones)
	diags.Append(d...)
	poolZones, d := stringListOf(ctx, lp.Zones)
	diags.Append(d...)
	v, err := kubeversion.Parse(m.KubernetesVersion.ValueString())
	if err != nil {
		diags.AddAttributeError(path.Root("kubernetes_version"), "Unsupported Kubernetes Version", err.Error())
	}
	cloudProvider, d := cloudProviderSpec(ctx, a.CloudProvider, m.KubernetesVersion)
	diags.Append(d...)
	storage, d := storageSpec(ctx, a.Storage, cloudProvider)
	diags.Append(d...)
	if diags.HasError() {
		return azure.ClusterBackend{}, diags
	}
	image := func(id types.String) azure.Image {
		if id.IsNull() {
			return azure.UbuntuLTS
		}
		return azure.Image{ID: id.ValueString()}
	}
	spec := azure.ClusterSpec{
		Name:              m.Name.ValueString(),
		ResourceGroup:     a.ResourceGroupName.ValueString(),
		Location:          a.Location.ValueString(),
		KubernetesVersion: "v" + v.String(),
		PodCIDR:           m.ClusterCIDR.ValueString(),
		ServiceCIDR:       m.ServiceCIDR.ValueString(),
		NodeCIDRMaskSize:  int(m.NodeCIDRMaskSize.ValueInt64()),
		Network: azure.ClusterNetwork{
			VNetCIDR:               a.VNetCIDR.ValueString(),
			ControlPlaneSubnetCIDR: a.ControlPlaneSubnetCIDR.ValueString(),
			AgentSubnetCIDR:        a.AgentSubnetCIDR.ValueString(),
			PublicAPIServer:        a.APIServerAccess.ValueString() != "internal",
			DNSPrefix:              a.DNSPrefix.ValueString(),
		},
		ControlPlanes: azure.MachineSpec{Count: int(mm.Count.ValueInt64()), VMSize: mm.VMSize.ValueString(), Image: image(mm.ImageID),
			Zones: controlPlaneZones, OSDiskSizeGB: int32(mm.OSDiskSizeGB.ValueInt64())},
		Agents: azure.MachineSpec{Count: int(lp.NodeCount.ValueInt64()), VMSize: lp.VMSize.ValueString(), Image: image(lp.ImageID),
			Zones: poolZones, OSDiskSizeGB: int32(lp.OSDiskSizeGB.ValueInt64())},
		AdminUsername:           a.AdminUsername.ValueString(),
		SSHPublicKeys:           keys,
		Tags:                    tags,
		APIServerSourcePrefixes: ranges,
		CloudProvider:           cloudProvider,
		Storage:                 storage,
	}
	if !lp.KubeletIdentityID.IsNull() {
		version := pinnedCloudProviderVersion(m.KubernetesVersion).ValueString()
		if cloudProvider != nil {
			version = cloudProvider.Version
		}
		if version == "" {
			diags.AddAttributeError(pathCloudProvider.AtName("version"), "No Credential Provider Release", fmt.Sprintf("kubewin pins no "+
				"cloud-provider-azure release for Kubernetes %s, whose acr-credential-provider the Linux agents would run. Set "+
				"azure.cloud_provider.version to a release of that minor.", m.KubernetesVersion.ValueString()))
			return azure.ClusterBackend{}, diags
		}
		spec.AgentRegistry = &azure.AgentRegistrySpec{IdentityID: lp.KubeletIdentityID.ValueString(), ProviderVersion: version}
	}
	// Existing subnets: configured (before the cluster exists) or recorded by an empty vnet_id.
	configured := a.VNetID.IsUnknown() && !a.ControlPlaneSubnetID.IsUnknown() && !a.ControlPlaneSubnetID.IsNull()
	recorded := !a.VNetID.IsUnknown() && !a.VNetID.IsNull() && a.VNetID.ValueString() == ""
	if configured || recorded {
		spec.Network.ControlPlaneSubnetID, spec.Network.AgentSubnetID = a.ControlPlaneSubnetID.ValueString(), a.AgentSubnetID.ValueString()
	}
	c := &azure.Cluster{Client: client, Spec: spec}
	access := func(ctx context.Context) (*azure.Access, error) { return data.azureAccess(ctx, m.ID.ValueString()) }
	return azure.ClusterBackend{Cluster: c, Access: access}, diags
}

// stringListOf converts a list attribute (nil for null or unknown).
func stringListOf(ctx context.Context, v types.List) ([]string, diag.Diagnostics) {
	if v.IsNull() || v.IsUnknown() {
		return nil, nil
	}
	var out []string
	diags := v.ElementsAs(ctx, &out, false)
	return out, diags
}

// setAzureIDs sets what the cluster's names decide, known before anything is made.
func setAzureIDs(m *clusterModel, c *azure.Cluster) {
	m.ID = types.StringValue(c.ID())
	m.KubeconfigPath = types.StringNull()
	a := m.Azure
	a.ControlPlaneSubnetID, a.AgentSubnetID = types.StringValue(c.ControlPlaneSubnetID()), types.StringValue(c.AgentSubnetID())
	a.VNetID = types.StringValue(c.VNetID())
	a.RouteTableID = types.StringValue(c.RouteTableID())
	a.LinuxScaleSetID = types.StringValue(c.ScaleSetID())
}

func setAzureState(m *clusterModel, s *cluster.State) {
	m.Endpoint = types.StringValue(s.Endpoint)
	m.CACertificate = types.StringValue(string(s.CACert))
	m.CACertHash = types.StringValue(s.CAHash)
	m.Azure.APIServerFQDN = types.StringValue(s.FQDN)
	m.Running = types.BoolValue(true)
}

func (a *clusterAzureModel) create(ctx context.Context, data *providerData, m *clusterModel) diag.Diagnostics {
	c, diags := a.cluster(ctx, data, m)
	if diags.HasError() {
		return diags
	}
	setAzureIDs(m, c.Cluster)
	// What is unknown until the cluster runs stays empty if it never does: the state then only
	// lets destroy find what was made.
	m.Endpoint, m.CACertificate, m.CACertHash = types.StringValue(""), types.StringValue(""), types.StringValue("")
	a.APIServerFQDN = types.StringValue("")
	m.Running = types.BoolValue(false)
	state, err := c.Create(ctx)
	if state != nil {
		setAzureState(m, state)
	}
	diags.Append(a.setCloudProvider(ctx, c.Cluster)...)
	if err != nil {
		m.Running = types.BoolValue(false)
		summary, detail := "Cannot Create Cluster", fmt.Sprintf("Making azure cluster %q failed: %s\n\n", m.Name.ValueString(), err)
		if ae := (*pool.ActionError)(nil); errors.As(err, &ae) {
			summary, detail = ae.Summary, detail+ae.Remedy+"\n\n"
		}
		next := "What was made is in the state: `terraform destroy` removes it, or the next apply replaces the cluster."
		if state != nil {
			// Terraform taints a resource whose create failed, and replaces it on the next apply.
			next = "The cluster runs (its first control plane answered), but Terraform marks it tainted, so the next apply would destroy " +
				"it and make a new one. To keep it, run `terraform untaint` with this resource's address: the next apply then makes " +
				"what is missing (control planes, the cloud provider's objects, Linux agents) in place. `terraform destroy` removes it."
		}
		diags.AddError(summary, detail+next)
	}
	return diags
}

// cannotReadAzureCluster is the error of an ARM read of the cluster's machines that failed.
func cannotReadAzureCluster(m *clusterModel, err error) diag.Diagnostic {
	return diag.NewErrorDiagnostic("Cannot Read the Cluster", fmt.Sprintf("kubewin could not read the machines of azure cluster %q in "+
		"resource group %q: %s.\n\nCheck that the resource group exists and that the provider's credentials may read it (the Reader "+
		"role at least), then apply again.", m.Name.ValueString(), m.Azure.ResourceGroupName.ValueString(), err))
}

// read reads what exists of the cluster: the control planes and agents that exist count, so
// that the next apply makes the missing ones again.
func (a *clusterAzureModel) read(ctx context.Context, data *providerData, m *clusterModel) (gone bool, diags diag.Diagnostics) {
	c, diags := a.cluster(ctx, data, m)
	if diags.HasError() {
		return false, diags
	}
	o, err := c.Observe(ctx)
	if err != nil {
		diags.Append(cannotReadAzureCluster(m, err))
		return false, diags
	}
	if o == nil {
		return true, diags
	}
	var mm controlPlanesModel
	var lp linuxPoolModel
	diags.Append(a.ControlPlanes.As(ctx, &mm, objectAsOptions)...)
	diags.Append(a.LinuxPool.As(ctx, &lp, objectAsOptions)...)
	if diags.HasError() {
		return false, diags
	}
	m.Running = types.BoolValue(o.Running)
	mm.Count = types.Int64Value(int64(min(o.ControlPlanes, int(mm.Count.ValueInt64()))))
	lp.NodeCount = types.Int64Value(int64(o.Agents))
	var d diag.Diagnostics
	a.ControlPlanes, d = types.ObjectValueFrom(ctx, controlPlanesAttrTypes, mm)
	diags.Append(d...)
	a.LinuxPool, d = types.ObjectValueFrom(ctx, linuxPoolAttrType, lp)
	diags.Append(d...)
	return false, diags
}

// update makes missing control planes again and adds new ones, and scales the Linux agents.
func (a *clusterAzureModel) update(ctx context.Context, data *providerData, m, prior *clusterModel) (bool, diag.Diagnostics) {
	c, diags := a.cluster(ctx, data, m)
	if diags.HasError() {
		return true, diags
	}
	last := &cluster.State{
		Endpoint: prior.Endpoint.ValueString(),
		FQDN:     prior.Azure.APIServerFQDN.ValueString(),
		CACert:   []byte(prior.CACertificate.ValueString()),
		CAHash:   prior.CACertHash.ValueString(),
	}
	_, err := c.Repair(ctx, last)
	var step *cluster.StepError
	if errors.As(err, &step) {
		if step.Step != cluster.StepScale && prior.Azure != nil {
			// The cloud provider's and the drivers' objects and roles were not (all) applied:
			// the state keeps what ran before, so the next plan shows the change again.
			a.CloudProvider, a.Storage = prior.Azure.CloudProvider, prior.Azure.Storage
		}
		switch step.Step {
		case cluster.StepConnect:
			diags.AddError("Cannot Reach the Cluster", fmt.Sprintf("kubewin gets a credential for azure cluster %q by a run command on its "+
				"control planes, and none answered: %s.\n\nCheck that the control planes run (the Azure portal or `az vm list -g %s`), "+
				"that the provider's credentials may run commands on them (the Virtual Machine Contributor role on the resource group), "+
				"then apply again.", m.Name.ValueString(), step.Err, a.ResourceGroupName.ValueString()))
		case cluster.StepRead:
			diags.Append(cannotReadAzureCluster(m, step.Err))
		case cluster.StepAddControlPlane:
			diags.AddAttributeError(pathClusterAzure.AtName("masters"), "Cannot Add Control Planes", step.Err.Error())
		case cluster.StepScale:
			diags.AddAttributeError(pathClusterAzure.AtName("linux_pool"), "Cannot Scale the Linux Agents", step.Err.Error())
		case cluster.StepCloudProvider:
			if errors.Is(step.Err, azurecsi.ErrOtherInstallation) {
				diags.AddAttributeError(pathStorage, "CSI Driver Installed by Something Else", fmt.Sprintf("Azure cluster %q: %s.\n\n"+
					"Nothing of that driver was applied. Set azure.storage.azure_disk or azure_file = false for it to keep the other "+
					"installation, or uninstall that one and apply again.", m.Name.ValueString(), step.Err))
				break
			}
			diags.AddAttributeError(pathCloudProvider, "Cannot Apply the Azure Cloud Provider", fmt.Sprintf("kubewin gives the cloud "+
				"provider's identity its roles and applies the cloud provider's and the CSI drivers' objects (kube-system: "+
				"cloud-controller-manager, cloud-node-manager, the drivers' controllers and node plugins, their RBAC, the StorageClasses) "+
				"to azure cluster %q on every apply, and this failed: %s.\n\nCheck the message; an object someone else owns under that "+
				"name must go first. Then apply again.", m.Name.ValueString(), step.Err))
		}
		return true, diags
	}
	m.Running = types.BoolValue(true)
	diags.Append(a.setCloudProvider(ctx, c.Cluster)...)
	return true, diags
}

// setCloudProvider records the cloud provider's identity and images (empty IDs when the
// identity does not exist: a creation that failed before it was made), and the CSI drivers'
// images.
func (a *clusterAzureModel) setCloudProvider(ctx context.Context, c *azure.Cluster) diag.Diagnostics {
	diags := setStorageState(ctx, a, c.Spec.Storage)
	s, err := c.CloudProvider(ctx)
	if err != nil {
		diags.AddAttributeError(pathCloudProvider, "Cannot Read the Cloud Provider's Identity", fmt.Sprintf("kubewin reads the "+
			"identity %s of azure cluster %q for its IDs, and this failed: %s.\n\nCheck that the provider's credentials may read "+
			"managed identities in the resource group, then apply again.", c.IdentityID(), c.Spec.Name, err))
		return diags
	}
	diags.Append(setCloudProviderState(ctx, a, c.Spec.CloudProvider, c.IdentityID(), s)...)
	return diags
}

func (a *clusterAzureModel) delete(ctx context.Context, data *providerData, m *clusterModel) diag.Diagnostics {
	c, diags := a.cluster(ctx, data, m)
	if diags.HasError() {
		return diags
	}
	if err := c.Delete(ctx); err != nil {
		diags.AddError("Cannot Delete Cluster", fmt.Sprintf("Removing azure cluster %q failed: %s", m.Name.ValueString(), err))
	}
	data.forgetAzureAccess(m.ID.ValueString())
	return diags
}

// checkAgentKubeletIdentity checks, before a new cluster is made, the Linux agents' kubelet
// identity: that it exists and that the provider's credential may assign it.
func checkAgentKubeletIdentity(ctx context.Context, data *providerData, a *clusterAzureModel) diag.Diagnostics {
	var lp linuxPoolModel
	diags := a.LinuxPool.As(ctx, &lp, objectAsOptions)
	if diags.HasError() || lp.KubeletIdentityID.IsNull() || lp.KubeletIdentityID.IsUnknown() {
		return diags
	}
	return checkKubeletIdentity(ctx, data, pathClusterAzure.AtName("linux_pool").AtName("kubelet_identity_id"), lp.KubeletIdentityID.ValueString())
}

// checkClusterPermissions checks, before a new cluster is made, that the provider's credential
// may make it: its machines, network and load balancer, and with the cloud provider its
// identity, which its control planes carry and which gets roles on the resource group. A
// Contributor may do all but the last (Microsoft.Authorization writes are among its
// not-actions), which would fail the apply after the network and the identity are made.
func checkClusterPermissions(ctx context.Context, data *providerData, a *clusterAzureModel) diag.Diagnostics {
	var diags diag.Diagnostics
	if a.ResourceGroupName.IsUnknown() || a.CloudProvider.IsUnknown() {
		return diags
	}
	want := []string{"Microsoft.Compute/virtualMachines/write", "Microsoft.Compute/virtualMachineScaleSets/write",
		"Microsoft.Network/loadBalancers/write", "Microsoft.Network/networkSecurityGroups/write", "Microsoft.Network/routeTables/write"}
	var cp cloudProviderModel
	if !a.CloudProvider.IsNull() {
		diags.Append(a.CloudProvider.As(ctx, &cp, objectAsOptions)...)
	}
	if cp.Enabled.ValueBool() {
		want = append(want, "Microsoft.ManagedIdentity/userAssignedIdentities/write",
			"Microsoft.ManagedIdentity/userAssignedIdentities/assign/action", "Microsoft.Authorization/roleAssignments/write")
	}
	client, err := data.azure(ctx)
	var missing []string
	var scope string
	if err == nil {
		missing, scope, err = client.MissingActions(ctx, client.SubscriptionID, a.ResourceGroupName.ValueString(), want...)
	}
	if err != nil {
		diags.AddAttributeWarning(pathClusterAzure, "Permissions Not Checked", fmt.Sprintf("%s.\n\nThe apply may fail part-way if the "+
			"credential lacks a permission the cluster needs.", err))
		return diags
	}
	if len(missing) == 0 {
		return diags
	}
	fix := "Give the credential a role that allows them on the resource group or the subscription (Owner; or Contributor, with User Access " +
		"Administrator for the role assignments)"
	if cp.Enabled.ValueBool() {
		fix += ", or set azure.cloud_provider = { enabled = false } if only the role assignments are missing (the cloud provider's identity " +
			"gets Network Contributor and Virtual Machine Contributor on the resource group)"
	}
	diags.AddAttributeError(pathClusterAzure.AtName("resource_group_name"), "Missing Azure Permissions", fmt.Sprintf(
		"The provider's credential may not perform %s at %s, which making this cluster needs. %s. Nothing was created.",
		strings.Join(missing, ", "), scope, fix))
	return diags
}
