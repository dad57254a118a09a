package cmd

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The service host appends the program's output to its log, fails when the program exits (so
// that the service's recovery actions restart it), and ends the program when the service stops.
func TestServiceHost(t *testing.T) {
	log := filepath.Join(t.TempDir(), "logs", "cri-dockerd.log")
	err := host(context.Background(), log, "sh", []string{"-c", "echo listening on npipe; exit 3"})
	if err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("a program that exits: %v", err)
	}
	if b, _ := os.ReadFile(log); string(b) != "listening on npipe\n" {
		t.Errorf("log %q", b)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- host(ctx, log, "sleep", []string{"60"}) }()
	time.Sleep(100 * time.Millisecond)
	cancel()
	if err := <-done; err != nil || time.Since(start) > 10*time.Second {
		t.Errorf("stopping the service: %v after %s", err, time.Since(start))
	}
}
