package azureacc

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources"

	"github.com/kubewin/kubewin/internal/testkit/armtest"
	"github.com/kubewin/kubewin/provider/internal/azure"
)

var server *armtest.Server

func TestMain(m *testing.M) {
	s, err := armtest.New(armtest.Options{RetryAfter: 10 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	server = s
	if err := os.Setenv("SSL_CERT_FILE", s.CAFile()); err != nil {
		panic(err)
	}
	code := m.Run()
	if err := s.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = max(code, 1)
	}
	os.Exit(code)
}

func target(t *testing.T, run string) *Target {
	t.Helper()
	c := server.Credentials()
	tg, err := New(context.Background(), azure.Config{
		SubscriptionID: c.SubscriptionID, TenantID: c.TenantID, ClientID: c.ClientID, ClientSecret: c.ClientSecret, MetadataHost: server.MetadataHost(),
	}, server.Location(), run)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// A run's group carries the run and its creation time, holds the test's network (listed by
// Resources: the route table and the virtual network), and goes with everything in it.
func TestGroupLifecycle(t *testing.T) {
	ctx := context.Background()
	tg := target(t, "lifecycle")
	name, err := tg.NewGroup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tags := server.ResourceGroupTags(name)
	if name != GroupPrefix+"lifecycle-1" || tags[TagRun] != "lifecycle" {
		t.Fatalf("group %s tagged %v", name, tags)
	}
	if at, err := time.Parse(time.RFC3339, tags[TagCreated]); err != nil || time.Since(at) > time.Minute {
		t.Errorf("%s = %q", TagCreated, tags[TagCreated])
	}
	subnet, table, err := tg.Network(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(subnet, "/virtualNetworks/vnet/subnets/nodes") || !strings.HasSuffix(table, "/routeTables/pods") ||
		len(server.ResourceIDs(name)) != 2 {
		t.Errorf("network %s %s; group holds %v", subnet, table, server.ResourceIDs(name))
	}
	listed, err := tg.Resources(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{table, strings.TrimSuffix(subnet, "/subnets/nodes")}; !slices.Equal(listed, want) {
		t.Errorf("the group lists %v, want %v", listed, want)
	}
	if err := tg.DeleteGroup(ctx, name); err != nil {
		t.Fatal(err)
	}
	if server.HasResourceGroup(name) || len(server.ResourceIDs(name)) != 0 {
		t.Errorf("group %s still there, holding %v", name, server.ResourceIDs(name))
	}
}

// The sweeper deletes a stale run group with its resources and leaves a fresh run group, a group
// without the run tag however old, and a run group whose age it cannot read (reported).
func TestSweep(t *testing.T) {
	ctx := context.Background()
	tg := target(t, "sweep")
	put := func(name string, tags map[string]string) {
		t.Helper()
		pt := map[string]*string{}
		for k, v := range tags {
			pt[k] = to.Ptr(v)
		}
		if _, err := tg.groups.CreateOrUpdate(ctx, name, armresources.ResourceGroup{Location: to.Ptr(tg.Location), Tags: pt}, nil); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-10 * time.Hour).UTC().Format(time.RFC3339)
	put("kubewin-acc-stale", map[string]string{TagRun: "interrupted", TagCreated: old})
	if _, _, err := tg.Network(ctx, "kubewin-acc-stale"); err != nil {
		t.Fatal(err)
	}
	put("someone-elses", map[string]string{"owner": "ops", TagCreated: old})
	put("kubewin-acc-garbled", map[string]string{TagRun: "x", TagCreated: "yesterday"})
	fresh, err := tg.NewGroup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	deleted, err := Sweep(ctx, tg.Client, 6*time.Hour, time.Now())
	if !slices.Equal(deleted, []string{"kubewin-acc-stale"}) {
		t.Errorf("deleted %v, want only the stale run group", deleted)
	}
	if err == nil || !strings.Contains(err.Error(), `kubewin-acc-garbled: tag kubewin-acc-created = "yesterday" is not an RFC 3339 time: left alone`) {
		t.Errorf("error = %v", err)
	}
	for name, want := range map[string]bool{"kubewin-acc-stale": false, "someone-elses": true, "kubewin-acc-garbled": true, fresh: true} {
		if got := server.HasResourceGroup(name); got != want {
			t.Errorf("group %s exists: %v, want %v", name, got, want)
		}
	}
	if left := server.ResourceIDs("kubewin-acc-stale"); len(left) != 0 {
		t.Errorf("the stale group's resources remain: %v", left)
	}
}
