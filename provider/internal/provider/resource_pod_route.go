package provider

import (
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"sync"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/kubewin/kubewin/internal/ipam"
	"github.com/kubewin/kubewin/internal/routetable"
	"github.com/kubewin/kubewin/provider/internal/azure"
	"github.com/kubewin/kubewin/provider/internal/local"
	"github.com/kubewin/kubewin/provider/internal/route"
)

var (
	_ resource.Resource                   = (*podRouteResource)(nil)
	_ resource.ResourceWithConfigure      = (*podRouteResource)(nil)
	_ resource.ResourceWithImportState    = (*podRouteResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*podRouteResource)(nil)
	_ resource.ResourceWithValidateConfig = (*podRouteResource)(nil)
)

func newPodRouteResource() resource.Resource { return &podRouteResource{} }

type podRouteResource struct{ data *providerData }

type podRouteModel struct {
	Name        types.String     `tfsdk:"name"`
	Destination types.String     `tfsdk:"destination"`
	NextHop     types.String     `tfsdk:"next_hop"`
	Local       *localRouteModel `tfsdk:"local"`
	Azure       *azureRouteModel `tfsdk:"azure"`
	ID          types.String     `tfsdk:"id"`
}

type localRouteModel struct {
	RouteTable types.String `tfsdk:"route_table"`
}

type azureRouteModel struct {
	RouteTableID types.String `tfsdk:"route_table_id"`
}

var routeNameRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9_.-]{0,78}[A-Za-z0-9_])?$`)

func (r *podRouteResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_pod_route"
}

func (r *podRouteResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	resp.Schema = schema.Schema{
		Description: "A route that sends a node's pod CIDR to the node, in a route table: the guides' \"upstream L3 routing\" for " +
			"`l2bridge` networks. Name the table in a backend block: `local` (a route table of the local backend, a file) or `azure` " +
			"(an Azure route table, associated with the nodes' subnet). Use it with `count` over a node pool's `nodes`. A route table holds at " +
			"most " +
			fmt.Sprint(routetable.MaxRoutes) + " routes (Azure's limit per route table, which the local route table keeps too) and no two " +
			"overlapping destinations; both are checked at plan time, against the table's routes and the others planned. For the nodes of a " +
			"`kubewin_windows_node_pool`, the pool's `pod_routes` block keeps their routes itself, each written before the pool counts its " +
			"node Ready (this resource is written after the pool's apply); use this resource for routers and tables the pool does not own." +
			verifiedAzure,
		Blocks: map[string]schema.Block{
			"local": schema.SingleNestedBlock{
				Description: "The route goes into a route table of the local backend.",
				PlanModifiers: []planmodifier.Object{objectplanmodifier.RequiresReplaceIf(backendChanged, "Moving the route to another backend replaces it.",
					"")},
				Attributes: map[string]schema.Attribute{
					"route_table": schema.StringAttribute{
						Optional:      true,
						PlanModifiers: replace,
						Validators:    []validator.String{stringvalidator.RegexMatches(routeNameRE, "must be 1-80 letters, digits, '.', '_' or '-'")},
						Description:   requiredInBlock + "Name of the route table, created on first use.",
					},
				},
			},
			"azure": schema.SingleNestedBlock{
				Description: "The route goes into an Azure route table, with next hop type `VirtualAppliance` (the node's NIC, which the " +
					"`azure` node pool creates with IP forwarding). Writes to one table are serialised, and the routes that wait while " +
					"one runs go together in the next write of the whole table, conditional on its etag (a table another writer changed " +
					"in between is read and written again; its other routes, tags and settings stay); throttling and conflicts with " +
					"other operations on the table are retried. The provider's credentials need Microsoft.Network/routeTables/read and " +
					"write on the table (Network Contributor has them).",
				PlanModifiers: []planmodifier.Object{objectplanmodifier.RequiresReplaceIf(backendChanged, "Moving the route to another backend replaces it.",
					"")},
				Attributes: map[string]schema.Attribute{
					"route_table_id": schema.StringAttribute{
						Optional:      true,
						PlanModifiers: replace,
						Description: requiredInBlock + "Resource ID of the route table, e.g. `azurerm_route_table.pods.id`. A plan warns when it is not " +
							"associated with the subnet of `next_hop`.",
					},
				},
			},
		},
		Attributes: map[string]schema.Attribute{
			"name": schema.StringAttribute{
				Required:      true,
				PlanModifiers: replace,
				Validators:    []validator.String{stringvalidator.RegexMatches(routeNameRE, "must be 1-80 letters, digits, '.', '_' or '-'")},
				Description:   "Name of the route, unique in its table; the node's name is a good choice.",
			},
			"destination": schema.StringAttribute{
				Required:    true,
				Validators:  []validator.String{cidrValidator{}},
				Description: "The node's pod CIDR, e.g. `10.244.3.0/24`.",
			},
			"next_hop": schema.StringAttribute{
				Required:    true,
				Validators:  []validator.String{ipValidator{}},
				Description: "The node's IP address.",
			},
			"id": schema.StringAttribute{
				Computed:      true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
				Description:   "`<route_table>/<name>` for the local backend; the route's resource ID on Azure.",
			},
		},
	}
	noteReplacements(ctx, &resp.Schema)
}

// backendChanged replaces a resource whose backend block appears or goes.
func backendChanged(_ context.Context, req planmodifier.ObjectRequest, resp *objectplanmodifier.RequiresReplaceIfFuncResponse) {
	resp.RequiresReplace = !req.StateValue.IsNull() && req.StateValue.IsNull() != req.PlanValue.IsNull()
}

func (r *podRouteResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = configuredData(req.ProviderData, &resp.Diagnostics)
}

func (r *podRouteResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m podRouteModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(checkOneBackend(m.Local, m.Azure,
		"The route does not say which route table it goes into. "+
			"Add `local { route_table = \"<name>\" }` (the local backend) or `azure { route_table_id = \"<resource ID>\" }`.",
		"local or azure")...)
	if b := m.backend(); b != nil {
		resp.Diagnostics.Append(b.validate()...)
	}
}

