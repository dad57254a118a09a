package cmd

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// BenchmarkRunIdleRSS reports the resident memory of an idle `nodeboot run` (simulated
// machine: it runs the simulated kubelet too, so the figure is an upper bound for Windows).
func BenchmarkRunIdleRSS(b *testing.B) {
	var worst float64
	for i := 0; b.Loop(); i++ {
		name := fmt.Sprintf("winrss%06d", i)
		root := machine(b, "rsspool", name)
		var buf lockedBuffer
		cmd := exec.Command(nodeboot, "--platform", "sim", "--root", root, "run")
		cmd.Stdout, cmd.Stderr = &buf, &buf
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			return strings.Contains(buf.String(), "registered and Ready"), nil
		}); err != nil {
			b.Fatalf("run did not come up:\n%s", buf.String())
		}
		time.Sleep(3 * time.Second) // settle: informers synced, a lease renewed
		rss, err := vmRSS(cmd.Process.Pid)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if err != nil {
			b.Fatal(err)
		}
		worst = max(worst, rss)
	}
	b.ReportMetric(worst, "idle-RSS-MiB")
}

// vmRSS returns a process's resident set in MiB; in verbose runs it prints the anonymous and
// file-backed parts.
func vmRSS(pid int) (float64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	rss := -1.0
	s := bufio.NewScanner(f)
	for s.Scan() {
		if strings.HasPrefix(s.Text(), "Rss") && testing.Verbose() {
			fmt.Println(s.Text())
		}
		if rest, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
			if err != nil {
				return 0, err
			}
			rss = kb / 1024
		}
	}
	if rss < 0 {
		return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
	}
	return rss, nil
}
