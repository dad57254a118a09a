// Package local is the provider's local backend: clusters are real control planes running as
// processes on 127.0.0.1 (package controlplane), and node pools' "VMs" are simulated Windows
// machines, each a nodeboot process running the same join code against them. Everything lives
// under a state directory, so that it outlives the terraform run that created it.
package local

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	return "", fmt.Errorf("%s not found in the provider's local.bin_path (%s) or PATH: run `make build testenv` and point bin_path at bin/ and .testbin/",
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
			return "", fmt.Errorf("%s is in %s but %s is not: keep the control plane's programs together (make testenv builds them into .testbin/)", "kube-apiserver", dir, other)
		}
	}
	return dir, nil
}
