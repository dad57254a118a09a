package azure

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"

	"github.com/kubewin/kubewin/internal/routetable"
)

// Writes of routes coalesce per route table within the provider process, where Terraform writes
// many kubewin_pod_route resources at once and pools program their nodes' routes concurrently.
// Azure's network resource provider takes one write per table at a time (others get
// AnotherOperationInProgress or a 429 RetryableError), and each is a long-running operation of
// seconds: one write per route would queue hundreds of them. So a Put or Delete queues its change
// and waits for the table's turn; whoever takes the turn takes every change queued by then and
// writes them all in one PUT of the table, If-Match the etag of the GET it changed, as
// cloud-provider-azure's route controller does (kubernetes-sigs/cloud-provider-azure,
// pkg/provider/azure_routes.go: delayedRouteUpdater; azure_routetable_repo.go: the route table's
// etag as If-Match). The changes that queue while that write runs go together in the next one.
var tableQueues sync.Map // lower-case table ID → *tableQueue

type tableQueue struct {
	turn    chan struct{} // holds a token while a caller writes the table
	mu      sync.Mutex
	pending []*routeChange
}

// routeChange is one caller's change: a route to put, or (route nil) the name of one to delete.
type routeChange struct {
	name  string
	route *routetable.Route
	done  chan error // the change's result, sent once
}

// etagAttempts bounds the writes of one batch that find the table changed by another writer
// since they read it (412 Precondition Failed): each reads the table again.
const etagAttempts = 5

func (t *RouteTable) queue() *tableQueue {
	v, _ := tableQueues.LoadOrStore(strings.ToLower(t.ID), &tableQueue{turn: make(chan struct{}, 1)})
	q, ok := v.(*tableQueue)
	if !ok {
		panic(fmt.Sprintf("azure: tableQueues holds a %T, not a *tableQueue", v))
	}
	return q
}

// change queues c and waits for its result: written by the caller holding the table's turn, or
// by this one when it gets the turn with c still queued.
func (t *RouteTable) change(ctx context.Context, c *routeChange) error {
	q := t.queue()
	c.done = make(chan error, 1)
	q.mu.Lock()
	q.pending = append(q.pending, c)
	q.mu.Unlock()
	select {
	case err := <-c.done:
		return err
	case q.turn <- struct{}{}:
	case <-ctx.Done():
		q.mu.Lock()
		q.pending = slices.DeleteFunc(q.pending, func(p *routeChange) bool { return p == c })
		q.mu.Unlock()
		return ctx.Err()
	}
	defer func() { <-q.turn }()
	select {
	case err := <-c.done: // the previous turn's batch carried it
		return err
	default:
	}
	q.mu.Lock()
	batch := q.pending
	q.pending = nil
	q.mu.Unlock()
	errs := t.write(ctx, batch)
	var again []*routeChange
	for i, b := range batch {
		if errs[i] != nil && ctx.Err() != nil && b != c {
			again = append(again, b) // this caller's context ended, not b's: the next turn writes it
			continue
		}
		b.done <- errs[i]
	}
	if again != nil {
		q.mu.Lock()
		q.pending = append(again, q.pending...)
		q.mu.Unlock()
	}
	return <-c.done
}

// write applies a batch of changes to the table, returning each change's error: a GET, the
// changes applied to its routes (Put's limit checks refuse a route alone), and one PUT of the
// table If-Match the GET's etag, none when the table already is as the changes want it. A PUT
// that finds the table changed since the GET (412) starts again, etagAttempts times at most.
func (t *RouteTable) write(ctx context.Context, batch []*routeChange) []error {
	defer t.forgetRead()
	for attempt := 1; ; attempt++ {
		current, err := t.get(ctx)
		if err != nil {
			return t.failed(batch, make([]error, len(batch)), err)
		}
		routes, errs, changed := applyChanges(t.ID, current, batch)
		if changed {
			err = t.put(ctx, tableBody(current, routes), deref(current.Etag))
		}
		var re *azcore.ResponseError
		if errors.As(err, &re) && re.StatusCode == http.StatusPreconditionFailed && attempt < etagAttempts {
			continue
		}
		return t.failed(batch, errs, err)
	}
}

// failed gives the changes of a batch that were not refused alone the error its write failed
// with, if any.
func (t *RouteTable) failed(batch []*routeChange, errs []error, err error) []error {
	for i, c := range batch {
		if errs[i] == nil && err != nil {
			errs[i] = t.changeError(c, err)
		}
	}
	return errs
}

