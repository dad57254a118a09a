package azure

import (
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"

	"github.com/kubewin/kubewin/internal/routetable"
)

// routeTableFixture is a route table in its own resource group holding a route kubewin did not
// write, with tags and BGP route propagation disabled, and a client reaching it through transport
// (nil: the default).
func routeTableFixture(t *testing.T, group string, transport http.RoundTripper) *RouteTable {
	t.Helper()
	server.AddResourceGroup(group)
	id, err := server.AddRouteTable(group, "pods")
	if err != nil {
		t.Fatal(err)
	}
	client := testClient(t, transport)
	p, err := client.network.NewRouteTablesClient().BeginCreateOrUpdate(t.Context(), group, "pods", armnetwork.RouteTable{
		Location: to.Ptr(server.Location()), Tags: map[string]*string{"owner": to.Ptr("network-team")},
		Properties: &armnetwork.RouteTablePropertiesFormat{DisableBgpRoutePropagation: to.Ptr(true), Routes: []*armnetwork.Route{
			foreignRoute("to-partner", "203.0.113.0/24"),
		}},
	}, nil)
	if _, err := wait(t.Context(), client, p, err); err != nil {
		t.Fatal(err)
	}
	table, err := client.OpenRouteTable(id)
	if err != nil {
		t.Fatal(err)
	}
	return table
}

