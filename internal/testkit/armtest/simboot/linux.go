package simboot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubewin/kubewin/internal/controlplane"
	"github.com/kubewin/kubewin/internal/kubeadmboot"
	"github.com/kubewin/kubewin/internal/sim/simkubelet"
	"github.com/kubewin/kubewin/internal/testkit/armtest"
	"github.com/kubewin/kubewin/internal/testkit/simlinux"
	"github.com/kubewin/kubewin/internal/tlsbootstrap"
)

// A Linux machine boots from the cloud-init user data kubewin writes (internal/kubeadmboot), as
// an Ubuntu VM would, with these differences, which it writes to its serial console:
//
//   - cloud-init's files are written into the machine (internal/simlinux: its own /etc and
//     /var/lib over the host's), but its bootstrap script is not run: it installs packages and
//     drives systemd, which a simulated machine has not. The machine runs what the script would
//     have kubeadm do, with the real kubeadm of the test environment on the machine:
//   - the first control plane (`kubeadm init`) runs the phases that make certificates and
//     kubeconfigs, then starts etcd, kube-apiserver, kube-controller-manager and kube-scheduler
//     as processes (internal/controlplane) from those files, the API server bound at the
//     configuration's control plane endpoint — the load balancer's frontend address, which the
//     ARM test server hands out of 127.0.0.0/8 — and runs the phases that upload the
//     configuration and the certificates (with the certificate key), create the bootstrap token
//     and install CoreDNS and kube-proxy, with super-admin.conf (kubeadm would use admin.conf
//     through the machine's own address, which a simulated machine has not). kube-controller-
//     manager and kube-scheduler reach the API server through the endpoint too, and etcd runs
//     without TLS on loopback. It registers no Node of its own (no kubelet).
//   - a further control plane runs `kubeadm join` up to the control plane itself: discovery with
//     the token and the CA pin, the download of the shared certificates with the certificate key,
//     its own certificates and kubeconfigs. It runs no processes: the simulated cluster's control
//     plane is the first one's.
//   - a worker runs `kubeadm join` (discovery, kubelet configuration and bootstrap kubeconfig)
//     without its preflight checks and without its wait for the kubelet; a SIMULATED kubelet
//     (internal/simkubelet) then does the kubelet's TLS bootstrap with that kubeconfig and keeps
//     its Node Ready, marked simulated; it runs no containers.
//
//
// Before its package and kubeadm steps the machine asks the ARM test server's network whether its
// connections would be carried (armtest.Instance.Reach): a machine from a marketplace image needs
// the package mirrors on the Internet, and every kubeadm step the API server endpoint; a
// connection Azure would not carry fails the step, as its timeout would.
//
// Run commands run their script with sh on the machine.

// linuxMachine is a booted Linux machine.
type linuxMachine struct {
	machine  simlinux.Machine
	dir      string
	cp       *controlplane.ControlPlane
	stop     context.CancelFunc
	done     chan struct{}
	serialMu sync.Mutex
}

func (b *Booter) linuxDir(in armtest.Instance) string {
	sum := sha256.Sum256([]byte(strings.ToLower(in.ID)))
	return filepath.Join(b.Dir, strings.ToLower(in.ComputerName)+"-"+hex.EncodeToString(sum[:4]))
}

