package provider

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubewin/kubewin/internal/routetable"
	"github.com/kubewin/kubewin/provider/internal/azure"
	"github.com/kubewin/kubewin/provider/internal/local"
	"github.com/kubewin/kubewin/provider/internal/pool"
	"github.com/kubewin/kubewin/provider/internal/route"
)

// A pool on a scale set of the ARM test server keeps its nodes' routes in an Azure route table.
func TestAccWindowsNodePool_azurePodRoutes(t *testing.T) {
	t.Parallel()
	state, provider := testAccLocal(t)
	f := newAzureFixture(t, state)
	rt, err := azureClient(t).OpenRouteTable(f.routeTableID)
	if err != nil {
		t.Fatal(err)
	}
	secondID, err := armServer.AddRouteTable(f.group, "pods2")
	if err != nil {
		t.Fatal(err)
	}
	second, err := azureClient(t).OpenRouteTable(secondID)
	if err != nil {
		t.Fatal(err)
	}
	testAccPoolRoutes(t, state, provider, f.poolBackend(), [2]route.Table{azure.PodRouteTable{RouteTable: rt}, azure.PodRouteTable{RouteTable: second}},
		[2]string{f.routeTableID, secondID})
}

// A pool of the local backend keeps its nodes' routes in a local route table.
func TestAccWindowsNodePool_localPodRoutes(t *testing.T) {
	t.Parallel()
	state, provider := testAccLocal(t)
	b := testBackend(t, state)
	be := poolBackend{
		block:  func(image string) string { return fmt.Sprintf("  local {\n    image = %q\n  }", image) },
		imageA: testImage(t, b, "a"), imageB: testImage(t, b, "b"),
	}
	testAccPoolRoutes(t, state, provider, be, [2]route.Table{local.Table{Backend: b, Name: "pods"}, local.Table{Backend: b, Name: "pods2"}},
		[2]string{"pods", "pods2"})
}

// poolRoutesConfig is a pool that keeps its routes in table; none when table is "".
func poolRoutesConfig(provider string, be poolBackend, image string, count int, table string) string {
	block := ""
	if table != "" {
		block = fmt.Sprintf("  pod_routes {\n    route_table = %q\n  }\n", table)
	}
	return poolConfigWith(provider, be, image, count, block)
}

