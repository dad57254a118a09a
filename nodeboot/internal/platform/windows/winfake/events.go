package winfake

import (
	"slices"
	"strings"

	"github.com/kubewin/kubewin/nodeboot/internal/platform"
	"github.com/kubewin/kubewin/nodeboot/internal/platform/windows"
)

// maxEvents is how many entries the simulated event logs keep; Windows' logs are bounded by
// size and overwrite their oldest entries.
const maxEvents = 1000

// Service Control Manager entries in the System log, as Windows writes them on a service's
// state change: 7036 "The <display name> service entered the <state> state." and 7031 "The
// <display name> service terminated unexpectedly." (the entries Azure/aks-engine
// scripts/collect-windows-logs.ps1 collects from the provider 'Service Control Manager').
const (
	scmProvider     = "Service Control Manager"
	eventStateEntry = 7036
	eventTerminated = 7031
)

// LogEvent adds an entry to the machine's event logs.
func (m *Machine) LogEvent(e platform.Event) error {
	return m.do(Op{Backend: "eventlog", Call: "Write", Target: e.Log + "/" + e.Source}, false, func(st *State) (bool, error) {
		m.logEvent(st, e)
		return true, nil
	})
}

func (m *Machine) logEvent(st *State, e platform.Event) {
	if e.Time.IsZero() {
		e.Time = m.now().UTC()
	}
	st.Events = append(st.Events, e)
	st.Events = st.Events[max(0, len(st.Events)-maxEvents):]
}

// serviceEvent logs the Service Control Manager's entry about a service's state change.
func (m *Machine) serviceEvent(st *State, name string, id int, what string) {
	display := name
	if svc := st.Services[name]; svc != nil && svc.Config.DisplayName != "" {
		display = svc.Config.DisplayName
	}
	level := "Information"
	if id == eventTerminated {
		level = "Error"
	}
	m.logEvent(st, platform.Event{Log: "System", Source: scmProvider, ID: id, Level: level, Message: "The " + display + " service " + what + "."})
}

// readEvents answers the events.read script: the newest Max entries of each source, newest
// first.
func readEvents(st *State, p windows.EventsParams) []platform.Event {
	out := []platform.Event{}
	for _, src := range p.Sources {
		n := 0
		for i := len(st.Events) - 1; i >= 0 && n < p.Max; i-- {
			e := st.Events[i]
			if e.Log != src.Log || (src.Provider != "" && e.Source != src.Provider) || (len(src.IDs) > 0 && !slices.Contains(src.IDs, e.ID)) {
				continue
			}
			if src.ServiceNamed && !slices.ContainsFunc(p.Services, func(s string) bool { return strings.Contains(e.Message, s) }) {
				continue
			}
			out = append(out, e)
			n++
		}
	}
	slices.SortStableFunc(out, func(a, b platform.Event) int { return b.Time.Compare(a.Time) })
	return out
}
