package logfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestWriterRotates(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cri-dockerd.log")
	old := filepath.Join(dir, "cri-dockerd-20200101-000000.log")
	if err := os.WriteFile(old, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The writer's clock is fixed: the old file's age is counted from it, not from the wall clock.
	now := time.Date(2026, 11, 25, 23, 30, 0, 0, time.UTC)
	if err := os.Chtimes(old, now.Add(-8*24*time.Hour), now.Add(-8*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	w, err := Open(path, Policy{MaxSize: 10, MaxAge: 7 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	w.now = func() time.Time { return now }
	for _, line := range []string{"12345\n", "67890\n", "abc\n"} {
		if _, err := w.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "cri-dockerd-20261125-233000.log")); err != nil || string(b) != "12345\n67890\n" {
		t.Errorf("rotated file: %q %v", b, err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "abc\n" {
		t.Errorf("current file: %q %v", b, err)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("a rotated file older than MaxAge was kept: %v", err)
	}
}

// A file another process appends to is copied aside and truncated; the writer goes on at
// its new end.
func TestCopyTruncate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "containerd.log")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	if _, err := f.WriteString(strings.Repeat("x", 20)); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 25, 23, 30, 0, 0, time.UTC)
	p := Policy{MaxSize: 100, MaxAge: time.Hour}
	if err := CopyTruncate(path, p, now); err != nil {
		t.Fatal(err)
	}
	if info, _ := os.Stat(path); info.Size() != 20 {
		t.Errorf("a file under MaxSize was rotated: %d bytes left", info.Size())
	}
	p.MaxSize = 20
	if err := CopyTruncate(path, p, now); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("next\n"); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "containerd-20261125-233000.log")); err != nil || len(b) != 20 {
		t.Errorf("copy: %q %v", b, err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "next\n" {
		t.Errorf("the truncated file holds %q (%v), want the writer's next line at its start", b, err)
	}
	if err := CopyTruncate(filepath.Join(dir, "missing.log"), p, now); err != nil {
		t.Errorf("missing file: %v", err)
	}
}
