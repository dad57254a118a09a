// Package atomicfile replaces a file in one rename, so that a reader in another process (a second
// terraform run, a refresh, a machine's own nodeboot, a control plane's next start) never reads it
// half written.
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write replaces path with data and perm: the data goes to a temporary file of a name of its own
// beside path, which is then renamed over it (rename(2) replaces its target atomically within a
// file system). Writers of the same path at once each rename a whole file of their own, and the
// last rename wins; a failed write leaves path as it was.
func Write(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	// After the rename the temporary name is gone; before it, removing it is a best-effort cleanup.
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close() // the write error is the one to report
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		_ = tmp.Close() // the chmod error is the one to report
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
