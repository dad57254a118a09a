package provider

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/kubewin/kubewin/internal/ipam"
	"github.com/kubewin/kubewin/provider/internal/local"
)

var (
	_ resource.Resource                = (*podRouteResource)(nil)
	_ resource.ResourceWithConfigure   = (*podRouteResource)(nil)
	_ resource.ResourceWithImportState = (*podRouteResource)(nil)
	_ resource.ResourceWithModifyPlan  = (*podRouteResource)(nil)
)

func newPodRouteResource() resource.Resource { return &podRouteResource{} }

type podRouteResource struct{ data *providerData }

type podRouteModel struct {
	RouteTable  types.String `tfsdk:"route_table"`
	Name        types.String `tfsdk:"name"`
	Destination types.String `tfsdk:"destination"`
	NextHop     types.String `tfsdk:"next_hop"`
	ID          types.String `tfsdk:"id"`
}

var routeNameRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9_.-]{0,78}[A-Za-z0-9_])?$`)

func (r *podRouteResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_pod_route"
}

func (r *podRouteResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	resp.Schema = schema.Schema{
		Description: "A route that sends a node's pod CIDR to the node, in a route table: the guides' \"upstream L3 routing\" for " +
			"`l2bridge` networks. Use it with `for_each` over a node pool's `nodes`. A route table holds at most " +
			fmt.Sprint(local.MaxRoutes) + " routes (Azure's limit per route table, which the local route table keeps too) and no two overlapping destinations; both are checked at plan time.",
		Attributes: map[string]schema.Attribute{
			"route_table": schema.StringAttribute{
				Required: true, PlanModifiers: replace,
				Validators:  []validator.String{stringvalidator.RegexMatches(routeNameRE, "must be 1-80 letters, digits, '.', '_' or '-'")},
				Description: "Name of the route table (in the local backend, created on first use).",
			},
			"name": schema.StringAttribute{
				Required: true, PlanModifiers: replace,
				Validators:  []validator.String{stringvalidator.RegexMatches(routeNameRE, "must be 1-80 letters, digits, '.', '_' or '-'")},
				Description: "Name of the route, unique in its table; the node's name is a good choice.",
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
				Computed: true, PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
				Description: "`<route_table>/<name>`.",
			},
		},
	}
}

func (r *podRouteResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = configuredData(req.ProviderData, &resp.Diagnostics)
}

// planned remembers, per route table, the routes this provider process has planned, so that the
// table's limits hold for a whole configuration (for_each over hundreds of nodes) at plan time.
var planned = struct {
	sync.Mutex
	routes  map[string]map[string]local.Route
	deleted map[string]map[string]bool
}{routes: map[string]map[string]local.Route{}, deleted: map[string]map[string]bool{}}

func (r *podRouteResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if r.data == nil {
		return
	}
	if req.Plan.Raw.IsNull() {
		var old podRouteModel
		resp.Diagnostics.Append(req.State.Get(ctx, &old)...)
		planned.Lock()
		mark(planned.deleted, old.RouteTable.ValueString(), old.Name.ValueString())
		planned.Unlock()
		return
	}
	var m podRouteModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || m.RouteTable.IsUnknown() || m.Name.IsUnknown() || m.Destination.IsUnknown() || m.NextHop.IsUnknown() {
		return
	}
	route, err := routeOf(m)
	if err != nil {
		return // reported by the attribute validators
	}
	table, err := r.data.local.RouteTable(m.RouteTable.ValueString())
	if err != nil {
		resp.Diagnostics.AddError("Cannot Read Route Table", err.Error())
		return
	}
	planned.Lock()
	defer planned.Unlock()
	tableName := table.Name
	if planned.routes[tableName] == nil {
		planned.routes[tableName] = map[string]local.Route{}
	}
	planned.routes[tableName][route.Name] = route
	// The table as this plan leaves it: its routes, minus those planned away, plus those planned.
	whole := &local.RouteTable{Name: tableName}
	for _, existing := range table.Routes {
		if !planned.deleted[tableName][existing.Name] {
			whole.Routes = append(whole.Routes, existing)
		}
	}
	for name, p := range planned.routes[tableName] {
		if name != route.Name {
			whole.Remove(name)
			whole.Routes = append(whole.Routes, p)
		}
	}
	if err := whole.CheckAdd(route); err != nil {
		attr := path.Root("destination")
		if strings.Contains(err.Error(), "already holds") {
			attr = path.Root("route_table")
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

func routeOf(m podRouteModel) (local.Route, error) {
	dst, err := ipam.ParsePrefix(m.Destination.ValueString())
	if err != nil {
		return local.Route{}, err
	}
	hop, err := ipam.ParseAddr(m.NextHop.ValueString())
	if err != nil {
		return local.Route{}, err
	}
	return local.Route{Name: m.Name.ValueString(), Destination: dst, NextHop: hop}, nil
}

func (r *podRouteResource) put(m *podRouteModel) error {
	route, err := routeOf(*m)
	if err != nil {
		return err
	}
	m.ID = types.StringValue(m.RouteTable.ValueString() + "/" + m.Name.ValueString())
	return r.data.local.UpdateRouteTable(m.RouteTable.ValueString(), func(t *local.RouteTable) error { return t.Put(route) })
}

func (r *podRouteResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m podRouteModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.put(&m); err != nil {
		resp.Diagnostics.AddError("Cannot Create Route", fmt.Sprintf("Route %q in table %q: %s", m.Name.ValueString(), m.RouteTable.ValueString(), err))
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
	table, err := r.data.local.RouteTable(m.RouteTable.ValueString())
	if err != nil {
		resp.Diagnostics.AddError("Cannot Read Route Table", err.Error())
		return
	}
	route, ok := table.Find(m.Name.ValueString())
	if !ok {
		resp.State.RemoveResource(ctx)
		return
	}
	m.Destination, m.NextHop = types.StringValue(route.Destination.String()), types.StringValue(route.NextHop.String())
	m.ID = types.StringValue(table.Name + "/" + route.Name)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *podRouteResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m podRouteModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.put(&m); err != nil {
		resp.Diagnostics.AddError("Cannot Update Route", fmt.Sprintf("Route %q in table %q: %s", m.Name.ValueString(), m.RouteTable.ValueString(), err))
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
	err := r.data.local.UpdateRouteTable(m.RouteTable.ValueString(), func(t *local.RouteTable) error {
		t.Remove(m.Name.ValueString())
		return nil
	})
	if err != nil {
		resp.Diagnostics.AddError("Cannot Delete Route", err.Error())
	}
}

func (r *podRouteResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	table, name, ok := strings.Cut(req.ID, "/")
	if !ok || table == "" || name == "" {
		resp.Diagnostics.AddError("Invalid Import ID", fmt.Sprintf("%q is not of the form <route_table>/<name>.", req.ID))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("route_table"), table)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), name)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
}
