package simboot

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	kubeletapis "k8s.io/kubelet/pkg/apis"

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
//   - the programs the script downloads (kubeadmboot.DownloadsPath) are written as stand-ins,
//     marked simulated, once the machine's connection to the Internet would be carried;
//   - a worker runs `kubeadm join` (discovery, kubelet configuration and bootstrap kubeconfig)
//     without its preflight checks and without its wait for the kubelet; a SIMULATED kubelet
//     (internal/simkubelet), which refuses an image credential provider the kubelet would not
//     load, then does the kubelet's TLS bootstrap with that kubeconfig and keeps
//     its Node Ready, marked simulated; it runs no containers.
//
//
// cloud-init's bootcmd runs on the machine (sh, before the files are written, as cloud-init runs
// it): kubewin's maps the endpoint's name in /etc/hosts behind an internal load balancer.
//
// Before its package and kubeadm steps the machine asks the ARM test server's network whether its
// connections would be carried (armtest.Instance.Reach): a machine from a marketplace image needs
// the package mirrors on the Internet, and every kubeadm step the API server endpoint, a name
// resolved through the machine's /etc/hosts; a connection Azure would not carry fails the step,
// as its timeout would. This host carries no virtual network: once Reach allowed it, the
// machine's /etc/hosts maps the endpoint's name to the stand-in on this host of the address it
// mapped it to (armtest.Instance.HostAddress; 127.0.0.1 stands for the machine's own address),
// a first control plane behind a name binds its API server at its own address's stand-in, and
// the processes of this host (the control plane, the simulated kubelet) connect to the stand-in
// and check the API server's certificate for the name. The bootstrap script's own change of
// /etc/hosts after a control plane joined is not made: the simulated cluster's API server is the
// first control plane's.
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
	return m.run(ctx, "kubeadm", args...)
}

