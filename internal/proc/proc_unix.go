//go:build unix

package proc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// SysProcAttr puts a detached process in its own session, so that it outlives the caller and
// its terminal; an attached one in its own process group, so that a terminal's Ctrl-C reaches
// the caller first and the caller stops it in order.
func SysProcAttr(detach bool) *syscall.SysProcAttr {
	if detach {
		return &syscall.SysProcAttr{Setsid: true}
	}
	return &syscall.SysProcAttr{Setpgid: true}
}

// Alive reports whether a process runs.
func Alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Terminate asks a process to stop (SIGTERM).
func Terminate(pid int) error { return ignoreGone(syscall.Kill(pid, syscall.SIGTERM)) }

// Kill stops a process at once (SIGKILL).
func Kill(pid int) error { return ignoreGone(syscall.Kill(pid, syscall.SIGKILL)) }

func ignoreGone(err error) error {
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// TryLock takes the lock called name without waiting, and reports whether it got it. The lock
// is shared by every process of this user that sees the same os.TempDir(): a file there held
// with flock(2), which the kernel releases when the process exits, whatever the way. Release
// removes the file while it still holds it; a process that opened the file before that finds,
// once it has the lock, that the path names another file or none, and reports the lock taken.
func TryLock(name string) (release func(), ok bool, err error) {
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("kubewin-%d-locks", os.Getuid()))
	path := filepath.Join(dir, name)
	var f *os.File
	for try := 0; f == nil; try++ {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, false, err
		}
		// The last holder's release removes the directory when it empties it, maybe in between.
		if f, err = os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600); err != nil && (!errors.Is(err, os.ErrNotExist) || try == 2) {
			return nil, false, err
		}
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close() // never locked
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("lock %s: %w", path, err)
	}
	held, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, false, err
	}
	if named, err := os.Stat(path); err != nil || !os.SameFile(held, named) {
		_ = f.Close()
		return nil, false, nil //nolint:nilerr // the file was removed by its holder's release: someone else's lock now
	}
	return func() {
		_ = os.Remove(path)
		_ = f.Close()      // closing the file releases its lock
		_ = os.Remove(dir) // when no other lock is held: nothing is left in the temp directory
	}, true, nil
}
