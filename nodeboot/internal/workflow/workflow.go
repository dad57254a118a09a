// Package workflow runs named phases in order, the way kubeadm's join does, and records each
// phase's outcome in a state file, with the typed data the phases learn, so that a restarted
// run resumes after the last phase done.
package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/kubewin/kubewin/internal/nodestatus"
)

// Phase is one named step.
type Phase struct {
	Name  string
	Short string
	Run   func(ctx context.Context) error
}

// State is what the state file holds: each phase's outcome, and Data, the facts phases learn
// that later phases (or a restarted run) need.
type State[D any] struct {
	Phases []nodestatus.PhaseRecord `json:"phases"`
	Data   D                        `json:"data"`
}

// Phase returns the record of a phase, or nil.
func (s *State[D]) Phase(name string) *nodestatus.PhaseRecord {
	for i := range s.Phases {
		if s.Phases[i].Name == name {
			return &s.Phases[i]
		}
	}
	return nil
}

func (s *State[D]) set(r nodestatus.PhaseRecord) {
	if p := s.Phase(r.Name); p != nil {
		*p = r
		return
	}
	s.Phases = append(s.Phases, r)
}

// Done reports whether every named phase is done.
func (s *State[D]) Done(names ...string) bool {
	for _, n := range names {
		if p := s.Phase(n); p == nil || p.State != nodestatus.StateDone {
			return false
		}
	}
	return true
}

// Store keeps the state in a file.
type Store[D any] struct {
	Path string
	// Write writes the file atomically, readable by its owner only.
	Write func(path string, data []byte) error
}

// Load reads the state; a missing file is an empty state.
func (st *Store[D]) Load() (*State[D], error) {
	b, err := os.ReadFile(st.Path)
	if errors.Is(err, os.ErrNotExist) {
		return &State[D]{}, nil
	}
	if err != nil {
		return nil, err
	}
	var s State[D]
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("state file %s is corrupt: %w (remove it to start over)", st.Path, err)
	}
	return &s, nil
}

// Save writes the state.
func (st *Store[D]) Save(s *State[D]) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return st.Write(st.Path, append(b, '\n'))
}

// Runner runs phases.
type Runner[D any] struct {
	Phases []Phase
	Store  *Store[D]
	State  *State[D]
	// Out receives the [phase] progress lines.
	Out io.Writer
	// Changed is called after every change of the state (to report it); may be nil.
	Changed func(*State[D])
	Now     func() time.Time
}

// Names lists the phases in order.
func (r *Runner[D]) Names() []string {
	names := make([]string, len(r.Phases))
	for i, p := range r.Phases {
		names[i] = p.Name
	}
	return names
}

// Run runs every phase not done yet, in order, and stops at the first failure.
func (r *Runner[D]) Run(ctx context.Context) error {
	var todo []Phase
	for _, p := range r.Phases {
		if r.State.Done(p.Name) {
			_, _ = fmt.Fprintf(r.Out, "[%s] already done\n", p.Name)
			continue
		}
		todo = append(todo, p)
	}
	return r.run(ctx, todo)
}

// RunPhases runs the named phases in order, whether or not they were done before, and stops at
// the first failure.
func (r *Runner[D]) RunPhases(ctx context.Context, names ...string) error {
	todo := make([]Phase, 0, len(names))
	for _, name := range names {
		i := slices.IndexFunc(r.Phases, func(p Phase) bool { return p.Name == name })
		if i < 0 {
			return fmt.Errorf("no phase %q: phases are %v", name, r.Names())
		}
		todo = append(todo, r.Phases[i])
	}
	return r.run(ctx, todo)
}

// run runs phases in order. Every change of a phase's record is told to Changed, and the state
// file is written when a phase starts, fails or ends the run: a phase's end and the next one's
// start, which nothing separates, are one write (a restart between them would run that phase
// again either way, as one interrupted while running).
func (r *Runner[D]) run(ctx context.Context, phases []Phase) error {
	now := r.Now
	if now == nil {
		now = time.Now
	}
	for i, p := range phases {
		start := now()
		rec := nodestatus.PhaseRecord{Name: p.Name, State: nodestatus.StateRunning, Started: start}
		if err := r.record(rec, true); err != nil {
			return err
		}
		_, _ = fmt.Fprintf(r.Out, "[%s] %s\n", p.Name, p.Short)
		err := p.Run(ctx)
		rec.Duration = now().Sub(start)
		if err != nil {
			rec.State, rec.Code, rec.Message = nodestatus.StateFailed, nodestatus.CodeOf(err), err.Error()
			_, _ = fmt.Fprintf(r.Out, "[%s] failed after %s: %v\n", p.Name, rec.Duration.Round(time.Millisecond), err)
			if recErr := r.record(rec, true); recErr != nil {
				return errors.Join(err, recErr)
			}
			return &PhaseError{Phase: p.Name, Err: err}
		}
		rec.State = nodestatus.StateDone
		_, _ = fmt.Fprintf(r.Out, "[%s] done in %s\n", p.Name, rec.Duration.Round(time.Millisecond))
		if err := r.record(rec, i == len(phases)-1); err != nil {
			return err
		}
	}
	return nil
}

// record sets a phase's record, tells Changed, and writes the state file when save is set.
func (r *Runner[D]) record(rec nodestatus.PhaseRecord, save bool) error {
	r.State.set(rec)
	if save {
		if err := r.Store.Save(r.State); err != nil {
			return fmt.Errorf("save state: %w", err)
		}
	}
	if r.Changed != nil {
		r.Changed(r.State)
	}
	return nil
}

// PhaseError is a failed phase.
type PhaseError struct {
	Phase string
	Err   error
}

func (e *PhaseError) Error() string { return fmt.Sprintf("phase %s: %v", e.Phase, e.Err) }

func (e *PhaseError) Unwrap() error { return e.Err }