// testClient is a client of the server with the start-up app's secret, over transport.
func testClient(t *testing.T, transport http.RoundTripper) *Client {
	t.Helper()
	cfg := base()
	cfg.ClientID, cfg.ClientSecret = server.Credentials().ClientID, server.Credentials().ClientSecret
	client, err := newClient(t.Context(), cfg, &http.Client{Transport: transport, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// foreignRoute is a route another writer keeps in the table.
func foreignRoute(name, prefix string) *armnetwork.Route {
	return &armnetwork.Route{Name: to.Ptr(name), Properties: &armnetwork.RoutePropertiesFormat{
		AddressPrefix: to.Ptr(prefix), NextHopType: to.Ptr(armnetwork.RouteNextHopTypeInternet),
	}}
}

// tableState is the table as ARM returns it: its routes as "name prefix hop", sorted, its tags
// and BGP setting.
func tableState(t *testing.T, table *RouteTable) (routes []string, owner string, bgpOff bool) {
	t.Helper()
	rt, err := table.Client.network.NewRouteTablesClient().Get(t.Context(), table.resourceGroup, table.name, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rt.Properties.Routes {
		routes = append(routes, fmt.Sprintf("%s %s %s", *r.Name, *r.Properties.AddressPrefix, deref(r.Properties.NextHopIPAddress)))
	}
	slices.Sort(routes)
	return routes, deref(rt.Tags["owner"]), rt.Properties.DisableBgpRoutePropagation != nil && *rt.Properties.DisableBgpRoutePropagation
}

// tableWrites counts the writes ARM accepted for the table (its PUTs and its routes' PUTs and
// DELETEs) in the request log from index from on.
func tableWrites(table *RouteTable, from int) (n int) {
	for _, r := range server.Requests()[from:] {
		if r.Method != http.MethodGet && r.Status < 400 && strings.HasPrefix(strings.ToLower(r.Path), strings.ToLower(table.ID)) {
			n++
		}
	}
	return n
}

// Routes put and deleted at once, as Terraform writes kubewin_pod_routes and pools their nodes'
// routes, go into the table in a few writes of the whole table, not one per route; a route the
// table's rules refuse fails alone, and what kubewin does not write (another writer's route, the
// table's tags and BGP setting) stays.
func TestRouteWritesCoalesce(t *testing.T) {
	table := routeTableFixture(t, "route-writes", nil)
	const n = 50
	node := func(i int) routetable.Route {
		return routetable.Route{Name: fmt.Sprintf("kubewin.win.node%02d", i), Destination: netip.MustParsePrefix(fmt.Sprintf("10.244.%d.0/24", i)),
			NextHop: netip.AddrFrom4([4]byte{10, 240, 0, byte(4 + i)})}
	}
	all := func(f func(i int) error) []error {
		errs := make([]error, n+1)
		var wg sync.WaitGroup
		for i := range n + 1 {
			wg.Go(func() { errs[i] = f(i) })
		}
		wg.Wait()
		return errs
	}
	from := len(server.Requests())
	start := time.Now()
	errs := all(func(i int) error {
		if i == n { // overlaps the other writer's route
			return table.Put(t.Context(), routetable.Route{Name: "kubewin.win.bad", Destination: netip.MustParsePrefix("203.0.113.0/25"),
				NextHop: netip.MustParseAddr("10.240.0.250")})
		}
		return table.Put(t.Context(), node(i))
	})
	puts := tableWrites(table, from)
	t.Logf("%d concurrent puts: %d writes of the table, %v", n, puts, time.Since(start))
	if err := errs[n]; err == nil || !strings.Contains(err.Error(), `overlaps 203.0.113.0/24 of route "to-partner"`) {
		t.Errorf("an overlapping route: %v", err)
	}
	partner := []string{"to-partner 203.0.113.0/24 "}
	want := slices.Clone(partner)
	for i := range n {
		if errs[i] != nil {
			t.Errorf("put %d: %v", i, errs[i])
		}
		r := node(i)
		want = append(want, fmt.Sprintf("%s %s %s", r.Name, r.Destination, r.NextHop))
	}
	slices.Sort(want)
	if routes, owner, bgpOff := tableState(t, table); !slices.Equal(routes, want) || owner != "network-team" || !bgpOff {
		t.Fatalf("after the puts: routes %q, owner tag %q, BGP propagation disabled %v; want %q, network-team, true", routes, owner, bgpOff, want)
	}

	from = len(server.Requests())
	errs = all(func(i int) error { return table.Delete(t.Context(), node(i%n).Name) }) // one route twice
	deletes := tableWrites(table, from)
	t.Logf("%d concurrent deletes: %d writes of the table", n+1, deletes)
	for i, err := range errs {
		if err != nil {
			t.Errorf("delete %d: %v", i, err)
		}
	}
	if routes, owner, bgpOff := tableState(t, table); !slices.Equal(routes, partner) || owner != "network-team" || !bgpOff {
		t.Fatalf("after the deletes: routes %q, owner tag %q, BGP propagation disabled %v", routes, owner, bgpOff)
	}
	if puts > n/5 || deletes > n/5 {
		t.Errorf("%d writes of the table for %d puts, %d for %d deletes: want a few, the changes that wait going together", puts, n, deletes, n+1)
	}
	from = len(server.Requests())
	if err := table.Delete(t.Context(), node(0).Name); err != nil || tableWrites(table, from) != 0 {
		t.Errorf("deleting a route already gone: %v, %d writes", err, tableWrites(table, from))
	}
}

// beforeTablePut has another writer change the route table at path before each of the next
// PUTs of it, as many as left says.
type beforeTablePut struct {
	path    string
	left    atomic.Int32
	foreign func()
}

func (b *beforeTablePut) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPut && strings.EqualFold(r.URL.Path, b.path) && b.left.Add(-1) >= 0 {
		b.foreign()
	}
	return http.DefaultTransport.RoundTrip(r)
}

// Another writer changes the table between kubewin's read and its write: the write, If-Match
// the etag read, gets 412 and is made again on the table as it now is, the other writer's route
// kept; a table that changes before every write fails the route after a bounded number of tries.
func TestRouteWriteRetriesOnForeignChange(t *testing.T) {
	hook := &beforeTablePut{}
	table := routeTableFixture(t, "route-writes-foreign", hook)
	hook.path = table.ID
	other := testClient(t, nil)
	changes := 0
	hook.foreign = func() {
		changes++
		p, err := other.network.NewRoutesClient().BeginCreateOrUpdate(t.Context(), table.resourceGroup, table.name,
			fmt.Sprintf("foreign%d", changes), *foreignRoute("", fmt.Sprintf("198.51.100.%d/32", changes)), nil)
		if _, err := wait(t.Context(), other, p, err); err != nil {
			t.Errorf("the other writer: %v", err)
		}
	}
	node := func(i int) routetable.Route {
		return routetable.Route{Name: fmt.Sprintf("kubewin.win.node%d", i), Destination: netip.MustParsePrefix(fmt.Sprintf("10.244.%d.0/24", i)),
			NextHop: netip.MustParseAddr("10.240.0.4")}
	}

	hook.left.Store(1)
	from := len(server.Requests())
	if err := table.Put(t.Context(), node(0)); err != nil {
		t.Fatal(err)
	}
	refused := 0
	for _, r := range server.Requests()[from:] {
		if r.Method == http.MethodPut && r.Status == http.StatusPreconditionFailed {
			refused++
		}
	}
	want := []string{"foreign1 198.51.100.1/32 ", "kubewin.win.node0 10.244.0.0/24 10.240.0.4", "to-partner 203.0.113.0/24 "}
	if routes, _, _ := tableState(t, table); !slices.Equal(routes, want) || refused != 1 {
		t.Fatalf("routes %q after %d writes refused with 412; want %q after 1", routes, refused, want)
	}

	hook.left.Store(2 * etagAttempts)
	err := table.Put(t.Context(), node(1))
	if err == nil || !strings.Contains(err.Error(), "PreconditionFailed") || changes != 1+etagAttempts {
		t.Fatalf("a table changed before every write: %v after %d writes, want 412 after %d", err, changes-1, etagAttempts)
	}
}
