// Package controlplane runs a real Kubernetes control plane (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler) as processes on 127.0.0.1, with the
// kubeadm-compatible state a node join needs: PKI and kubeconfigs from `kubeadm init phase`,
// bootstrap-token authentication, the Node and RBAC authorizers with NodeRestriction, CSR
// signing and approval, bootstrap signer and token cleaner, node IPAM, and the cluster-info
// ConfigMap with its RBAC. Tests use it through package testenv; the local backend uses it to
// run clusters that outlive the process that started them.
package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/atomicfile"
	"github.com/kubewin/kubewin/internal/proc"
)

// Config says where and how to run a control plane.
type Config struct {
	// Dir holds everything the control plane writes: pki/, etcd/, logs/, kubeconfigs, state.
	Dir string
	// BinDir holds etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubeadm.
	BinDir string
	// ClusterName names the cluster in kubeconfigs and certificates. Default: kubewin.
	ClusterName string
	// ClusterCIDR is the pod network that node IPAM splits. Default: v1alpha1.DefaultClusterCIDR.
	ClusterCIDR string
	// ServiceCIDR is the service network. Default: v1alpha1.DefaultServiceCIDR.
	ServiceCIDR string
	// NodeCIDRMaskSize is the size of each node's pod CIDR. Default: 24.
	NodeCIDRMaskSize int
	// Detach starts the processes in their own session so that they outlive the caller;
	// otherwise they die with it.
	Detach bool
	// Progress receives one line per step. Default: discard.
	Progress io.Writer `json:"-"`
}

func (c *Config) setDefaults() {
	if c.ClusterName == "" {
		c.ClusterName = "kubewin"
	}
	if c.ClusterCIDR == "" {
		c.ClusterCIDR = v1alpha1.DefaultClusterCIDR
	}
	if c.ServiceCIDR == "" {
		c.ServiceCIDR = v1alpha1.DefaultServiceCIDR
	}
	if c.NodeCIDRMaskSize == 0 {
		c.NodeCIDRMaskSize = 24
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
}

// Components, in start order.
const (
	Etcd                  = "etcd"
	KubeAPIServer         = "kube-apiserver"
	KubeControllerManager = "kube-controller-manager"
	KubeScheduler         = "kube-scheduler"
)

var components = []string{Etcd, KubeAPIServer, KubeControllerManager, KubeScheduler}

// Ports are the loopback ports the control plane listens on.
type Ports struct {
	EtcdClient int `json:"etcdClient"`
	EtcdPeer   int `json:"etcdPeer"`
	APIServer  int `json:"apiServer"`
	KCM        int `json:"kubeControllerManager"`
	Scheduler  int `json:"kubeScheduler"`
}

// ControlPlane is a started (or reloaded) control plane.
type ControlPlane struct {
	Config Config `json:"config"`
	Ports  Ports  `json:"ports"`
	// PIDs maps each component to its process ID.
	PIDs map[string]int `json:"pids"`
	// Version is the kube-apiserver's version ("v1.37.1").
	Version string `json:"version"`
	// Address is the address the API server binds and is reached at. Default: 127.0.0.1.
	Address string `json:"address,omitempty"`
	// Kubeadm, when set, names the files kubeadm made on a machine that this control plane
	// runs from (StartKubeadm); otherwise they are in Config.Dir.
	Kubeadm *KubeadmFiles `json:"kubeadm,omitempty"`
	// StartedIn is how long Start took.
	StartedIn time.Duration `json:"startedIn"`
}

const stateFile = "controlplane.json"

// Endpoint is the API server's URL.
func (cp *ControlPlane) Endpoint() string { return "https://" + cp.HostPort() }

// HostPort is the API server as host:port, the form a NodeConfig takes.
func (cp *ControlPlane) HostPort() string {
	return net.JoinHostPort(cp.address(), strconv.Itoa(cp.Ports.APIServer))
}

func (cp *ControlPlane) address() string {
	if cp.Address == "" {
		return "127.0.0.1"
	}
	return cp.Address
}

// PKIDir is where the cluster's certificates and keys are.
func (cp *ControlPlane) PKIDir() string {
	if cp.Kubeadm != nil {
		return cp.Kubeadm.PKIDir
	}
	return filepath.Join(cp.Config.Dir, "pki")
}

// CACertFile is the cluster CA certificate.
func (cp *ControlPlane) CACertFile() string { return filepath.Join(cp.PKIDir(), "ca.crt") }

// AdminKubeconfig is a cluster-admin kubeconfig (group kubeadm:cluster-admins, as kubeadm's admin.conf).
func (cp *ControlPlane) AdminKubeconfig() string {
	if cp.Kubeadm != nil {
		return cp.Kubeadm.Admin
	}
	return filepath.Join(cp.Config.Dir, "admin.conf")
}

// KubeadmConfig is the kubeadm configuration file the PKI and cluster state were made from.
func (cp *ControlPlane) KubeadmConfig() string { return filepath.Join(cp.Config.Dir, "kubeadm.yaml") }

// LogFile is a component's log.
func (cp *ControlPlane) LogFile(component string) string {
	return filepath.Join(cp.Config.Dir, "logs", component+".log")
}

// CACert returns the cluster CA certificate (PEM).
func (cp *ControlPlane) CACert() ([]byte, error) { return os.ReadFile(cp.CACertFile()) }

// AdminRESTConfig returns a client config with cluster-admin rights.
func (cp *ControlPlane) AdminRESTConfig() (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", cp.AdminKubeconfig())
	if err != nil {
		return nil, fmt.Errorf("load admin kubeconfig: %w", err)
	}
	return cfg, nil
}

// Load reattaches to a control plane started earlier in dir.
func Load(dir string) (*ControlPlane, error) {
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return nil, fmt.Errorf("load control plane state: %w", err)
	}
	var cp ControlPlane
	if err := json.Unmarshal(b, &cp); err != nil {
		return nil, fmt.Errorf("decode control plane state %s: %w", filepath.Join(dir, stateFile), err)
	}
	cp.Config.setDefaults()
	return &cp, nil
}