// routeBackend is a route's backend block: what differs between the backends' route tables in
// the resource.
type routeBackend interface {
	validate() diag.Diagnostics
	// open opens the route's table; unknown is true when its name is known only at apply.
	open(ctx context.Context, data *providerData) (t route.Table, unknown bool, err error)
	// checkPlan checks the plan of a route, before its table is read.
	checkPlan() diag.Diagnostics
	// checkTable checks the table a route to hop is planned into.
	checkTable(ctx context.Context, t route.Table, hop netip.Addr) diag.Diagnostics
}

// Both blocks implement routeBackend, checked here: oneBackend's run-time assertion would yield nil.
var (
	_ routeBackend = (*localRouteModel)(nil)
	_ routeBackend = (*azureRouteModel)(nil)
)

// backend is the backend the route's block names; nil when it names none or both.
func (m *podRouteModel) backend() routeBackend { return oneBackend[routeBackend](m.Local, m.Azure) }

func (l *localRouteModel) validate() diag.Diagnostics {
	var diags diag.Diagnostics
	if l.RouteTable.IsNull() {
		diags.AddAttributeError(path.Root("local").AtName("route_table"), "Missing Route Table", "Set local.route_table to the name of the route table.")
	}
	return diags
}

func (l *localRouteModel) open(_ context.Context, data *providerData) (route.Table, bool, error) {
	if l.RouteTable.IsUnknown() {
		return nil, true, nil
	}
	return local.Table{Backend: data.local, Name: l.RouteTable.ValueString()}, false, nil
}

func (l *localRouteModel) checkPlan() diag.Diagnostics { return checkNotRemote(path.Root("local")) }

func (l *localRouteModel) checkTable(context.Context, route.Table, netip.Addr) diag.Diagnostics {
	return nil
}

