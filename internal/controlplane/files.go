package controlplane

import (
	"bytes"
	"os"
	"path/filepath"

	"github.com/kubewin/kubewin/internal/ipam"
)

func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
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
		_ = tmp.Close() // the write error is the one to report
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// tail returns the last n lines of a file, or nothing when it cannot be read.
func tail(path string, n int) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	if len(lines) > n+1 {
		lines = lines[len(lines)-n-1:]
	}
	return bytes.Join(lines, nil)
}

func firstServiceIP(serviceCIDR string) (string, error) {
	p, err := ipam.ParsePrefix(serviceCIDR)
	if err != nil {
		return "", err
	}
	a, err := ipam.Nth(p, 1)
	if err != nil {
		return "", err
	}
	return a.String(), nil
}