func (cp *ControlPlane) save() error {
	b, err := json.MarshalIndent(cp, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(cp.Config.Dir, stateFile), b, 0o600)
}

// Running reports which components' processes are alive.
func (cp *ControlPlane) Running() map[string]bool {
	out := map[string]bool{}
	for _, c := range components {
		out[c] = cp.PIDs[c] > 0 && proc.Alive(cp.PIDs[c])
	}
	return out
}

// Stop terminates the components one after the other, newest first (kube-apiserver shuts down
// promptly only while etcd is still there): SIGTERM, then SIGKILL after grace. It leaves the
// data in place for Resume.
func (cp *ControlPlane) Stop(ctx context.Context, grace time.Duration) error {
	var errs []error
	for i := len(components) - 1; i >= 0; i-- {
		c := components[i]
		if err := proc.Stop(ctx, cp.PIDs[c], grace); err != nil {
			errs = append(errs, fmt.Errorf("stop %s (pid %d): %w", c, cp.PIDs[c], err))
		}
	}
	return errors.Join(errs...)
}

// Destroy stops the control plane and removes its directory.
func (cp *ControlPlane) Destroy(ctx context.Context) error {
	stopErr := cp.Stop(ctx, 10*time.Second)
	return errors.Join(stopErr, os.RemoveAll(cp.Config.Dir))
}

// LogTails returns the last n lines of every component's log, for failure reports.
func (cp *ControlPlane) LogTails(n int) string {
	var out []byte
	for _, c := range components {
		out = append(out, fmt.Sprintf("----- %s (last %d lines of %s)\n", c, n, cp.LogFile(c))...)
		out = append(out, tail(cp.LogFile(c), n)...)
	}
	return string(out)
}
