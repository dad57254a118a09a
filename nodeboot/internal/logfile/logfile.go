// Package logfile rotates the log files of the node's programs that kube-log-runner does not
// run: cri-dockerd's, which nodeboot's service-host writes, and containerd's, which containerd
// writes itself (--log-file). They rotate as kube-log-runner rotates the kubelet's and
// kube-proxy's: a file that reaches MaxSize is set aside as name-<yyyymmdd-hhmmss>.ext, and
// set-aside files older than MaxAge are removed (k8s.io/component-base
// logs/kube-log-runner/internal/logrotation).
package logfile

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Policy is when log files rotate and how long rotated files are kept.
type Policy struct {
	MaxSize int64
	MaxAge  time.Duration
}

// Default is the policy of every node log, kube-log-runner's flags included.
var Default = Policy{MaxSize: 100 << 20, MaxAge: 7 * 24 * time.Hour}

// timeLayout names rotated files, as kube-log-runner does.
const timeLayout = "20060102-150405"

// Writer appends to a log file and rotates it.
type Writer struct {
	path   string
	policy Policy
	now    func() time.Time

	mu   sync.Mutex
	file *os.File
	size int64
}

// Open opens path for appending, creating it.
func Open(path string, p Policy) (*Writer, error) {
	w := &Writer{path: path, policy: p, now: time.Now}
	if err := w.open(); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *Writer) open() error {
	f, err := os.OpenFile(w.path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	info, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return err
	}
	w.file, w.size = f, info.Size()
	return nil
}

// Write appends p, then rotates the file when it has reached MaxSize.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.file.Write(p)
	w.size += int64(n)
	if err != nil || w.size < w.policy.MaxSize {
		return n, err
	}
	if err := w.file.Close(); err != nil {
		return n, err
	}
	if err := os.Rename(w.path, rotatedName(w.path, w.now())); err != nil {
		return n, err
	}
	if err := w.open(); err != nil {
		return n, err
	}
	return n, removeOld(w.path, w.policy.MaxAge, w.now())
}

// Close closes the file.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.file.Close()
}

// CopyTruncate rotates a log file that another process holds open for appending and that
// Windows therefore does not let anyone rename: once it has reached MaxSize, its content is
// copied aside and the file truncated in place, as Kubernetes' Windows node setup rotates
// containerd's log (cluster/gce/windows/common.psm1 Rotate-File: "making a compressed copy of
// the original file and then truncating the original file in-place"). The writer keeps
// appending at the new end. Lines written between the copy and the truncation are lost.
func CopyTruncate(path string, p Policy, now time.Time) error {
	info, err := os.Stat(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil || info.Size() < p.MaxSize {
		return err
	}
	src, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = src.Close() }()
	dst, err := os.OpenFile(rotatedName(path, now), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = io.Copy(dst, src)
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Truncate(path, 0); err != nil {
		return err
	}
	return removeOld(path, p.MaxAge, now)
}

func rotatedName(path string, t time.Time) string {
	ext := filepath.Ext(path)
	return strings.TrimSuffix(path, ext) + "-" + t.Format(timeLayout) + ext
}

// removeOld removes the rotated files of path last written before now-maxAge.
func removeOld(path string, maxAge time.Duration, now time.Time) error {
	ext := filepath.Ext(path)
	prefix := filepath.Base(strings.TrimSuffix(path, ext)) + "-"
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		return err
	}
	for _, e := range entries {
		stamp, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || !strings.HasSuffix(stamp, ext) {
			continue
		}
		if _, err := time.Parse(timeLayout, strings.TrimSuffix(stamp, ext)); err != nil {
			continue
		}
		if info, err := e.Info(); err == nil && info.ModTime().Before(now.Add(-maxAge)) {
			if err := os.Remove(filepath.Join(filepath.Dir(path), e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}