// changeError is the error of a change the write of its batch failed with: a delete from a
// table that is gone is not one.
func (t *RouteTable) changeError(c *routeChange, err error) error {
	switch {
	case c.route != nil:
		return fmt.Errorf("write route %s: %w", t.RouteID(c.name), err)
	case notFound(err):
		return nil
	default:
		return fmt.Errorf("delete route %s: %w", t.RouteID(c.name), err)
	}
}

// applyChanges applies a batch, in order, to the routes of a table as read: the routes the
// table's PUT carries (the others as they were, service-tag routes included), each change's
// error (a route Put's limit checks refuse), and whether the routes differ from those read.
// Azure compares route names without case.
func applyChanges(id string, current armnetwork.RouteTable, batch []*routeChange) ([]*armnetwork.Route, []error, bool) {
	table := podRoutes(id, current)
	errs := make([]error, len(batch))
	var names []string // of the routes changed, first change first
	touched := map[string]bool{}
	for i, c := range batch {
		if c.route != nil {
			if errs[i] = table.Put(*c.route); errs[i] != nil {
				continue
			}
		} else {
			table.Remove(c.name)
		}
		if key := strings.ToLower(c.name); !touched[key] {
			touched[key] = true
			names = append(names, c.name)
		}
	}
	var routes []*armnetwork.Route
	was := map[string]*armnetwork.Route{}
	if current.Properties != nil {
		for _, r := range current.Properties.Routes {
			if key := strings.ToLower(deref(r.Name)); touched[key] {
				was[key] = r
			} else {
				routes = append(routes, writableRoute(r))
			}
		}
	}
	changed := false
	for _, name := range names {
		old := was[strings.ToLower(name)]
		r, ok := table.Find(name)
		if !ok {
			changed = changed || old != nil
			continue
		}
		body := routeBody(r)
		routes = append(routes, &body)
		changed = changed || old == nil || !sameRoute(writableRoute(old), body)
	}
	return routes, errs, changed
}

// tableBody is the PUT of a table as read with other routes: a PUT (RouteTables_CreateOrUpdate)
// replaces the whole table, so it carries what the GET returned that a client writes — location,
// tags, disableBgpRoutePropagation — and none of what only the server sets: etag,
// provisioningState, resourceGuid, subnets ("READ-ONLY" in armnetwork v6's models; "It can only
// be populated by the server", learn.microsoft.com/javascript/api/@azure/arm-network/routetable).
func tableBody(current armnetwork.RouteTable, routes []*armnetwork.Route) armnetwork.RouteTable {
	body := armnetwork.RouteTable{Location: current.Location, Tags: current.Tags, Properties: &armnetwork.RouteTablePropertiesFormat{Routes: routes}}
	if current.Properties != nil {
		body.Properties.DisableBgpRoutePropagation = current.Properties.DisableBgpRoutePropagation
	}
	return body
}

// writableRoute is a route as read without what only the server sets (etag, provisioningState,
// hasBgpOverride: "READ-ONLY" in armnetwork v6's Route and RoutePropertiesFormat).
func writableRoute(r *armnetwork.Route) *armnetwork.Route {
	out := &armnetwork.Route{Name: r.Name}
	if p := r.Properties; p != nil {
		out.Properties = &armnetwork.RoutePropertiesFormat{AddressPrefix: p.AddressPrefix, NextHopType: p.NextHopType, NextHopIPAddress: p.NextHopIPAddress}
	}
	return out
}

// sameRoute reports whether two routes send the same prefix to the same hop.
func sameRoute(a *armnetwork.Route, b armnetwork.Route) bool {
	p, q := a.Properties, b.Properties
	return p != nil && q != nil && deref(p.AddressPrefix) == deref(q.AddressPrefix) && deref(p.NextHopIPAddress) == deref(q.NextHopIPAddress) &&
		p.NextHopType != nil && q.NextHopType != nil && *p.NextHopType == *q.NextHopType
}

// put writes the table, If-Match etag (none when empty). RouteTablesClient's options have no
// If-Match, so the header goes through the request's context (azcore policy.WithHTTPHeader).
func (t *RouteTable) put(ctx context.Context, body armnetwork.RouteTable, etag string) error {
	pctx := ctx
	if etag != "" {
		pctx = policy.WithHTTPHeader(ctx, http.Header{"If-Match": {etag}})
	}
	p, err := t.Client.network.NewRouteTablesClient().BeginCreateOrUpdate(pctx, t.resourceGroup, t.name, body, nil)
	_, err = wait(ctx, t.Client, p, err)
	return err
}
