package provider

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/kubewin/kubewin/internal/ipam"
	"github.com/kubewin/kubewin/internal/routetable"
	"github.com/kubewin/kubewin/provider/internal/azure"
	"github.com/kubewin/kubewin/provider/internal/pool"
	"github.com/kubewin/kubewin/provider/internal/route"
)

// poolRoutesModel is a pool's pod_routes block: the route table in which the pool keeps its
// nodes' pod CIDR routes.
type poolRoutesModel struct {
	RouteTable types.String `tfsdk:"route_table"`
}

var pathPodRoutesTable = path.Root("pod_routes").AtName("route_table")

func poolRoutesBlock() schema.Block {
	return schema.SingleNestedBlock{
		Description: "The pool keeps its own nodes' pod CIDR routes in a route table: for each node, a route from its " +
			"`Node.spec.podCIDR` to its InternalIP (on Azure with next hop type `VirtualAppliance`, the node's NIC, which the `azure` " +
			"backend creates with IP forwarding), named `kubewin.<pool>.<node>` (a pool name longer than 56 characters is cut and given " +
			"8 hex digits of its hash). A new node's route is written before the pool counts the node Ready, so an apply — a scale-out, " +
			"a surge replacement, a health replacement — never ends with a Ready node that pods on other nodes cannot reach; a node's " +
			"route is removed only after the node is drained and its machine and Node deleted. Each apply ends with the table holding " +
			"exactly the pool's nodes' routes among the `kubewin.<pool>.` ones, and leaves every other route alone. Destroying the pool, " +
			"removing the block or naming another table removes the pool's routes from the table it leaves, after the new table holds " +
			"them.\n\nThe plan refuses a table it cannot read, a table that already holds a route named like the pool's when the pool " +
			"does not keep its routes there yet (kubewin did not write it: delete it, or give the pool another name), a route of another " +
			"writer whose destination overlaps a node's pod CIDR (if it is a `kubewin_pod_route`, remove the resource in one apply, then " +
			"add this block), the route table of a kubewin azure cluster whose cloud-controller-manager keeps the routes " +
			"(`azure.cloud_provider.cloud_routes = true`: it writes this pool's nodes' routes too, and deletes the ones it did not " +
			"write; another cluster's route controller gets a warning, as kubewin does not know its table), and a pool that would not " +
			"fit: the table's other routes plus `node_count` plus `max_surge` (the nodes a " +
			"replacement adds first) must stay within the " + fmt.Sprint(routetable.MaxRoutes) + " routes a route table holds. Use it " +
			"for a pool joining a cluster kubewin did not create, or any pool whose routes kubewin keeps; use `kubewin_pod_route` for " +
			"routers and tables the pool's nodes do not own. The block changes in place.",
		Attributes: map[string]schema.Attribute{
			"route_table": schema.StringAttribute{
				Optional: true,
				Description: requiredInBlock + "The route table, as the pool's backend names one: for `azure`, the route table's resource ID " +
					"(e.g. `azurerm_route_table.pods.id`, associated with the subnets whose traffic must reach the pods); for `local`, the " +
					"name of a route table of the local backend (1-80 letters, digits, '.', '_' or '-'), created on first use.",
			},
		},
	}
}

// podRouteTable is the route table the pool's pod_routes.route_table names on the local
// backend: a local route table's name.
func (l *localPoolModel) podRouteTable(name string) (routeBackend, error) {
	if !routeNameRE.MatchString(name) {
		return nil, fmt.Errorf("%q is not a local route table's name: use 1-80 letters, digits, '.', '_' or '-'", name)
	}
	return &localRouteModel{RouteTable: types.StringValue(name)}, nil
}

// podRouteTable is the route table the pool's pod_routes.route_table names on Azure: a route
// table's resource ID.
func (a *azurePoolModel) podRouteTable(id string) (routeBackend, error) {
	if _, _, err := azure.ParseRouteTableID(id); err != nil {
		return nil, err
	}
	return &azureRouteModel{RouteTableID: types.StringValue(id)}, nil
}

// checkPodRoutes checks the pod_routes block's arguments (ValidateConfig).
func checkPodRoutes(m *nodePoolModel) diag.Diagnostics {
	var diags diag.Diagnostics
	b := m.backend()
	switch {
	case m.PodRoutes == nil || b == nil || m.PodRoutes.RouteTable.IsUnknown():
	case m.PodRoutes.RouteTable.IsNull():
		diags.AddAttributeError(pathPodRoutesTable, "Missing Route Table",
			"Set pod_routes.route_table to the route table the pool keeps its nodes' routes in: an Azure route table's resource ID for the "+
				"azure backend, a route table's name for the local one.")
	default:
		if _, err := b.podRouteTable(m.PodRoutes.RouteTable.ValueString()); err != nil {
			diags.AddAttributeError(pathPodRoutesTable, "Invalid Route Table", err.Error())
		}
	}
	return diags
}

