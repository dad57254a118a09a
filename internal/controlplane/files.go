package controlplane

import (
	"bytes"
	"os"

	"github.com/kubewin/kubewin/internal/ipam"
)

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
