package armtest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"
)

func podRoute(prefix, nextHop string) armnetwork.Route {
	return armnetwork.Route{Properties: &armnetwork.RoutePropertiesFormat{
		AddressPrefix:    to.Ptr(prefix),
		NextHopType:      to.Ptr(armnetwork.RouteNextHopTypeVirtualAppliance),
		NextHopIPAddress: to.Ptr(nextHop),
	}}
}

func (f *fixture) createRouteTable(t *testing.T, name string, routes ...*armnetwork.Route) armnetwork.RouteTable {
	t.Helper()
	ctx := testContext(t)
	p, err := f.network.NewRouteTablesClient().BeginCreateOrUpdate(ctx, testGroup, name, armnetwork.RouteTable{
		Location:   to.Ptr(f.s.Location()),
		Properties: &armnetwork.RouteTablePropertiesFormat{DisableBgpRoutePropagation: to.Ptr(true), Routes: routes},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.PollUntilDone(ctx, fast)
	if err != nil {
		t.Fatal(err)
	}
	return res.RouteTable
}

func (f *fixture) putRoute(t *testing.T, table, name string, r armnetwork.Route) error {
	t.Helper()
	ctx := testContext(t)
	p, err := f.network.NewRoutesClient().BeginCreateOrUpdate(ctx, testGroup, table, name, r, nil)
	if err != nil {
		return err
	}
	_, err = p.PollUntilDone(ctx, fast)
	return err
}

func TestRoutes(t *testing.T) {
	f := newFixture(t, Options{PageSize: 2})
	ctx := testContext(t)
	routes := f.network.NewRoutesClient()
	rt := f.createRouteTable(t, "pods")
	if *rt.Properties.ProvisioningState != armnetwork.ProvisioningStateSucceeded || len(rt.Properties.Routes) != 0 {
		t.Fatalf("route table %+v", rt.Properties)
	}
	for i := range 3 {
		if err := f.putRoute(t, "pods", fmt.Sprintf("kwwin00000%d", i), podRoute(fmt.Sprintf("10.244.%d.0/24", i), fmt.Sprintf("10.0.1.%d",
			4+i))); err != nil {
			t.Fatal(err)
		}
	}
	got, err := routes.Get(ctx, testGroup, "pods", "kwwin000001", nil)
	if err != nil {
		t.Fatal(err)
	}
	if *got.Properties.AddressPrefix != "10.244.1.0/24" || *got.Properties.NextHopIPAddress != "10.0.1.5" ||
		*got.Properties.ProvisioningState != armnetwork.ProvisioningStateSucceeded {
		t.Fatalf("route %+v", got.Properties)
	}
	var listed []string
	pager := routes.NewListPager(testGroup, "pods", nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Value {
			listed = append(listed, *r.Name)
		}
	}
	if strings.Join(listed, ",") != "kwwin000000,kwwin000001,kwwin000002" {
		t.Fatalf("listed %v over pages of 2", listed)
	}
	dp, err := routes.BeginDelete(ctx, testGroup, "pods", "kwwin000001", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dp.PollUntilDone(ctx, fast); err != nil {
		t.Fatal(err)
	}
	table, err := f.network.NewRouteTablesClient().Get(ctx, testGroup, "pods", nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(table.Properties.Routes); n != 2 {
		t.Fatalf("%d routes after deleting one of 3", n)
	}
	_, err = routes.Get(ctx, testGroup, "pods", "kwwin000001", nil)
	if re := responseError(t, err); re.StatusCode != http.StatusNotFound {
		t.Fatalf("GET of a deleted route: %v", err)
	}

	// A PUT of the table replaces its routes.
	f.createRouteTable(t, "pods", &armnetwork.Route{Name: to.Ptr("only"), Properties: podRoute("10.244.9.0/24", "10.0.1.9").Properties})
	table, err = f.network.NewRouteTablesClient().Get(ctx, testGroup, "pods", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(table.Properties.Routes) != 1 || *table.Properties.Routes[0].Name != "only" {
		t.Fatalf("routes after a table PUT: %+v", table.Properties.Routes)
	}

	for _, bad := range []struct {
		route armnetwork.Route
		msg   string
	}{
		{podRoute("10.244.1.1/24", "10.0.1.4"), "canonical form"},
		{armnetwork.Route{Properties: &armnetwork.RoutePropertiesFormat{AddressPrefix: to.Ptr("10.244.1.0/24"),
			NextHopType: to.Ptr(armnetwork.RouteNextHopTypeVirtualAppliance)}}, "needs properties.nextHopIpAddress"},
		{armnetwork.Route{Properties: &armnetwork.RoutePropertiesFormat{AddressPrefix: to.Ptr("10.244.1.0/24"),
			NextHopType: to.Ptr(armnetwork.RouteNextHopTypeInternet), NextHopIPAddress: to.Ptr("10.0.1.4")}}, "only allowed with VirtualAppliance"},
	} {
		err := f.putRoute(t, "pods", "bad", bad.route)
		if re := responseError(t, err); re.StatusCode != http.StatusBadRequest || !strings.Contains(err.Error(), bad.msg) {
			t.Errorf("bad route: %v, want 400 with %q", err, bad.msg)
		}
	}
	err = f.putRoute(t, "missing", "r", podRoute("10.244.1.0/24", "10.0.1.4"))
	if re := responseError(t, err); re.StatusCode != http.StatusNotFound || re.ErrorCode != "ParentResourceNotFound" {
		t.Fatalf("route in a missing table: %v", err)
	}
}

func TestRouteTableLimit(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := testContext(t)
	var routes []*armnetwork.Route
	for i := range 401 {
		r := podRoute(fmt.Sprintf("10.%d.%d.0/24", 100+i/256, i%256), "10.0.1.4")
		r.Name = to.Ptr(fmt.Sprintf("r%d", i))
		routes = append(routes, &r)
	}
	_, err := f.network.NewRouteTablesClient().BeginCreateOrUpdate(ctx, testGroup, "big", armnetwork.RouteTable{
		Location: to.Ptr(f.s.Location()), Properties: &armnetwork.RouteTablePropertiesFormat{Routes: routes},
	}, nil)
	if re := responseError(t, err); re.StatusCode != http.StatusBadRequest || re.ErrorCode != CodeRouteLimit || !strings.Contains(err.Error(),
		"at most 400 user-defined routes") {
		t.Fatalf("401 routes in one table: %v", err)
	}
	f.createRouteTable(t, "full", routes[:400]...)
	err = f.putRoute(t, "full", "one-more", podRoute("10.200.0.0/24", "10.0.1.4"))
	if re := responseError(t, err); re.StatusCode != http.StatusBadRequest || re.ErrorCode != CodeRouteLimit {
		t.Fatalf("route 401: %v", err)
	}
	// Replacing an existing route of a full table is fine.
	if err := f.putRoute(t, "full", "r0", podRoute("10.200.0.0/24", "10.0.1.5")); err != nil {
		t.Fatal(err)
	}
}

// A route table's etag changes with every write of the table or of one of its routes, and a PUT
// If-Match another etag is refused with Network's 412.
func TestRouteTableIfMatch(t *testing.T) {
	f := newFixture(t, Options{})
	tables := f.network.NewRouteTablesClient()
	put := func(name, ifMatch string) (armnetwork.RouteTable, error) {
		ctx := testContext(t)
		p, err := tables.BeginCreateOrUpdate(policy.WithHTTPHeader(ctx, http.Header{"If-Match": {ifMatch}}), testGroup, name,
			armnetwork.RouteTable{Location: to.Ptr(f.s.Location())}, nil)
		if err != nil {
			return armnetwork.RouteTable{}, err
		}
		res, err := p.PollUntilDone(ctx, fast)
		return res.RouteTable, err
	}
	etag := func() string {
		t.Helper()
		rt, err := tables.Get(testContext(t), testGroup, "pods", nil)
		if err != nil || rt.Etag == nil || !strings.HasPrefix(*rt.Etag, `W/"`) {
			t.Fatalf("route table etag %v, %v", rt.Etag, err)
		}
		return *rt.Etag
	}

	created := f.createRouteTable(t, "pods").Etag
	if got := etag(); created == nil || got != *created {
		t.Fatalf("GET etag %s, the PUT answered %v", got, created)
	}
	first := *created
	second, err := put("pods", first)
	if err != nil || *second.Etag == first || etag() != *second.Etag {
		t.Fatalf("PUT If-Match the current etag: %v, etag %v after %s", err, second.Etag, first)
	}
	if _, err := put("pods", first); responseError(t, err).StatusCode != http.StatusPreconditionFailed ||
		responseError(t, err).ErrorCode != "PreconditionFailed" || !strings.Contains(err.Error(), "PreconditionFailedEtagMismatch") {
		t.Fatalf("PUT If-Match a stale etag: %v", err)
	}
	f.createRouteTable(t, "pods") // without If-Match
	third := etag()
	if third == *second.Etag {
		t.Fatal("a PUT without If-Match left the etag as it was")
	}
	if err := f.putRoute(t, "pods", "r", podRoute("10.244.1.0/24", "10.0.1.4")); err != nil || etag() == third {
		t.Fatalf("a route's write left the table's etag: %v", err)
	}
	if _, err := put("pods", "*"); err != nil {
		t.Fatalf("PUT If-Match * of an existing table: %v", err)
	}
	if _, err := put("missing", "*"); responseError(t, err).StatusCode != http.StatusPreconditionFailed {
		t.Fatalf("PUT If-Match * of a missing table: %v", err)
	}
}

func TestSubnetRouteTableAssociation(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := testContext(t)
	subnets := f.network.NewSubnetsClient()
	rt := f.createRouteTable(t, "pods")

	sn, err := subnets.Get(ctx, testGroup, "vnet", "nodes", nil)
	if err != nil {
		t.Fatal(err)
	}
	if *sn.ID != f.subnetID || *sn.Properties.AddressPrefix != "10.0.1.0/24" || sn.Properties.RouteTable != nil {
		t.Fatalf("subnet %+v", sn)
	}
	sn.Properties.RouteTable = &armnetwork.RouteTable{ID: rt.ID}
	p, err := subnets.BeginCreateOrUpdate(ctx, testGroup, "vnet", "nodes", sn.Subnet, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.PollUntilDone(ctx, fast); err != nil {
		t.Fatal(err)
	}
	sn, err = subnets.Get(ctx, testGroup, "vnet", "nodes", nil)
	if err != nil {
		t.Fatal(err)
	}
	if sn.Properties.RouteTable == nil || *sn.Properties.RouteTable.ID != *rt.ID {
		t.Fatalf("subnet route table %+v, want %s", sn.Properties.RouteTable, *rt.ID)
	}
	table, err := f.network.NewRouteTablesClient().Get(ctx, testGroup, "pods", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(table.Properties.Subnets) != 1 || *table.Properties.Subnets[0].ID != f.subnetID {
		t.Fatalf("route table subnets %+v", table.Properties.Subnets)
	}
	_, err = f.network.NewRouteTablesClient().BeginDelete(ctx, testGroup, "pods", nil)
	if re := responseError(t, err); re.StatusCode != http.StatusBadRequest || re.ErrorCode != "InUseRouteTableCannotBeDeleted" {
		t.Fatalf("deleting a route table in use: %v", err)
	}

	// A subnet in use keeps its prefix; the virtual network lists it with its IP configurations.
	f.createScaleSet(t, "win", f.windowsScaleSet(2, "cfg"))
	sn.Properties.AddressPrefix = to.Ptr("10.0.2.0/24")
	_, err = subnets.BeginCreateOrUpdate(ctx, testGroup, "vnet", "nodes", sn.Subnet, nil)
	if re := responseError(t, err); re.StatusCode != http.StatusBadRequest || re.ErrorCode != "InUseSubnetCannotBeUpdated" {
		t.Fatalf("changing the prefix of a subnet in use: %v", err)
	}
	vnet, err := f.network.NewVirtualNetworksClient().Get(ctx, testGroup, "vnet", nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := vnet.Properties.Subnets; len(s) != 1 || len(s[0].Properties.IPConfigurations) != 2 || *s[0].Properties.RouteTable.ID != *rt.ID {
		t.Fatalf("virtual network subnets %+v", s)
	}
}

func TestVirtualNetworks(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := testContext(t)
	vnets := f.network.NewVirtualNetworksClient()
	put := func(prefixes []string, subnets map[string]string) error {
		v := armnetwork.VirtualNetwork{
			Location:   to.Ptr(f.s.Location()),
			Properties: &armnetwork.VirtualNetworkPropertiesFormat{AddressSpace: &armnetwork.AddressSpace{AddressPrefixes: to.SliceOfPtrs(prefixes...)}},
		}
		for _, n := range sortedKeys(subnets) {
			v.Properties.Subnets = append(v.Properties.Subnets, &armnetwork.Subnet{Name: to.Ptr(n),
				Properties: &armnetwork.SubnetPropertiesFormat{AddressPrefix: to.Ptr(subnets[n])}})
		}
		p, err := vnets.BeginCreateOrUpdate(ctx, testGroup, "cluster", v, nil)
		if err != nil {
			return err
		}
		_, err = p.PollUntilDone(ctx, fast)
		return err
	}
	if err := put([]string{"172.16.0.0/16"}, map[string]string{"a": "172.16.1.0/24", "b": "172.16.2.0/24"}); err != nil {
		t.Fatal(err)
	}
	got, err := vnets.Get(ctx, testGroup, "cluster", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Properties.Subnets) != 2 || *got.Properties.ProvisioningState != armnetwork.ProvisioningStateSucceeded {
		t.Fatalf("virtual network %+v", got.Properties)
	}
	for _, bad := range []struct {
		prefixes []string
		subnets  map[string]string
		code     string
	}{
		{[]string{"172.16.0.0/16"}, map[string]string{"a": "172.17.1.0/24"}, "NetcfgSubnetRangeOutsideVnet"},
		{[]string{"172.16.0.0/16"}, map[string]string{"a": "172.16.1.0/24", "b": "172.16.1.128/25"}, "NetcfgSubnetRangesOverlap"},
		{[]string{"172.16.0.1/16"}, nil, "InvalidCIDRNotation"},
	} {
		err := put(bad.prefixes, bad.subnets)
		if re := responseError(t, err); re.ErrorCode != bad.code {
			t.Errorf("%v %v: %v, want %s", bad.prefixes, bad.subnets, err, bad.code)
		}
	}
}
