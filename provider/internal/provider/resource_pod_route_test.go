package provider

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"

	"github.com/kubewin/kubewin/internal/routetable"
	"github.com/kubewin/kubewin/provider/internal/local"
)

func podRoutesConfig(provider string, routes map[string][2]string) string {
	var b strings.Builder
	b.WriteString(provider + "locals {\n  nodes = {\n")
	for name, r := range routes {
		fmt.Fprintf(&b, "    %q = { pod_cidr = %q, ip = %q }\n", name, r[0], r[1])
	}
	b.WriteString(`  }
}

resource "kubewin_pod_route" "node" {
  for_each    = local.nodes
  local {
    route_table = "pods"
  }
  name        = each.key
  destination = each.value.pod_cidr
  next_hop    = each.value.ip
}
`)
	return b.String()
}

func TestAccPodRoute(t *testing.T) {
	t.Parallel()
	state, provider := testAccLocal(t)
	b, _ := local.New(state, nil)
	tableHas := func(want int) func() error {
		return func() error {
			table, err := b.RouteTable("pods")
			if err != nil {
				return err
			}
			if len(table.Routes) != want {
				return fmt.Errorf("route table has %d routes, want %d: %v", len(table.Routes), want, table.Routes)
			}
			return nil
		}
	}
	three := map[string][2]string{
		"win000000": {"10.244.0.0/24", "10.240.0.4"},
		"win000001": {"10.244.1.0/24", "10.240.0.5"},
		"win000002": {"10.244.2.0/24", "10.240.0.6"},
	}
	moved := map[string][2]string{
		"win000000": {"10.244.0.0/24", "10.240.0.4"},
		"win000001": {"10.244.1.0/24", "10.240.0.9"},
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: podRoutesConfig(provider, three),
				ConfigStateChecks: []statecheck.StateCheck{
					checkFunc(tableHas(3)),
					checkFunc(func() error {
						table, _ := b.RouteTable("pods")
						r, ok := table.Find("win000001")
						if !ok || r.Destination.String() != "10.244.1.0/24" || r.NextHop.String() != "10.240.0.5" {
							return fmt.Errorf("route win000001 = %+v", r)
						}
						return nil
					}),
				},
			},
			{
				// A node moved: its route is updated in place; a node removed: its route goes.
				Config: podRoutesConfig(provider, moved),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(`kubewin_pod_route.node["win000001"]`, plancheck.ResourceActionUpdate),
					plancheck.ExpectResourceAction(`kubewin_pod_route.node["win000002"]`, plancheck.ResourceActionDestroy),
				}},
				ConfigStateChecks: []statecheck.StateCheck{checkFunc(tableHas(2))},
			},
			{
				// Every route removed from the configuration leaves the table.
				Config:            provider,
				ConfigStateChecks: []statecheck.StateCheck{checkFunc(tableHas(0))},
			},
		},
	})
}

func TestAccPodRoute_import(t *testing.T) {
	t.Parallel()
	_, provider := testAccLocal(t)
	config := provider + `resource "kubewin_pod_route" "test" {
  local {
    route_table = "pods"
  }
  name        = "win000000"
  destination = "10.244.0.0/24"
  next_hop    = "10.240.0.4"
}`
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: config},
			{ResourceName: "kubewin_pod_route.test", ImportState: true, ImportStateId: "pods/win000000", ImportStateVerify: true, Config: config},
		},
	})
}

func TestAccPodRoute_limits(t *testing.T) {
	t.Parallel()
	_, provider := testAccLocal(t)
	tooMany := map[string][2]string{}
	for i := range routetable.MaxRoutes + 1 {
		tooMany[fmt.Sprintf("win%06d", i)] = [2]string{fmt.Sprintf("10.%d.%d.0/24", 200+i/256, i%256), "10.240.0.4"}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config:      podRoutesConfig(provider, tooMany),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)Route Does Not Fit the Route Table.*already holds 400 routes`),
			},
			{
				Config: podRoutesConfig(provider, map[string][2]string{
					"a": {"10.244.0.0/24", "10.240.0.4"},
					"b": {"10.244.0.0/16", "10.240.0.5"},
				}),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)Route Does Not Fit the Route Table.*overlaps`),
			},
			{
				Config:      podRoutesConfig(provider, map[string][2]string{"a": {"10.244.0.0/24", "fe80::1"}}),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`IPv6 is not supported yet`),
			},
		},
	})
}

// checkFunc is a state check that looks at the backend rather than the state (the legacy Check
// functions cannot read for_each instances).
type checkFunc func() error

func (f checkFunc) CheckState(_ context.Context, _ statecheck.CheckStateRequest, resp *statecheck.CheckStateResponse) {
	resp.Error = f()
}