// testAccPoolRoutes creates a pool of 5 that keeps its routes in tables[0], scales it to 8 and
// to 3, replaces its nodes surge-first for a new image, moves its routes to tables[1], and
// destroys it, checking after each step that the table holds exactly the pool's nodes' routes
// (pod CIDR via InternalIP, as the cluster has them) besides another writer's route, which
// stays. The plan refuses a route named like the pool's that kubewin did not write, another
// writer's route to a node's pod CIDR, and a pool that does not fit the table. refs name the
// tables in the configuration.
func testAccPoolRoutes(t *testing.T, state, provider string, be poolBackend, tables [2]route.Table, refs [2]string) {
	table, tableRef := tables[0], refs[0]
	client := adminClient(t, testBackend(t, state), "pooltest")
	ctx := context.Background()
	other := routetable.Route{Name: "linux000000", Destination: netip.MustParsePrefix("10.244.250.0/24"), NextHop: netip.MustParseAddr("10.240.0.250")}
	foreign := routetable.Route{Name: pool.RouteName("win", "win00zzzz"), Destination: netip.MustParsePrefix("10.244.251.0/24"),
		NextHop: netip.MustParseAddr("10.240.0.251")}
	put := func(r routetable.Route) func() {
		return func() {
			if err := table.Put(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
	}
	remove := func(name string) func() {
		return func() {
			if err := table.Remove(ctx, name); err != nil {
				t.Fatal(err)
			}
		}
	}
	// holds checks table against the pool's Nodes, and the other table.
	holds := func(count int, table, other2 route.Table) statecheck.StateCheck {
		return checkFunc(func() error {
			nodes, err := client().CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "kubewin.io/pool=win"})
			if err != nil {
				return err
			}
			if len(nodes.Items) != count {
				return fmt.Errorf("%d pool nodes, want %d", len(nodes.Items), count)
			}
			rt, err := other2.Read(ctx)
			if err != nil {
				return err
			}
			for _, r := range rt.Routes {
				if strings.HasPrefix(r.Name, pool.RoutePrefix("win")) {
					return fmt.Errorf("the table the pool does not use holds its route %s", r.Name)
				}
			}
			want := map[string]string{}
			if table == tables[0] {
				want[other.Name] = other.Destination.String() + " via " + other.NextHop.String()
			}
			for _, n := range nodes.Items {
				ip := ""
				for _, a := range n.Status.Addresses {
					if a.Type == corev1.NodeInternalIP {
						ip = a.Address
					}
				}
				if n.Spec.PodCIDR == "" || ip == "" {
					return fmt.Errorf("node %s has pod CIDR %q and InternalIP %q", n.Name, n.Spec.PodCIDR, ip)
				}
				want[pool.RouteName("win", n.Name)] = n.Spec.PodCIDR + " via " + ip
			}
			if rt, err = table.Read(ctx); err != nil {
				return err
			}
			got := map[string]string{}
			for _, r := range rt.Routes {
				got[r.Name] = r.Destination.String() + " via " + r.NextHop.String()
			}
			if !maps.Equal(got, want) {
				return fmt.Errorf("the route table holds\n%v\nwant\n%v", got, want)
			}
			return nil
		})
	}
	checksIn := func(i, count int) []statecheck.StateCheck {
		return []statecheck.StateCheck{
			statecheck.ExpectKnownValue("kubewin_windows_node_pool.win", tfjsonpath.New("nodes"), knownvalue.ListSizeExact(count)),
			statecheck.ExpectKnownValue("kubewin_windows_node_pool.win", tfjsonpath.New("pod_routes").AtMapKey("route_table"),
				knownvalue.StringExact(refs[i])),
			holds(count, tables[i], tables[1-i]),
		}
	}
	checks := func(count int) []statecheck.StateCheck { return checksIn(0, count) }
	var overlapping routetable.Route
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			rt, err := table.Read(ctx)
			if err != nil {
				return err
			}
			if len(rt.Routes) != 1 || rt.Routes[0] != other {
				return fmt.Errorf("after destroy the route table holds %v, want only %s", rt.Routes, other.Name)
			}
			if rt, err := tables[1].Read(ctx); err != nil || len(rt.Routes) != 0 {
				return fmt.Errorf("after destroy the second route table holds %v (%v)", rt, err)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				PreConfig: func() { put(other)(); put(foreign)() },
				Config:    poolRoutesConfig(provider, be, be.imageA, 5, tableRef), PlanOnly: true,
				ExpectError: regexp.MustCompile(`(?s)Route Table Holds a Route the Pool Did Not Write.*` + regexp.QuoteMeta(foreign.Name) +
					`.*Delete the route`),
			},
			{PreConfig: remove(foreign.Name), Config: poolRoutesConfig(provider, be, be.imageA, 5, tableRef), ConfigStateChecks: checks(5)},
			{Config: poolRoutesConfig(provider, be, be.imageA, 8, tableRef), ConfigStateChecks: checks(8)},
			{
				// Another writer's route to a node's pod CIDR (as a kubewin_pod_route for it would be).
				PreConfig: func() {
					n, err := client().CoreV1().Nodes().Get(ctx, "win000000", metav1.GetOptions{})
					if err != nil {
						t.Fatal(err)
					}
					// The pool's route goes for a moment, so that the table takes the overlapping one.
					remove(pool.RouteName("win", "win000000"))()
					overlapping = routetable.Route{Name: "win000000", Destination: netip.MustParsePrefix(n.Spec.PodCIDR),
						NextHop: netip.MustParseAddr("10.240.0.252")}
					put(overlapping)()
				},
				Config: poolRoutesConfig(provider, be, be.imageA, 8, tableRef), PlanOnly: true,
				ExpectError: regexp.MustCompile(`(?s)Route Table Holds a Route to the Pool's Pods.*Route win000000 .*overlaps\s+node\s+win000000's`),
			},
			{
				// The next apply, once the other route is gone, writes the node's route again.
				PreConfig: func() { remove(overlapping.Name)() }, Config: poolRoutesConfig(provider, be, be.imageA, 3, tableRef),
				ConfigStateChecks: checks(3),
			},
			{Config: poolRoutesConfig(provider, be, be.imageB, 3, tableRef), ConfigStateChecks: append(checks(3), noNodesOf("win000000", client))},
			{
				Config: poolRoutesConfig(provider, be, be.imageB, routetable.MaxRoutes, tableRef), PlanOnly: true,
				ExpectError: regexp.MustCompile(`(?s)Pool Does Not Fit the Route Table.*holds 1 routes the pool does not keep.*node_count = 400\s+and` +
					`\s+max_surge =\s+1.*needs up\s+to 401 more, 402 in all`),
			},
			{
				// Another table: the pool's routes are written there, then removed from the first.
				Config: poolRoutesConfig(provider, be, be.imageB, 3, refs[1]), ConfigStateChecks: checksIn(1, 3),
			},
			{
				// The block removed: the pool's routes leave the table.
				Config: poolRoutesConfig(provider, be, be.imageB, 3, ""),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("kubewin_windows_node_pool.win", tfjsonpath.New("pod_routes"), knownvalue.Null()),
					checkFunc(func() error {
						for i, tbl := range tables {
							rt, err := tbl.Read(ctx)
							if err != nil || len(rt.Routes) != 1-i {
								return fmt.Errorf("route table %s holds %v (%v) once the pool keeps no routes", refs[i], rt, err)
							}
						}
						return nil
					}),
				},
			},
			// The block added to a pool with nodes: their routes are written.
			{Config: poolRoutesConfig(provider, be, be.imageB, 3, tableRef), ConfigStateChecks: checks(3)},
			{
				// A route deleted outside Terraform: the refresh counts its node out, and the apply writes it again.
				PreConfig: func() {
					nodes, err := client().CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "kubewin.io/pool=win"})
					if err != nil || len(nodes.Items) == 0 {
						t.Fatalf("pool nodes: %v (%v)", nodes, err)
					}
					remove(pool.RouteName("win", nodes.Items[0].Name))()
				},
				Config: poolRoutesConfig(provider, be, be.imageB, 3, tableRef),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("kubewin_windows_node_pool.win", plancheck.ResourceActionUpdate),
				}},
				ConfigStateChecks: checks(3),
			},
		},
	})
	remove(other.Name)()
}

// noNodesOf checks that the surge replacement replaced the named node.
func noNodesOf(name string, client func() kubernetes.Interface) statecheck.StateCheck {
	return checkFunc(func() error {
		nodes, err := client().CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: "kubewin.io/pool=win"})
		if err != nil {
			return err
		}
		for _, n := range nodes.Items {
			if strings.EqualFold(n.Name, name) {
				return fmt.Errorf("node %s was not replaced", name)
			}
		}
		return nil
	})
}