// checkCloudRoutes refuses pod_routes in the route table the cluster's cloud-controller-manager
// keeps: its route controller writes every node's route there and deletes the routes in the
// cluster CIDR it does not find a node for (k8s.io/cloud-provider's route controller,
// reconcile), so the two would fight over this pool's nodes' routes. kubewin knows the table of
// its own azure clusters; of another cluster's route controller it does not, and warns.
func checkCloudRoutes(m *nodePoolModel, facts clusterFacts) diag.Diagnostics {
	var diags diag.Diagnostics
	if m.PodRoutes == nil || m.PodRoutes.RouteTable.IsNull() || m.PodRoutes.RouteTable.IsUnknown() || !facts.CloudRoutes {
		return diags
	}
	table := m.PodRoutes.RouteTable.ValueString()
	if clusterTable, err := azure.ClusterRouteTableID(m.ClusterID.ValueString()); err == nil {
		if strings.EqualFold(clusterTable, table) {
			diags.AddAttributeError(pathPodRoutesTable, "Route Table Kept by the Cloud Provider", fmt.Sprintf("pod_routes.route_table %s is "+
				"the route table of cluster %s, whose cloud-controller-manager keeps every node's route in it (azure.cloud_provider.cloud_routes "+
				"= true), this pool's nodes' too, and deletes the routes it did not write: remove the pod_routes block.", table,
				m.ClusterID.ValueString()))
		}
		return diags
	}
	diags.AddAttributeWarning(pathPodRoutesTable, "Cluster Keeps Its Own Routes", fmt.Sprintf("The cluster's cloud-controller-manager runs its "+
		"route controller (--configure-cloud-routes), which keeps every node's route in its cloud configuration's route table and "+
		"deletes the routes there it did not write. If pod_routes.route_table %s is that table, remove the pod_routes block: the route "+
		"controller already writes this pool's nodes' routes.", table))
	return diags
}

// podRoutes opens the route table the pool keeps its routes in: nil when it keeps none or the
// table is known only at apply (unknown).
func (m *nodePoolModel) podRoutes(ctx context.Context, data *providerData) (t route.Table, unknown bool, err error) {
	if m.PodRoutes == nil || m.backend() == nil {
		return nil, false, nil
	}
	if m.PodRoutes.RouteTable.IsUnknown() {
		return nil, true, nil
	}
	rb, err := m.backend().podRouteTable(m.PodRoutes.RouteTable.ValueString())
	if err != nil {
		return nil, false, err
	}
	return rb.open(ctx, data)
}

// nodeStateModel is a node of the pool's nodes attribute.
type nodeStateModel struct {
	Name    types.String `tfsdk:"name"`
	IP      types.String `tfsdk:"ip"`
	PodCIDR types.String `tfsdk:"pod_cidr"`
	Ready   types.Bool   `tfsdk:"ready"`
}

