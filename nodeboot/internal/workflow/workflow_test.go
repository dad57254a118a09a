package workflow

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kubewin/kubewin/internal/nodestatus"
)

func newRunner(t *testing.T, path string, calls *[]string, failAt string) *Runner[learned] {
	t.Helper()
	st := &Store[learned]{Path: path, Write: func(p string, b []byte) error { return os.WriteFile(p, b, 0o600) }}
	s, err := st.Load()
	if err != nil {
		t.Fatal(err)
	}
	phase := func(name string) Phase {
		return Phase{Name: name, Short: "doing " + name, Run: func(context.Context) error {
			*calls = append(*calls, name)
			s.Data.Seen = append(s.Data.Seen, name)
			if name == failAt {
				return nodestatus.Errorf(nodestatus.CodeCSRTimeout, "boom")
			}
			return nil
		}}
	}
	return &Runner[learned]{Phases: []Phase{phase("a"), phase("b"), phase("c")}, Store: st, State: s, Out: &bytes.Buffer{}}
}

// learned is what the test's phases learn: the names of the phases that ran.
type learned struct {
	Seen []string `json:"seen"`
}

func TestResume(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	var calls []string
	r := newRunner(t, path, &calls, "b")
	err := r.Run(context.Background())
	var pe *PhaseError
	if !errors.As(err, &pe) || pe.Phase != "b" || nodestatus.CodeOf(err) != nodestatus.CodeCSRTimeout {
		t.Fatalf("error = %v", err)
	}
	if rec := r.State.Phase("b"); rec.State != nodestatus.StateFailed || rec.Code != nodestatus.CodeCSRTimeout {
		t.Errorf("record of b = %+v", rec)
	}

	// A new runner over the same state file resumes at b.
	calls = nil
	r = newRunner(t, path, &calls, "")
	if err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if strings.Join(calls, ",") != "b,c" {
		t.Errorf("resumed run called %v, want b,c", calls)
	}
	// What the phases learned survived the restart, typed.
	if got := strings.Join(r.State.Data.Seen, ","); got != "a,b,b,c" {
		t.Errorf("learned %q, want a,b,b,c", got)
	}
	if !r.State.Done("a", "b", "c") {
		t.Errorf("state not done: %+v", r.State.Phases)
	}
	buf, ok := r.Out.(*bytes.Buffer)
	if !ok {
		t.Fatalf("the runner writes to a %T, not newRunner's buffer", r.Out)
	}
	out := buf.String()
	for _, want := range []string{"[a] already done", "[b] doing b", "[c] done in"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if err := r.RunPhases(context.Background(), "zzz"); err == nil || !strings.Contains(err.Error(), "phases are [a b c]") {
		t.Errorf("unknown phase: %v", err)
	}
}

// TestOneWriteBetweenPhases checks that a phase's end and the next phase's start are written
// together: a run of n phases writes the state file n+1 times, and every write leaves a state a
// restart resumes from correctly.
func TestOneWriteBetweenPhases(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	var calls []string
	r := newRunner(t, path, &calls, "")
	var writes []string
	r.Store.Write = func(p string, b []byte) error {
		var s State[learned]
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		var recs []string
		for _, p := range s.Phases {
			recs = append(recs, p.Name+"="+string(p.State))
		}
		writes = append(writes, strings.Join(recs, " "))
		return os.WriteFile(p, b, 0o600)
	}
	if err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"a=Running",
		"a=Done b=Running",
		"a=Done b=Done c=Running",
		"a=Done b=Done c=Done",
	}
	if !slices.Equal(writes, want) {
		t.Errorf("state file writes:\n%s\nwant:\n%s", strings.Join(writes, "\n"), strings.Join(want, "\n"))
	}

	// A phase run again on its own is written when it starts and when it ends.
	writes = nil
	if err := r.RunPhases(context.Background(), "b"); err != nil {
		t.Fatal(err)
	}
	if want := []string{"a=Done b=Running c=Done", "a=Done b=Done c=Done"}; !slices.Equal(writes, want) {
		t.Errorf("state file writes of phase b: %q, want %q", writes, want)
	}
}
