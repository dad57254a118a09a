// Package filesum computes the sha256 of files, the checksum every kubewin artifact is
// verified with.
package filesum

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
)

// File returns the lower-case hex sha256 and the size of a file.
func File(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}