// serial appends lines to the machine's serial console.
func (m *linuxMachine) serial(format string, args ...any) {
	m.serialMu.Lock()
	defer m.serialMu.Unlock()
	f, err := os.OpenFile(filepath.Join(m.dir, "serial.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return
	}
	// The serial console is best-effort, as a machine's is: a line it cannot write is lost.
	defer func() { _ = f.Close() }()
	_, _ = fmt.Fprintf(f, format+"\n", args...)
}

// kubeadm runs kubeadm on the machine, its output going to the serial console as cloud-init's does.
func (m *linuxMachine) kubeadm(ctx context.Context, args ...string) error {
	m.serial("$ kubeadm %s", strings.Join(args, " "))
	out, err := m.machine.Command(ctx, "kubeadm", args...).CombinedOutput()
	m.serial("%s", strings.TrimRight(string(out), "\n"))
	if err != nil {
		return fmt.Errorf("kubeadm %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

func (b *Booter) bootLinux(ctx context.Context, in armtest.Instance, doc *kubeadmboot.Document) error {
	dir := b.linuxDir(in)
	m := &linuxMachine{
		dir:     dir,
		machine: simlinux.Machine{Root: filepath.Join(dir, "root"), Hostname: strings.ToLower(in.ComputerName), Path: []string{b.KubeBin}},
		done:    make(chan struct{}),
	}
	if err := m.machine.Prepare(); err != nil {
		return err
	}
	b.mu.Lock()
	if b.linux == nil {
		b.linux = map[string]*linuxMachine{}
	}
	b.linux[dir] = m
	b.mu.Unlock()
	m.serial("armtest: SIMULATED Linux machine %s (%s) booted from %s: cloud-init's files are written, its bootstrap script is not run; kubeadm "+
		"runs the %s steps a simulated machine can (see internal/armtest/simboot)", in.ComputerName, in.PrivateIP, in.ImageID, doc.Role)
	m.serial("%sstart role=%s", kubeadmboot.SerialPrefix, doc.Role)
	for _, f := range doc.Files {
		if m.machine.File(f.Path) == f.Path {
			m.serial("armtest: %s is outside the simulated machine's /etc and /var/lib: not written", f.Path)
			continue
		}
		if err := m.machine.WriteFile(f.Path, []byte(f.Content), 0o600); err != nil {
			return err
		}
	}
	phase, err := b.bootRole(ctx, m, in, doc)
	if err != nil {
		m.serial("%s", err)
		m.serial("%s", kubeadmboot.FailedLine(doc.Role, phase, 1))
		return fmt.Errorf("machine %s: %s: %w", in.ComputerName, phase, err)
	}
	// As the bootstrap script: the configuration holds the token and the certificate key.
	_ = os.Remove(m.machine.File(kubeadmboot.ConfigPath))
	ca, err := m.machine.ReadFile(kubeadmboot.CACertPath)
	if err != nil {
		m.serial("%s", kubeadmboot.FailedLine(doc.Role, "report", 1))
		return err
	}
	m.serial("%s", kubeadmboot.ReadyLine(doc.Role, ca))
	return nil
}

// bootRole does what kubeadm does for the machine's role and returns the phase it was in.
func (b *Booter) bootRole(ctx context.Context, m *linuxMachine, in armtest.Instance, doc *kubeadmboot.Document) (string, error) {
	if b.KubeBin == "" {
		return "packages", fmt.Errorf("the booter has no KubeBin: the simulated machine has no kubeadm")
	}
	version, err := controlplane.BinaryVersion(b.KubeBin)
	if err != nil {
		return "packages", err
	}
	if err := reachable(in); err != nil {
		return "packages", err
	}
	endpoint, err := kubeadmboot.EndpointOf([]byte(doc.Files[kubeadmboot.ConfigPath].Content))
	if err != nil {
		return "kubeadm", err
	}
	if err := reach(in, endpoint); err != nil {
		return "kubeadm", fmt.Errorf("kubeadm cannot connect to the API server at %s: %w", endpoint, err)
	}
	cfg := kubeadmboot.ConfigPath
	switch doc.Role {
	case kubeadmboot.RoleInit:
		cluster, err := kubeadmboot.ClusterOf([]byte(doc.Files[kubeadmboot.ConfigPath].Content))
		if err != nil {
			return "kubeadm", err
		}
		if cluster.KubernetesVersion != version {
			return "packages", fmt.Errorf("the simulated machine has Kubernetes %s only, the configuration asks for %s", version, cluster.KubernetesVersion)
		}
		return "kubeadm", b.initControlPlane(ctx, m, cluster)
	case kubeadmboot.RoleControlPlane:
		skip := []string{"preflight", "control-plane-prepare/control-plane", "check-etcd", "kubelet-start", "etcd-join",
			"kubelet-wait-bootstrap", "control-plane-join", "wait-control-plane"}
		return "kubeadm", m.kubeadm(ctx, "join", "--config", cfg, "--skip-phases", strings.Join(skip, ","))
	default:
		if err := m.kubeadm(ctx, "join", "--config", cfg, "--skip-phases", "preflight,kubelet-wait-bootstrap"); err != nil {
			return "kubeadm", err
		}
		return "kubelet", b.startKubelet(ctx, m, in, version)
	}
}

// reachable checks that a machine booted from a marketplace image, which has no kubeadm, can
// reach the package mirrors the bootstrap script installs it from (apt-get, pkgs.k8s.io).
func reachable(in armtest.Instance) error {
	if strings.Count(in.ImageID, ":") != 3 {
		return nil
	}
	if err := reach(in, armtest.PackageMirror.String()); err != nil {
		return fmt.Errorf("apt-get update: could not connect to the package mirrors (%s has no kubeadm): %w", in.ImageID, err)
	}
	return nil
}

// reach asks the ARM test server's network whether the machine's connection to host:port would
// be carried.
func reach(in armtest.Instance, hostport string) error {
	if in.Reach == nil {
		return nil
	}
	to, err := netip.ParseAddrPort(hostport)
	if err != nil {
		return fmt.Errorf("%s is not an address and port: %w", hostport, err)
	}
	return in.Reach(to)
}

// initControlPlane is `kubeadm init --upload-certs` on a simulated machine.
func (b *Booter) initControlPlane(ctx context.Context, m *linuxMachine, cluster kubeadmboot.Cluster) error {
	cfg := kubeadmboot.ConfigPath
	for _, phase := range [][]string{{"certs", "all"}, {"kubeconfig", "admin"}, {"kubeconfig", "super-admin"}} {
		if err := m.kubeadm(ctx, append(append([]string{"init", "phase"}, phase...), "--config", cfg)...); err != nil {
			return err
		}
	}
	// The controller manager's and scheduler's own kubeconfigs name the machine's address,
	// which a simulated machine has not: theirs reach the API server at the endpoint.
	files := controlplane.KubeadmFiles{
		PKIDir: m.machine.File("/etc/kubernetes/pki"), Admin: m.machine.File(kubeadmboot.AdminKubeconfig),
		SuperAdmin: m.machine.File("/etc/kubernetes/super-admin.conf"),
	}
	for _, c := range []struct {
		user string
		path *string
	}{{"system:kube-controller-manager", &files.ControllerManager}, {"system:kube-scheduler", &files.Scheduler}} {
		out, err := m.machine.Command(ctx, "kubeadm", "kubeconfig", "user", "--config", cfg, "--client-name", c.user).Output()
		if err != nil {
			return fmt.Errorf("kubeadm kubeconfig user %s: %w", c.user, err)
		}
		*c.path = filepath.Join(m.dir, strings.TrimPrefix(c.user, "system:")+".conf")
		if err := os.WriteFile(*c.path, out, 0o600); err != nil {
			return err
		}
	}
	m.serial("armtest: starting etcd, kube-apiserver (at %s), kube-controller-manager and kube-scheduler as processes", cluster.Endpoint)
	cp, err := controlplane.StartKubeadm(ctx, controlplane.Config{
		Dir: filepath.Join(m.dir, "controlplane"), BinDir: b.KubeBin, ClusterName: cluster.Name,
		ClusterCIDR: cluster.PodSubnet, ServiceCIDR: cluster.ServiceSubnet, NodeCIDRMaskSize: cluster.NodeCIDRMaskSize,
		Progress: serialWriter{m},
	}, files, cluster.Endpoint)
	if err != nil {
		return err
	}
	b.mu.Lock()
	m.cp = cp
	b.mu.Unlock()
	// With admin.conf kubeadm would reach the API server at the machine's own address
	// (localAPIEndpoint), which a simulated machine has not; with super-admin.conf it goes
	// through the control plane endpoint. (The kubeadm:cluster-admins binding kubeadm would make
	// with it exists already.)
	for _, phase := range [][]string{{"upload-config", "all"}, {"upload-certs", "--upload-certs"}, {"bootstrap-token"}, {"addon", "all"}} {
		args := append(append([]string{"init", "phase"}, phase...), "--config", cfg, "--kubeconfig", "/etc/kubernetes/super-admin.conf")
		if err := m.kubeadm(ctx, args...); err != nil {
			return err
		}
	}
	return nil
}

type serialWriter struct{ m *linuxMachine }

func (w serialWriter) Write(p []byte) (int, error) {
	w.m.serial("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Files of a worker's kubelet, as the kubelet keeps them.
const (
	bootstrapKubeconfig = "/etc/kubernetes/bootstrap-kubelet.conf"
	kubeletKubeconfig   = "/etc/kubernetes/kubelet.conf"
	kubeletKey          = "/var/lib/kubelet/pki/kubelet-client.key"
	kubeletCert         = "/var/lib/kubelet/pki/kubelet-client.crt"
)

// startKubelet does the kubelet's TLS bootstrap with the bootstrap kubeconfig kubeadm wrote,
// writes the kubelet's kubeconfig, and runs the simulated kubelet until the machine shuts down.
func (b *Booter) startKubelet(ctx context.Context, m *linuxMachine, in armtest.Instance, version string) error {
	raw, err := m.machine.ReadFile(bootstrapKubeconfig)
	if err != nil {
		return err
	}
	kc, err := clientcmd.Load(raw)
	if err != nil {
		return err
	}
	kctx := kc.Contexts[kc.CurrentContext]
	if kctx == nil || kc.Clusters[kctx.Cluster] == nil || kc.AuthInfos[kctx.AuthInfo] == nil {
		return fmt.Errorf("%s has no usable current context", bootstrapKubeconfig)
	}
	cluster, user := kc.Clusters[kctx.Cluster], kc.AuthInfos[kctx.AuthInfo]
	name := m.machine.Hostname
	write := func(p string, data []byte) error { return m.machine.WriteFile(p, data, 0o600) }
	res, err := tlsbootstrap.Run(ctx, tlsbootstrap.Options{
		Server: cluster.Server, CACert: cluster.CertificateAuthorityData, Token: user.Token, NodeName: name,
		KeyFile: kubeletKey, CertFile: kubeletCert, ReadFile: m.machine.ReadFile, WriteFile: write, Timeout: 2 * time.Minute,
	})
	if err != nil {
		return fmt.Errorf("kubelet TLS bootstrap: %w", err)
	}
	own := clientcmdapi.NewConfig()
	own.Clusters["default"] = &clientcmdapi.Cluster{Server: cluster.Server, CertificateAuthorityData: cluster.CertificateAuthorityData}
	own.AuthInfos["default"] = &clientcmdapi.AuthInfo{ClientCertificate: kubeletCert, ClientKey: kubeletKey}
	own.Contexts["default"] = &clientcmdapi.Context{Cluster: "default", AuthInfo: "default"}
	own.CurrentContext = "default"
	data, err := clientcmd.Write(*own)
	if err != nil {
		return err
	}
	if err := write(kubeletKubeconfig, data); err != nil {
		return err
	}
	_ = os.Remove(m.machine.File(bootstrapKubeconfig)) // as kubeadm does once the kubelet bootstrapped
	m.serial("[simulated-kubelet] TLS bootstrap done: certificate signing request %s", res.CSRName)

	client, err := kubernetes.NewForConfig(&rest.Config{Host: cluster.Server, TLSClientConfig: rest.TLSClientConfig{
		CAData: cluster.CertificateAuthorityData, CertData: res.CertPEM, KeyData: res.KeyPEM,
	}})
	if err != nil {
		return err
	}
	k := &simkubelet.Kubelet{
		Client: client, NodeIP: in.PrivateIP, MaxPods: 110, Out: serialWriter{m},
		Note: "a simulated Linux machine of the ARM test server: no containers run on it",
		Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			corev1.LabelHostname: name, corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64",
		}}},
		Info: corev1.NodeSystemInfo{
			OperatingSystem: "linux", Architecture: "amd64", OSImage: "Ubuntu 24.04 LTS (simulated)", KernelVersion: "simulated",
			KubeletVersion: version, ContainerRuntimeVersion: "containerd://simulated",
		},
	}
	runCtx, cancel := context.WithCancel(context.Background())
	b.mu.Lock()
	m.stop = cancel
	b.mu.Unlock()
	go func() {
		defer close(m.done)
		if err := k.Run(runCtx); err != nil {
			m.serial("[simulated-kubelet] stopped: %v", err)
		}
	}()
	return nil
}

// shutdownLinux stops what the machine runs and removes it.
func (b *Booter) shutdownLinux(ctx context.Context, in armtest.Instance) error {
	dir := b.linuxDir(in)
	b.mu.Lock()
	m := b.linux[dir]
	delete(b.linux, dir)
	b.mu.Unlock()
	if m == nil {
		return os.RemoveAll(dir)
	}
	var err error
	if m.stop != nil {
		m.stop()
		<-m.done
	}
	if m.cp != nil {
		err = m.cp.Stop(ctx, 10*time.Second)
	}
	if rmErr := os.RemoveAll(dir); err == nil {
		err = rmErr
	}
	return err
}

// runLinux runs a script with sh on the machine.
func (b *Booter) runLinux(ctx context.Context, in armtest.Instance, script string) ([]byte, []byte, int, error) {
	b.mu.Lock()
	m := b.linux[b.linuxDir(in)]
	b.mu.Unlock()
	if m == nil {
		return nil, nil, 0, fmt.Errorf("machine %s is not running", in.ComputerName)
	}
	var stdout, stderr strings.Builder
	cmd := m.machine.Command(ctx, "sh", "-c", script)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	exit := 0
	if err != nil {
		exit = -1
		if ee, ok := err.(interface{ ExitCode() int }); ok {
			exit = ee.ExitCode()
		}
		if exit < 0 {
			return nil, nil, 0, err
		}
	}
	return []byte(stdout.String()), []byte(stderr.String()), exit, nil
}

func (b *Booter) linuxSerial(in armtest.Instance) []byte {
	data, _ := os.ReadFile(filepath.Join(b.linuxDir(in), "serial.log"))
	return data
}