// checkPoolRoutes checks at plan time that the pool can keep its routes in the table its plan
// names: the table can be read, holds no route named like the pool's that the pool did not
// write, no other writer's route overlapping a node's pod CIDR, and room for the pool.
func (r *nodePoolResource) checkPoolRoutes(ctx context.Context, state tfsdk.State, m *nodePoolModel) diag.Diagnostics {
	var diags diag.Diagnostics
	if m.PodRoutes == nil || checkPodRoutes(m).HasError() {
		return diags
	}
	if _, ok := m.backend().(*localPoolModel); ok {
		diags.Append(checkNotRemote(pathPodRoutesTable)...)
	}
	t, unknown, err := m.podRoutes(ctx, r.data)
	if unknown || m.Name.IsUnknown() {
		return diags
	}
	cannotUse := func(err error) {
		diags.AddAttributeError(pathPodRoutesTable, "Cannot Use the Route Table",
			fmt.Sprintf("pod_routes.route_table = %q: %s. Name a route table that exists and that the provider's credentials may read and "+
				"write (on Azure the Network Contributor role on the table, or Microsoft.Network/routeTables/read, "+
				"Microsoft.Network/routeTables/write and Microsoft.Network/routeTables/routes/read).", m.PodRoutes.RouteTable.ValueString(), err))
	}
	if err != nil {
		cannotUse(err)
		return diags
	}
	table, err := t.Read(ctx)
	if err != nil {
		cannotUse(err)
		return diags
	}
	var old nodePoolModel
	keepsThere := false
	var nodes []nodeStateModel
	if !state.Raw.IsNull() {
		diags.Append(state.Get(ctx, &old)...)
		if prior, _, err := old.podRoutes(ctx, r.data); err == nil && prior != nil {
			keepsThere = prior.Key() == t.Key()
		}
		if !old.Nodes.IsNull() && !old.Nodes.IsUnknown() {
			diags.Append(old.Nodes.ElementsAs(ctx, &nodes, false)...)
		}
	}
	prefix := pool.RoutePrefix(m.Name.ValueString())
	others := 0
	for _, rt := range table.Routes {
		if strings.HasPrefix(rt.Name, prefix) {
			if !keepsThere {
				diags.AddAttributeError(pathPodRoutesTable, "Route Table Holds a Route the Pool Did Not Write",
					fmt.Sprintf("Route %s in route table %s has the name of a route pool %q keeps (%s<node>), but the pool does not keep its routes "+
						"there yet, so kubewin did not write it for this pool: a pool of the same name in another cluster, or one whose routes "+
						"were left behind. Delete the route from the table if nothing uses it, or give this pool another name.", rt.Name,
						table.Name, m.Name.ValueString(), prefix))
			}
			continue
		}
		others++
		for _, n := range nodes {
			cidr, err := ipam.ParsePrefix(n.PodCIDR.ValueString())
			if err == nil && rt.Destination.Overlaps(cidr) {
				diags.AddAttributeError(pathPodRoutesTable, "Route Table Holds a Route to the Pool's Pods",
					fmt.Sprintf("Route %s in route table %s sends %s, which overlaps node %s's pod CIDR %s: the pool writes its own route for the "+
						"node (%s), and a route table takes no overlapping routes. If the route is a kubewin_pod_route, remove that resource and "+
						"apply, then add pod_routes; otherwise delete the route from the table, or name another table.", rt.Name, table.Name,
						rt.Destination, n.Name.ValueString(), cidr, pool.RouteName(m.Name.ValueString(), n.Name.ValueString())))
			}
		}
	}
	if m.NodeCount.IsUnknown() || m.MaxSurge.IsUnknown() {
		return diags
	}
	if need := others + int(m.NodeCount.ValueInt64()+m.MaxSurge.ValueInt64()); need > routetable.MaxRoutes {
		diags.AddAttributeError(path.Root("node_count"), "Pool Does Not Fit the Route Table",
			fmt.Sprintf("Route table %s holds %d routes the pool does not keep; with node_count = %d and max_surge = %d (the nodes a replacement "+
				"adds before it removes old ones) the pool needs up to %d more, %d in all, over the %d routes a route table holds. Lower "+
				"node_count or max_surge, give the pool a route table of its own, or use host-gateway or overlay networking.", table.Name, others,
				m.NodeCount.ValueInt64(), m.MaxSurge.ValueInt64(), need-others, need, routetable.MaxRoutes))
	}
	return diags
}

// leaveRouteTable removes the pool's routes from the table its state names when the plan
// names no table or another one: called once the pool's routes are in the new table.
func (r *nodePoolResource) leaveRouteTable(ctx context.Context, state tfsdk.State, m *nodePoolModel) diag.Diagnostics {
	var diags diag.Diagnostics
	var old nodePoolModel
	if diags.Append(state.Get(ctx, &old)...); diags.HasError() {
		return diags
	}
	prior, _, err := old.podRoutes(ctx, r.data)
	if err != nil || prior == nil {
		return diags
	}
	if now, _, err := m.podRoutes(ctx, r.data); err == nil && now != nil && now.Key() == prior.Key() {
		return diags
	}
	if err := pool.RemoveRoutes(ctx, prior, old.Name.ValueString()); err != nil {
		diags.AddError("Cannot Remove the Pool's Routes", fmt.Sprintf("The pool no longer keeps its routes in %s, but removing them failed: %s. "+
			"Delete the routes named %s<node> from that table.", old.PodRoutes.RouteTable.ValueString(), err, pool.RoutePrefix(old.Name.ValueString())))
	}
	return diags
}

// removePoolRoutes removes the pool's routes from the table it keeps them in, if any.
func (r *nodePoolResource) removePoolRoutes(ctx context.Context, m *nodePoolModel) error {
	t, _, err := m.podRoutes(ctx, r.data)
	if err != nil || t == nil {
		return err
	}
	return pool.RemoveRoutes(ctx, t, m.Name.ValueString())
}

// unrouted warns of the pool's Ready nodes whose route the table it keeps them in lacks or
// holds wrong, and returns how many: the drift of node_count that makes the next plan apply the
// pool, which writes them.
func (r *nodePoolResource) unrouted(ctx context.Context, m *nodePoolModel, nodes []pool.Node, diags *diag.Diagnostics) int {
	t, _, err := m.podRoutes(ctx, r.data)
	if err != nil || t == nil {
		return 0
	}
	missing, err := pool.Unrouted(ctx, t, m.Name.ValueString(), nodes)
	if err != nil {
		diags.AddWarning("Cannot Read the Pool's Route Table", err.Error())
		return 0
	}
	if len(missing) > 0 {
		diags.AddWarning(fmt.Sprintf("Pool %s Has Nodes Without Their Route", m.Name.ValueString()),
			fmt.Sprintf("Route table %s lacks the route of nodes %s, or holds it with another destination or next hop: pods on other nodes "+
				"cannot reach theirs. They do not count towards node_count, so the next apply writes their routes.",
				m.PodRoutes.RouteTable.ValueString(), strings.Join(missing, ", ")))
	}
	return len(missing)
}
