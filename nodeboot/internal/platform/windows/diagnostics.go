package windows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/kubewin/kubewin/nodeboot/internal/platform"
)

// diagnostics reads the machine for a diagnostics bundle: what Kubernetes' Windows log
// collection scripts gather (microsoft/SDN Kubernetes/windows/debug/collectlogs.ps1:
// Get-HnsNetwork, Get-HnsEndpoint and Get-HnsPolicyList as JSON, route print; Azure/aks-engine
// scripts/collect-windows-logs.ps1: the node components' logs and the event log entries of
// EventsParams), through the same backends as the rest of the platform.
type diagnostics struct{ p *Platform }

func (p *Platform) Diagnostics() platform.Diagnostics { return diagnostics{p} }

func rawJSON[T any](items []T) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, 0, len(items))
	for _, it := range items {
		b, err := json.Marshal(it)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// HNS lists every network, the endpoints of each and every load balancer; a network removed
// while it is read has no endpoints.
func (d diagnostics) HNS(context.Context) (platform.HNSState, error) {
	var st platform.HNSState
	nets, err := d.p.b.HNS.Networks()
	if err != nil {
		return st, fmt.Errorf("list the HNS networks: %w", err)
	}
	if st.Networks, err = rawJSON(nets); err != nil {
		return st, err
	}
	st.Endpoints = []json.RawMessage{}
	for _, n := range nets {
		eps, err := d.p.b.HNS.EndpointsOfNetwork(n.Id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return st, fmt.Errorf("list the endpoints of HNS network %s: %w", n.Name, err)
		}
		raw, err := rawJSON(eps)
		if err != nil {
			return st, err
		}
		st.Endpoints = append(st.Endpoints, raw...)
	}
	lbs, err := d.p.b.HNS.LoadBalancers()
	if err != nil {
		return st, fmt.Errorf("list the HNS load balancers: %w", err)
	}
	st.LoadBalancers, err = rawJSON(lbs)
	return st, err
}

func (d diagnostics) ServiceStates(_ context.Context, names []string) ([]platform.ServiceStatus, error) {
	out := make([]platform.ServiceStatus, 0, len(names))
	for _, name := range names {
		c, state, err := d.p.b.SCM.Query(name)
		switch {
		case errors.Is(err, ErrNotFound):
			out = append(out, platform.ServiceStatus{Name: name, State: platform.ServiceMissing})
		case err != nil:
			return nil, fmt.Errorf("query service %s: %w", name, err)
		default:
			out = append(out, platform.ServiceStatus{Name: name, State: string(state), StartType: string(c.StartType), Command: c.BinaryPathName})
		}
	}
	return out, nil
}

func (d diagnostics) RouteTable(ctx context.Context) ([]platform.RouteEntry, error) {
	out, err := d.p.b.Shell.Run(ctx, allRoutesScript())
	if err != nil {
		return nil, fmt.Errorf("read the routing table: %w", err)
	}
	var routes []platform.RouteEntry
	if err := json.Unmarshal(out, &routes); err != nil {
		return nil, fmt.Errorf("read the routing table: %w: %q", err, out)
	}
	return routes, nil
}

func (d diagnostics) Events(ctx context.Context, services []string, maxEach int) ([]platform.Event, error) {
	return d.events(ctx, EventsParams{Sources: nodeEventSources, Services: services, Max: maxEach})
}

func (d diagnostics) events(ctx context.Context, p EventsParams) ([]platform.Event, error) {
	out, err := d.p.b.Shell.Run(ctx, eventsScript(p))
	if err != nil {
		return nil, fmt.Errorf("read the event logs: %w", err)
	}
	var events []platform.Event
	if err := json.Unmarshal(out, &events); err != nil {
		return nil, fmt.Errorf("read the event logs: %w: %q", err, out)
	}
	return events, nil
}

// NodebootLog is nodeboot's entries in the Application event log, oldest first: a service's
// output goes nowhere on Windows, so nodeboot copies its progress lines there (and to the
// serial console, which the machine cannot read back).
func (d diagnostics) NodebootLog(ctx context.Context, maxBytes int) ([]byte, error) {
	events, err := d.events(ctx, EventsParams{Sources: []EventSource{NodebootEvents}, Max: 1000})
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	for i := len(events) - 1; i >= 0; i-- {
		e := events[i]
		fmt.Fprintf(&b, "%s %s %s\n", e.Time.UTC().Format("2006-01-02T15:04:05Z"), e.Level, strings.TrimSpace(e.Message))
	}
	s := b.String()
	return []byte(s[max(0, len(s)-maxBytes):]), nil
}
