package cmd

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubewin/kubewin/nodeboot/internal/logfile"
)

// The service host appends the program's output to its log, which rotates, fails when the
// program exits (so that the service's recovery actions restart it), and ends the program when
// the service stops.
func TestServiceHost(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "logs")
	log := filepath.Join(dir, "cri-dockerd.log")
	err := host(context.Background(), log, logfile.Default, "sh", []string{"-c", "echo listening on npipe; exit 3"})
	if err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("a program that exits: %v", err)
	}
	if b, _ := os.ReadFile(log); string(b) != "listening on npipe\n" {
		t.Errorf("log %q", b)
	}
	// Past the policy's size, the log is set aside and a new one begun.
	err = host(context.Background(), log, logfile.Policy{MaxSize: 30, MaxAge: time.Hour}, "sh", []string{"-c",
		"echo serving CRI; sleep 0.1; echo next; exit 3"})
	if err == nil {
		t.Error("a program that exits: no error")
	}
	rotated, _ := filepath.Glob(filepath.Join(dir, "cri-dockerd-*.log"))
	if len(rotated) != 1 {
		t.Fatalf("rotated logs: %v", rotated)
	}
	if b, _ := os.ReadFile(rotated[0]); string(b) != "listening on npipe\nserving CRI\n" {
		t.Errorf("rotated log %q", b)
	}
	if b, _ := os.ReadFile(log); string(b) != "next\n" {
		t.Errorf("log after rotation %q", b)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- host(ctx, log, logfile.Default, "sleep", []string{"60"}) }()
	time.Sleep(100 * time.Millisecond)
	cancel()
	if err := <-done; err != nil || time.Since(start) > 10*time.Second {
		t.Errorf("stopping the service: %v after %s", err, time.Since(start))
	}
}