func (a *azureRouteModel) validate() diag.Diagnostics {
	var diags diag.Diagnostics
	switch {
	case a.RouteTableID.IsNull():
		diags.AddAttributeError(path.Root("azure").AtName("route_table_id"), "Missing Route Table",
			"Set azure.route_table_id to the route table's resource ID.")
	case !a.RouteTableID.IsUnknown():
		if _, _, err := azure.ParseRouteTableID(a.RouteTableID.ValueString()); err != nil {
			diags.AddAttributeError(path.Root("azure").AtName("route_table_id"), "Invalid Route Table ID", err.Error())
		}
	}
	return diags
}

func (a *azureRouteModel) open(ctx context.Context, data *providerData) (route.Table, bool, error) {
	if a.RouteTableID.IsUnknown() {
		return nil, true, nil
	}
	c, err := data.azure(ctx)
	if err != nil {
		return nil, false, err
	}
	t, err := c.OpenRouteTable(a.RouteTableID.ValueString())
	return azure.PodRouteTable{RouteTable: t}, false, err
}

func (a *azureRouteModel) checkPlan() diag.Diagnostics { return nil }

// checkTable warns when the Azure route table is not associated with the subnet of the next
// hop: the nodes' traffic would not use the route.
func (a *azureRouteModel) checkTable(ctx context.Context, t route.Table, hop netip.Addr) diag.Diagnostics {
	var diags diag.Diagnostics
	if t.Serves(ctx, hop) {
		return diags
	}
	diags.AddAttributeWarning(path.Root("azure").AtName("route_table_id"), "Route Table Not Associated With the Nodes' Subnet",
		fmt.Sprintf("Route table %s is associated with no subnet holding the next hop %s: pods on other nodes will not reach this node's pods "+
			"through it. "+
			"Associate the table with the nodes' subnet (azurerm_subnet_route_table_association).", a.RouteTableID.ValueString(), hop))
	return diags
}

// table opens the route's table; unknown is true when its name is known only at apply.
func (r *podRouteResource) table(ctx context.Context, m *podRouteModel) (t route.Table, unknown bool, err error) {
	b := m.backend()
	if b == nil {
		return nil, false, fmt.Errorf("the route names no backend")
	}
	return b.open(ctx, r.data)
}

// planned remembers, per route table, the routes this provider process has planned, so that the
// table's limits hold for a whole configuration (count over hundreds of nodes) at plan time.
var planned = struct {
	sync.Mutex
	routes  map[string]map[string]routetable.Route
	deleted map[string]map[string]bool
}{routes: map[string]map[string]routetable.Route{}, deleted: map[string]map[string]bool{}}

func (r *podRouteResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if r.data == nil {
		return
	}
	if req.Plan.Raw.IsNull() {
		var old podRouteModel
		resp.Diagnostics.Append(req.State.Get(ctx, &old)...)
		if t, unknown, err := r.table(ctx, &old); err == nil && !unknown {
			planned.Lock()
			mark(planned.deleted, t.Key(), old.Name.ValueString())
			planned.Unlock()
		}
		return
	}
	var m podRouteModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	b := m.backend()
	if b != nil {
		resp.Diagnostics.Append(b.checkPlan()...)
	}
	if resp.Diagnostics.HasError() || b == nil || m.Name.IsUnknown() || m.Destination.IsUnknown() || m.NextHop.IsUnknown() {
		return
	}
	route, err := routeOf(m)
	if err != nil {
		return // reported by the attribute validators
	}
	t, unknown, err := r.table(ctx, &m)
	if unknown {
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Cannot Reach the Route Table", err.Error())
		return
	}
	current, err := t.Read(ctx)
	if err != nil {
		resp.Diagnostics.AddError("Cannot Read the Route Table", err.Error())
		return
	}
	resp.Diagnostics.Append(b.checkTable(ctx, t, route.NextHop)...)
	planned.Lock()
	defer planned.Unlock()
	key := t.Key()
	if planned.routes[key] == nil {
		planned.routes[key] = map[string]routetable.Route{}
	}
	planned.routes[key][route.Name] = route
	// The table as this plan leaves it: its routes, minus those planned away, plus those planned.
	whole := &routetable.Table{Name: current.Name}
	for _, existing := range current.Routes {
		if !planned.deleted[key][existing.Name] {
			whole.Routes = append(whole.Routes, existing)
		}
	}
	for name, p := range planned.routes[key] {
		if name != route.Name {
			whole.Remove(name)
			whole.Routes = append(whole.Routes, p)
		}
	}
	if err := whole.CheckAdd(route); err != nil {
		attr := path.Root("destination")
		if strings.Contains(err.Error(), "already holds") {
			attr = path.Root("name")
		}
		resp.Diagnostics.AddAttributeError(attr, "Route Does Not Fit the Route Table", err.Error())
	}
}