// run runs a program in the machine, its command line and output in the serial log.
func (m *linuxMachine) run(ctx context.Context, name string, args ...string) error {
	m.serial("$ %s %s", name, strings.Join(args, " "))
	out, err := m.machine.Command(ctx, name, args...).CombinedOutput()
	m.serial("%s", strings.TrimRight(string(out), "\n"))
	if err != nil {
		return fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return nil
}

func (b *Booter) bootLinux(ctx context.Context, in armtest.Instance, doc *kubeadmboot.Document) error {
	dir := b.machineDir(in)
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
	for _, cmd := range doc.BootCmd { // cloud-init runs them before it writes the files
		if err := m.run(ctx, "sh", "-c", cmd); err != nil {
			m.serial("%s", kubeadmboot.FailedLine(doc.Role, "bootcmd", 1))
			return fmt.Errorf("machine %s: bootcmd: %w", in.ComputerName, err)
		}
	}
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
	if err := m.download(in, doc); err != nil {
		return "packages", err
	}
	endpoint, err := kubeadmboot.EndpointOf([]byte(doc.Files[kubeadmboot.ConfigPath].Content))
	if err != nil {
		return "kubeadm", err
	}
	to, name, err := m.resolve(endpoint)
	if err != nil {
		return "kubeadm", err
	}
	if err := reach(in, to); err != nil {
		return "kubeadm", fmt.Errorf("kubeadm cannot connect to the API server at %s (%s): %w", endpoint, to, err)
	}
	if name != "" {
		if err := m.standIn(in, name, to); err != nil {
			return "kubeadm", err
		}
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
		listen := to // the frontend's address, or the machine's own behind a name that maps to it
		if name != "" {
			listen = in.HostAddress(netip.AddrPortFrom(in.PrivateIP, to.Port()))
		}
		return "kubeadm", b.initControlPlane(ctx, m, cluster, name, listen)
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
	if err := reach(in, armtest.PackageMirror); err != nil {
		return fmt.Errorf("apt-get update: could not connect to the package mirrors (%s has no kubeadm): %w", in.ImageID, err)
	}
	return nil
}

// download does what the bootstrap script's packages phase does with the programs it lists
// (kubeadmboot.DownloadsPath): one the machine lacks is fetched from its URL, which needs the
// Internet (armtest.PackageMirror stands for it). The simulated machine fetches nothing: once
// the connection would be carried it writes a stand-in, marked simulated, at the program's path.
func (m *linuxMachine) download(in armtest.Instance, doc *kubeadmboot.Document) error {
	downloads, err := doc.Downloads()
	if err != nil {
		return err
	}
	for _, d := range downloads {
		if _, err := m.machine.ReadFile(d.Path); err == nil {
			continue // the image has it
		}
		u := strings.ReplaceAll(d.URL, kubeadmboot.ArchPlaceholder, "amd64")
		if err := reach(in, armtest.PackageMirror); err != nil {
			return fmt.Errorf("curl %s: could not connect: %w", u, err)
		}
		m.serial("armtest: SIMULATED download of %s to %s: a stand-in is written (the test server has no Internet)", u, d.Path)
		if err := m.machine.WriteFile(d.Path, []byte("#!/bin/sh\n# SIMULATED download of "+u+"\nexit 1\n"), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// reach asks the ARM test server's network whether the machine's connection to an address would
// be carried.
func reach(in armtest.Instance, to netip.AddrPort) error {
	if in.Reach == nil {
		return nil
	}
	return in.Reach(to)
}

// resolve is host:port's address as the machine resolves it, and the name it resolved ("" for an
// address): a name through the machine's /etc/hosts (the first entry naming it), where kubewin's
// bootcmd maps the endpoint's name; the simulated machine has no DNS.
func (m *linuxMachine) resolve(hostport string) (netip.AddrPort, string, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return netip.AddrPort{}, "", err
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return netip.AddrPort{}, "", fmt.Errorf("%s: port: %w", hostport, err)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return netip.AddrPortFrom(a, uint16(p)), "", nil
	}
	hosts, err := m.hosts()
	if err != nil {
		return netip.AddrPort{}, "", err
	}
	for _, line := range strings.Split(string(hosts), "\n") {
		f := strings.Fields(strings.SplitN(line, "#", 2)[0])
		if len(f) > 1 && slices.Contains(f[1:], host) {
			a, err := netip.ParseAddr(f[0])
			return netip.AddrPortFrom(a, uint16(p)), host, err
		}
	}
	return netip.AddrPort{}, "", fmt.Errorf("could not resolve %s: no entry in /etc/hosts names it, and kubewin's names are in no DNS", host)
}

// hosts is the machine's /etc/hosts: its own once it changed it, else the host's.
func (m *linuxMachine) hosts() ([]byte, error) {
	if data, err := m.machine.ReadFile("/etc/hosts"); !errors.Is(err, fs.ErrNotExist) {
		return data, err
	}
	return os.ReadFile("/etc/hosts")
}

// standIn maps name, which the machine's /etc/hosts maps to to's address, to that address's
// stand-in on this host instead (armtest.Server.HostAddress), once Reach has said whether Azure
// would carry the connection: 127.0.0.1 (the machine itself) becomes the stand-in of the
// machine's own address, where its API server listens.
func (m *linuxMachine) standIn(in armtest.Instance, name string, to netip.AddrPort) error {
	if in.HostAddress == nil {
		return nil
	}
	if to.Addr().IsLoopback() {
		to = netip.AddrPortFrom(in.PrivateIP, to.Port())
	}
	host := in.HostAddress(to)
	hosts, err := m.hosts()
	if err != nil {
		return err
	}
	var out []string
	for _, line := range strings.Split(strings.TrimRight(string(hosts), "\n"), "\n") {
		if f := strings.Fields(strings.SplitN(line, "#", 2)[0]); len(f) > 1 && slices.Contains(f[1:], name) {
			continue
		}
		out = append(out, line)
	}
	out = append(out, host.Addr().String()+" "+name)
	m.serial("armtest: /etc/hosts maps %s to %s, the stand-in on this host of %s, which the machine's /etc/hosts maps it to", name, host.Addr(),
		to.Addr())
	return m.machine.WriteFile("/etc/hosts", []byte(strings.Join(out, "\n")+"\n"), 0o644)
}

// hostServer is an API server URL of the machine as this host's processes reach it, and the
// name its certificate is verified for: a name is resolved through the machine's /etc/hosts.
func (m *linuxMachine) hostServer(server string) (string, string, error) {
	u, err := url.Parse(server)
	if err != nil {
		return "", "", err
	}
	to, name, err := m.resolve(u.Host)
	if err != nil || name == "" {
		return server, "", err
	}
	return "https://" + to.String(), name, nil
}

// hostKubeconfig is a kubeconfig of the machine as processes of this host use it: the clusters
// at https://name:port are at https://listen, verified as name (this host resolves no name of
// the machine's /etc/hosts).
func hostKubeconfig(data []byte, name string, listen netip.AddrPort) ([]byte, error) {
	kc, err := clientcmd.Load(data)
	if err != nil {
		return nil, err
	}
	for _, c := range kc.Clusters {
		if u, err := url.Parse(c.Server); err == nil && u.Hostname() == name {
			c.Server, c.TLSServerName = "https://"+listen.String(), name
		}
	}
	return clientcmd.Write(*kc)
}

// initControlPlane is `kubeadm init --upload-certs` on a simulated machine whose API server
// listens at listen; name is the endpoint's name ("" when it is an address).
func (b *Booter) initControlPlane(ctx context.Context, m *linuxMachine, cluster kubeadmboot.Cluster, name string, listen netip.AddrPort) error {
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
		SuperAdmin: m.machine.File("/etc/kubernetes/super-admin.conf"), ServerName: name,
	}
	// With a name for the endpoint, this host's processes use copies of the kubeconfigs that
	// reach the API server at listen.
	hostView := func(path string, data []byte) (string, error) {
		if name == "" {
			return path, nil
		}
		var err error
		if data == nil {
			if data, err = os.ReadFile(path); err != nil {
				return "", err
			}
		}
		if data, err = hostKubeconfig(data, name, listen); err != nil {
			return "", err
		}
		out := filepath.Join(m.dir, "host-"+filepath.Base(path))
		return out, os.WriteFile(out, data, 0o600)
	}
	var err error
	if files.Admin, err = hostView(files.Admin, nil); err != nil {
		return err
	}
	if files.SuperAdmin, err = hostView(files.SuperAdmin, nil); err != nil {
		return err
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
		if *c.path, err = hostView(*c.path, out); err != nil {
			return err
		}
	}
	m.serial("armtest: starting etcd, kube-apiserver (at %s), kube-controller-manager and kube-scheduler as processes", listen)
	cp, err := controlplane.StartKubeadm(ctx, controlplane.Config{
		Dir: filepath.Join(m.dir, "controlplane"), BinDir: b.KubeBin, ClusterName: cluster.Name,
		ClusterCIDR: cluster.PodSubnet, ServiceCIDR: cluster.ServiceSubnet, NodeCIDRMaskSize: cluster.NodeCIDRMaskSize,
		Progress: serialWriter{m},
	}, files, listen.String())
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
	kubeadmFlags        = "/var/lib/kubelet/kubeadm-flags.env"
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
	// The kubelet runs in this process, which resolves no name of the machine's /etc/hosts: it
	// connects where the machine resolves the server's name to (a stand-in) and verifies the name.
	server, serverName, err := m.hostServer(cluster.Server)
	if err != nil {
		return err
	}
	name := m.machine.Hostname
	write := func(p string, data []byte) error { return m.machine.WriteFile(p, data, 0o600) }
	res, err := tlsbootstrap.Run(ctx, tlsbootstrap.Options{
		Server: server, ServerName: serverName, CACert: cluster.CertificateAuthorityData, Token: user.Token, NodeName: name,
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

	cfg := &rest.Config{Host: server, TLSClientConfig: rest.TLSClientConfig{
		CAData: cluster.CertificateAuthorityData, CertData: res.CertPEM, KeyData: res.KeyPEM, ServerName: serverName,
	}}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	// The kubelet's flags kubeadm wrote from its kubeletExtraArgs.
	flags, err := m.machine.ReadFile(kubeadmFlags)
	if err != nil {
		return fmt.Errorf("kubelet flags: %w", err)
	}
	args := strings.Fields(strings.Trim(strings.TrimSpace(strings.TrimPrefix(string(flags), "KUBELET_KUBEADM_ARGS=")), `"`))
	external := slices.Contains(args, "--cloud-provider=external")
	// The kubelet refuses to start on a credential provider it cannot load.
	credentialConfig, credentialBinDir := flagValue(args, "image-credential-provider-config"), flagValue(args, "image-credential-provider-bin-dir")
	if credentialConfig != "" || credentialBinDir != "" {
		if err := simkubelet.CheckCredentialProviders("linux", credentialConfig, credentialBinDir, m.machine.ReadFile); err != nil {
			return fmt.Errorf("kubelet: %w", err)
		}
	}
	k := &simkubelet.Kubelet{
		Client: client, NodeIP: in.PrivateIP, MaxPods: 110, Out: serialWriter{m},
		ExternalCloudProvider: external, Config: cfg, MetadataEndpoint: in.MetadataEndpoint, Sandbox: simkubelet.LinuxContainerd(),
		Note: "a simulated Linux machine of the ARM test server: no containers run on it",
		Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			corev1.LabelHostname: name, corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64",
			kubeletapis.LabelOS: "linux", kubeletapis.LabelArch: "amd64", // as the kubelet's initialNode
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

// flagValue is the value of --name=value in args, "" without it.
func flagValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

// shutdownLinux stops what the machine runs and removes it.
func (b *Booter) shutdownLinux(ctx context.Context, in armtest.Instance) error {
	dir := b.machineDir(in)
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
	m := b.linux[b.machineDir(in)]
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
	data, _ := os.ReadFile(filepath.Join(b.machineDir(in), "serial.log"))
	return data
}
