// Package local is the provider's local backend: clusters are real control planes running as
// processes on 127.0.0.1 (package controlplane), and node pools' "VMs" are simulated Windows
// machines, each a nodeboot process running the same join code against them. Everything lives
// under a state directory, so that it outlives the terraform run that created it.
package local

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/kubewin/kubewin/internal/atomicfile"
	"github.com/kubewin/kubewin/internal/controlplane"
)

// Backend is the local backend's configuration.
type Backend struct {
	// StateDir holds clusters/<name>/ and pools/<name>/.
	StateDir string
	// BinPath lists directories searched for kube-apiserver, etcd, kubeadm, … and nodeboot.
	BinPath []string
}

// New returns a backend, making its paths absolute.
func New(stateDir string, binPath []string) (*Backend, error) {
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		return nil, err
	}
	b := &Backend{StateDir: abs}
	for _, d := range binPath {
		if d == "" {
			continue
		}
		a, err := filepath.Abs(d)
		if err != nil {
			return nil, err
		}
		b.BinPath = append(b.BinPath, a)
	}
	return b, nil
}

// ClusterDir is where a cluster's control plane keeps its data.
func (b *Backend) ClusterDir(name string) string { return filepath.Join(b.StateDir, "clusters", name) }

// Binary finds a program on the bin path (then on PATH).
func (b *Backend) Binary(name string) (string, error) {
	for _, d := range b.BinPath {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return filepath.Abs(p)
	}
	return "", fmt.Errorf("%s not found in the provider's local.bin_path (%s) or PATH: run `make build testenv` and point bin_path at bin/ and "+
		".testbin/",
		name, strings.Join(b.BinPath, ", "))
}

// ControlPlaneBinDir is the directory holding the control plane's programs.
func (b *Backend) ControlPlaneBinDir() (string, error) {
	p, err := b.Binary("kube-apiserver")
	if err != nil {
		return "", err
	}
	dir := filepath.Dir(p)
	for _, other := range []string{"etcd", "kube-controller-manager", "kube-scheduler", "kubeadm"} {
		if _, err := os.Stat(filepath.Join(dir, other)); err != nil {
			return "", fmt.Errorf("%s is in %s but %s is not: keep the control plane's programs together (make testenv builds them into .testbin/)",
				"kube-apiserver", dir, other)
		}
	}
	return dir, nil
}

// Clusters lists the names of the backend's clusters.
func (b *Backend) Clusters() ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(b.StateDir, "clusters"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// Cluster returns a local cluster by name.
func (b *Backend) Cluster(name string) (*controlplane.ControlPlane, error) {
	cp, err := controlplane.Load(b.ClusterDir(name))
	if err != nil {
		return nil, fmt.Errorf("the local backend has no cluster named %q: %w", name, err)
	}
	return cp, nil
}

// ControlPlaneVersion is the version of the control plane programs on the bin path, which a
// cluster created now would run.
func (b *Backend) ControlPlaneVersion() (string, error) {
	dir, err := b.ControlPlaneBinDir()
	if err != nil {
		return "", err
	}
	return controlplane.BinaryVersion(dir)
}

// SavePoolFile keeps a file of a pool's (its settings, for import).
func (b *Backend) SavePoolFile(pool, name string, data []byte) error {
	dir := filepath.Join(b.StateDir, "pools", pool)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, name), data, 0o644)
}

// LoadPoolFile reads a file SavePoolFile kept.
func (b *Backend) LoadPoolFile(pool, name string) ([]byte, error) {
	return os.ReadFile(filepath.Join(b.StateDir, "pools", pool, name))
}