func mark(m map[string]map[string]bool, table, name string) {
	if m[table] == nil {
		m[table] = map[string]bool{}
	}
	m[table][name] = true
}

func routeOf(m podRouteModel) (routetable.Route, error) {
	dst, err := ipam.ParsePrefix(m.Destination.ValueString())
	if err != nil {
		return routetable.Route{}, err
	}
	hop, err := ipam.ParseAddr(m.NextHop.ValueString())
	if err != nil {
		return routetable.Route{}, err
	}
	return routetable.Route{Name: m.Name.ValueString(), Destination: dst, NextHop: hop}, nil
}

func (r *podRouteResource) put(ctx context.Context, m *podRouteModel) error {
	route, err := routeOf(*m)
	if err != nil {
		return err
	}
	t, _, err := r.table(ctx, m)
	if err != nil {
		return err
	}
	m.ID = types.StringValue(t.RouteID(route.Name))
	return t.Put(ctx, route)
}

func (r *podRouteResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m podRouteModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.put(ctx, &m); err != nil {
		resp.Diagnostics.AddError("Cannot Create Route", fmt.Sprintf("Route %q: %s", m.Name.ValueString(), err))
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *podRouteResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m podRouteModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	t, _, err := r.table(ctx, &m)
	if err != nil {
		resp.Diagnostics.AddError("Cannot Reach the Route Table", err.Error())
		return
	}
	route, ok, err := t.Get(ctx, m.Name.ValueString())
	if err != nil {
		resp.Diagnostics.AddError("Cannot Read Route", err.Error())
		return
	}
	if !ok {
		resp.State.RemoveResource(ctx)
		return
	}
	m.Destination, m.NextHop = types.StringValue(route.Destination.String()), types.StringValue(route.NextHop.String())
	m.ID = types.StringValue(t.RouteID(route.Name))
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *podRouteResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m podRouteModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.put(ctx, &m); err != nil {
		resp.Diagnostics.AddError("Cannot Update Route", fmt.Sprintf("Route %q: %s", m.Name.ValueString(), err))
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *podRouteResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m podRouteModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	t, _, err := r.table(ctx, &m)
	if err == nil {
		err = t.Remove(ctx, m.Name.ValueString())
	}
	if err != nil {
		resp.Diagnostics.AddError("Cannot Delete Route", err.Error())
	}
}

// ImportState takes a route's Azure resource ID, or <route_table>/<name> for the local backend.
func (r *podRouteResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	m := podRouteModel{ID: types.StringValue(req.ID), Destination: types.StringNull(), NextHop: types.StringNull()}
	if strings.HasPrefix(strings.ToLower(req.ID), "/subscriptions/") {
		tableID, name, err := azure.ParseRouteID(req.ID)
		if err != nil {
			resp.Diagnostics.AddError("Invalid Import ID", err.Error())
			return
		}
		m.Name, m.Azure = types.StringValue(name), &azureRouteModel{RouteTableID: types.StringValue(tableID)}
	} else {
		table, name, ok := strings.Cut(req.ID, "/")
		if !ok || table == "" || name == "" {
			resp.Diagnostics.AddError("Invalid Import ID",
				fmt.Sprintf("%q is neither a route's Azure resource ID nor <route_table>/<name> of the local backend.", req.ID))
			return
		}
		m.Name, m.Local = types.StringValue(name), &localRouteModel{RouteTable: types.StringValue(table)}
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
