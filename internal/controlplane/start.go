package controlplane

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"

	"github.com/kubewin/kubewin/internal/atomicfile"
	"github.com/kubewin/kubewin/internal/proc"
)

// StartTimeout bounds each component's wait for readiness.
const StartTimeout = 90 * time.Second

// Start runs a new control plane in cfg.Dir, which must not hold one already.
func Start(ctx context.Context, cfg Config) (*ControlPlane, error) {
	return launch(cfg, &ControlPlane{}, func(cp *ControlPlane) []step {
		return []step{
			{"certificates and kubeconfigs", cp.writePKI},
			{"etcd ready", func() error { return cp.startEtcd(ctx) }},
			{"kube-apiserver ready", func() error { return cp.startAPIServer(ctx) }},
			{"cluster-admin binding", func() error { return cp.bindClusterAdmins(ctx) }},
			{"kube-controller-manager and kube-scheduler started", cp.startControllers},
			{"kubeadm cluster state (kubeadm-config, kubelet-config, cluster-info, bootstrap RBAC)", func() error { return cp.uploadClusterState(ctx) }},
			{"controllers working", func() error { return cp.waitControllers(ctx) }},
		}
	})
}

type step struct {
	name string
	f    func() error
}

// launch starts cp's components in cfg.Dir by the given steps, leaving nothing running when one
// fails. Ports cp does not set yet are free loopback ports.
func launch(cfg Config, cp *ControlPlane, steps func(*ControlPlane) []step) (_ *ControlPlane, err error) {
	cfg.setDefaults()
	began := time.Now()
	if _, err := os.Stat(filepath.Join(cfg.Dir, stateFile)); err == nil {
		return nil, fmt.Errorf("%s already holds a control plane: load it, or destroy it first", cfg.Dir)
	}
	for _, b := range []string{Etcd, KubeAPIServer, KubeControllerManager, KubeScheduler, "kubeadm"} {
		if _, err := exec.LookPath(filepath.Join(cfg.BinDir, b)); err != nil {
			return nil, fmt.Errorf("control plane binary %s not found in %s: build it with `make testenv`", b, cfg.BinDir)
		}
	}
	if err := os.MkdirAll(filepath.Join(cfg.Dir, "logs"), 0o700); err != nil {
		return nil, err
	}
	cp.Config, cp.PIDs = cfg, map[string]int{}
	defer func() {
		if err != nil {
			// Leave nothing running on failure; keep the logs for the report.
			_ = cp.Stop(context.Background(), 5*time.Second)
			err = fmt.Errorf("%w\n%s", err, cp.LogTails(20))
		}
	}()
	ports, release, err := freePorts(5, randomBelow(ephemeralLow()))
	if err != nil {
		return cp, err
	}
	defer release()
	apiServer := cp.Ports.APIServer
	cp.Ports = Ports{EtcdClient: ports[0], EtcdPeer: ports[1], APIServer: ports[2], KCM: ports[3], Scheduler: ports[4]}
	if apiServer != 0 {
		cp.Ports.APIServer = apiServer
	}
	for _, s := range steps(cp) {
		t := time.Now()
		if err := s.f(); err != nil {
			return cp, fmt.Errorf("%s: %w", s.name, err)
		}
		_, _ = fmt.Fprintf(cfg.Progress, "[control-plane] %s (%s)\n", s.name, time.Since(t).Round(time.Millisecond))
	}
	cp.StartedIn = time.Since(began)
	if err := cp.save(); err != nil {
		return cp, err
	}
	_, _ = fmt.Fprintf(cfg.Progress, "[control-plane] %s %s ready at %s in %s\n", cfg.ClusterName, cp.Version, cp.Endpoint(),
		cp.StartedIn.Round(time.Millisecond))
	return cp, nil
}

// BinaryVersion is the version of the kube-apiserver in binDir ("v1.37.1"): the version a
// control plane started from there runs.
func BinaryVersion(binDir string) (string, error) {
	out, err := exec.Command(filepath.Join(binDir, KubeAPIServer), "--version").Output()
	if err != nil {
		return "", fmt.Errorf("kube-apiserver --version: %w", err)
	}
	return strings.TrimPrefix(strings.TrimSpace(string(out)), "Kubernetes "), nil
}

var kubeadmConfig = template.Must(template.New("kubeadm").Parse(`apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
# kubeadm rejects a loopback advertise address and would otherwise probe the default route:
# the first service IP is already a SAN and nothing dials it; every kubeconfig below points
# at 127.0.0.1 instead.
localAPIEndpoint:
  advertiseAddress: {{.AdvertiseAddress}}
  bindPort: {{.Ports.APIServer}}
nodeRegistration:
  name: {{.ClusterName}}-control-plane
  criSocket: unix:///run/kubewin-no-runtime.sock
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: {{.Version}}
clusterName: {{.ClusterName}}
certificatesDir: {{.PKIDir}}
# ECDSA keys, as kubewin's Azure clusters have (kubeadmboot): kubeadm's default RSA-2048 keys cost
# most of a start's CPU to generate, and the API server's TLS handshakes and the controller
# manager's CSR signing cost more with them.
encryptionAlgorithm: ECDSA-P256
controlPlaneEndpoint: 127.0.0.1:{{.Ports.APIServer}}
networking:
  serviceSubnet: {{.ServiceCIDR}}
  podSubnet: {{.ClusterCIDR}}
  dnsDomain: cluster.local
apiServer:
  certSANs: [127.0.0.1, localhost]
etcd:
  external:
    endpoints: [http://127.0.0.1:{{.Ports.EtcdClient}}]
`))

func (cp *ControlPlane) writePKI() error {
	v, err := BinaryVersion(cp.Config.BinDir)
	if err != nil {
		return err
	}
	cp.Version = v
	svc, err := firstServiceIP(cp.Config.ServiceCIDR)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := kubeadmConfig.Execute(&buf, map[string]any{
		"AdvertiseAddress": svc, "Ports": cp.Ports, "ClusterName": cp.Config.ClusterName, "Version": cp.Version,
		"PKIDir": cp.PKIDir(), "ServiceCIDR": cp.Config.ServiceCIDR, "ClusterCIDR": cp.Config.ClusterCIDR,
	}); err != nil {
		return err
	}
	if err := os.WriteFile(cp.KubeadmConfig(), buf.Bytes(), 0o600); err != nil {
		return err
	}
	if err := cp.kubeadm("init", "phase", "certs", "all", "--config", cp.KubeadmConfig()); err != nil {
		return err
	}
	for _, k := range []string{"admin", "super-admin"} {
		if err := cp.kubeadm("init", "phase", "kubeconfig", k, "--config", cp.KubeadmConfig(), "--kubeconfig-dir", cp.Config.Dir); err != nil {
			return err
		}
	}
	// `init phase kubeconfig controller-manager` would use the advertise address; `kubeconfig
	// user` uses controlPlaneEndpoint.
	for _, c := range []string{KubeControllerManager, KubeScheduler} {
		var out bytes.Buffer
		if err := cp.runKubeadm(&out, "kubeconfig", "user", "--config", cp.KubeadmConfig(), "--client-name", "system:"+c); err != nil {
			return err
		}
		if err := atomicfile.Write(cp.kubeconfig(c), out.Bytes(), 0o600); err != nil {
			return err
		}
	}
	for _, f := range []string{cp.AdminKubeconfig(), cp.kubeconfig("super-admin"), cp.kubeconfig(KubeControllerManager), cp.kubeconfig(KubeScheduler)} {
		kc, err := clientcmd.LoadFromFile(f)
		if err != nil {
			return err
		}
		for name, c := range kc.Clusters {
			if c.Server != cp.Endpoint() {
				return fmt.Errorf("%s: cluster %q points at %s, not %s", f, name, c.Server, cp.Endpoint())
			}
		}
	}
	return nil
}

func (cp *ControlPlane) kubeconfig(name string) string {
	if k := cp.Kubeadm; k != nil {
		switch name {
		case "super-admin":
			return k.SuperAdmin
		case KubeControllerManager:
			return k.ControllerManager
		case KubeScheduler:
			return k.Scheduler
		}
	}
	return filepath.Join(cp.Config.Dir, strings.TrimPrefix(name, "kube-")+".conf")
}

func (cp *ControlPlane) kubeadm(args ...string) error { return cp.runKubeadm(nil, args...) }

// runKubeadm runs kubeadm, its output to stdout (nil: the kubeadm log) and its errors to the log.
func (cp *ControlPlane) runKubeadm(stdout io.Writer, args ...string) error {
	log := cp.logWriter("kubeadm")
	if log == nil {
		return fmt.Errorf("open log %s", cp.LogFile("kubeadm"))
	}
	defer func() { _ = log.Close() }()
	cmd := exec.Command(filepath.Join(cp.Config.BinDir, "kubeadm"), args...)
	cmd.Stdout, cmd.Stderr = log, log
	if stdout != nil {
		cmd.Stdout = stdout
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kubeadm %s: %w (see %s)", strings.Join(args[:min(len(args), 4)], " "), err, cp.LogFile("kubeadm"))
	}
	return nil
}

func (cp *ControlPlane) logWriter(component string) *os.File {
	f, err := os.OpenFile(cp.LogFile(component), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil
	}
	return f
}

func (cp *ControlPlane) start(component string, args ...string) error {
	cmd := exec.Command(filepath.Join(cp.Config.BinDir, component), args...)
	log := cp.logWriter(component)
	if log == nil {
		return fmt.Errorf("open log %s", cp.LogFile(component))
	}
	defer func() { _ = log.Close() }() // the started process writes through its own descriptor
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Dir = cp.Config.Dir
	cmd.SysProcAttr = proc.SysProcAttr(cp.Config.Detach)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", component, err)
	}
	cp.PIDs[component] = cmd.Process.Pid
	// Reap the child when it exits, so that liveness checks do not see a zombie.
	go func() { _ = cmd.Wait() }()
	return nil
}

// waitFor polls ready until it returns nil, the component's process dies, or the timeout passes.
func (cp *ControlPlane) waitFor(ctx context.Context, component string, ready func() error) error {
	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	var last error
	for {
		if last = ready(); last == nil {
			return nil
		}
		if pid := cp.PIDs[component]; pid > 0 && !proc.Alive(pid) {
			return fmt.Errorf("%s exited: %v", component, last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %s: %v", component, StartTimeout, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (cp *ControlPlane) startEtcd(ctx context.Context) error {
	client := fmt.Sprintf("http://127.0.0.1:%d", cp.Ports.EtcdClient)
	peer := fmt.Sprintf("http://127.0.0.1:%d", cp.Ports.EtcdPeer)
	if err := cp.start(Etcd,
		"--name=kubewin", "--data-dir="+filepath.Join(cp.Config.Dir, "etcd"),
		"--listen-client-urls="+client, "--advertise-client-urls="+client,
		"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer,
		"--initial-cluster=kubewin="+peer,
		"--listen-metrics-urls=", "--log-level=warn",
	); err != nil {
		return err
	}
	return cp.waitFor(ctx, Etcd, func() error { return httpOK(http.DefaultClient, client+"/health") })
}

func (cp *ControlPlane) startAPIServer(ctx context.Context) error {
	pki := func(f string) string { return filepath.Join(cp.PKIDir(), f) }
	if err := cp.start(KubeAPIServer,
		"--advertise-address="+cp.address(), "--bind-address="+cp.address(), fmt.Sprintf("--secure-port=%d", cp.Ports.APIServer),
		fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", cp.Ports.EtcdClient),
		"--allow-privileged=true",
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--enable-bootstrap-token-auth=true",
		"--client-ca-file="+pki("ca.crt"),
		"--tls-cert-file="+pki("apiserver.crt"), "--tls-private-key-file="+pki("apiserver.key"),
		"--kubelet-client-certificate="+pki("apiserver-kubelet-client.crt"), "--kubelet-client-key="+pki("apiserver-kubelet-client.key"),
		"--proxy-client-cert-file="+pki("front-proxy-client.crt"), "--proxy-client-key-file="+pki("front-proxy-client.key"),
		"--requestheader-client-ca-file="+pki("front-proxy-ca.crt"), "--requestheader-allowed-names=front-proxy-client",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-", "--requestheader-group-headers=X-Remote-Group",
		"--requestheader-username-headers=X-Remote-User",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+pki("sa.pub"), "--service-account-signing-key-file="+pki("sa.key"),
		"--service-cluster-ip-range="+cp.Config.ServiceCIDR,
		// The loopback endpoint would be rejected every 10 s by the endpoint reconciler.
		"--endpoint-reconciler-type=none",
	); err != nil {
		return err
	}
	client, err := cp.caHTTPClient()
	if err != nil {
		return err
	}
	return cp.waitFor(ctx, KubeAPIServer, func() error { return httpOK(client, cp.Endpoint()+"/readyz") })
}

// bindClusterAdmins does what `kubeadm init` does for admin.conf: bind its group to cluster-admin,
// using the super-admin (system:masters) credential.
func (cp *ControlPlane) bindClusterAdmins(ctx context.Context) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", cp.kubeconfig("super-admin"))
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "kubeadm:cluster-admins"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "kubeadm:cluster-admins"}},
	}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func (cp *ControlPlane) startControllers() error {
	pki := func(f string) string { return filepath.Join(cp.PKIDir(), f) }
	kcm := cp.kubeconfig(KubeControllerManager)
	if err := cp.start(KubeControllerManager,
		"--kubeconfig="+kcm, "--authentication-kubeconfig="+kcm, "--authorization-kubeconfig="+kcm,
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", cp.Ports.KCM),
		"--client-ca-file="+pki("ca.crt"), "--requestheader-client-ca-file="+pki("front-proxy-ca.crt"),
		"--cluster-name="+cp.Config.ClusterName,
		"--cluster-signing-cert-file="+pki("ca.crt"), "--cluster-signing-key-file="+pki("ca.key"),
		"--controllers=*,bootstrapsigner,tokencleaner",
		"--allocate-node-cidrs=true", "--cluster-cidr="+cp.Config.ClusterCIDR,
		fmt.Sprintf("--node-cidr-mask-size=%d", cp.Config.NodeCIDRMaskSize),
		"--service-cluster-ip-range="+cp.Config.ServiceCIDR,
		"--root-ca-file="+pki("ca.crt"),
		"--service-account-private-key-file="+pki("sa.key"),
		"--use-service-account-credentials=true",
		"--leader-elect=false",
		// The default client QPS delays the controllers' start by seconds.
		"--kube-api-qps=200", "--kube-api-burst=400",
	); err != nil {
		return err
	}
	sched := cp.kubeconfig(KubeScheduler)
	return cp.start(KubeScheduler,
		"--kubeconfig="+sched, "--authentication-kubeconfig="+sched, "--authorization-kubeconfig="+sched,
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", cp.Ports.Scheduler),
		"--leader-elect=false",
		"--kube-api-qps=200", "--kube-api-burst=400",
	)
}

// uploadClusterState runs the kubeadm phases that make the cluster joinable the kubeadm way,
// then removes the default bootstrap token the phase creates: tokens are minted per node pool.
func (cp *ControlPlane) uploadClusterState(ctx context.Context) error {
	for _, phase := range [][]string{{"upload-config", "all"}, {"bootstrap-token"}} {
		args := append([]string{"init", "phase"}, phase...)
		if err := cp.kubeadm(append(args, "--config", cp.KubeadmConfig(), "--kubeconfig", cp.AdminKubeconfig())...); err != nil {
			return err
		}
	}
	cs, err := cp.adminClient()
	if err != nil {
		return err
	}
	secrets, err := cs.CoreV1().Secrets(metav1.NamespaceSystem).List(ctx,
		metav1.ListOptions{FieldSelector: "type=" + string(bootstrapapi.SecretTypeBootstrapToken)})
	if err != nil {
		return err
	}
	for _, s := range secrets.Items {
		if err := cs.CoreV1().Secrets(metav1.NamespaceSystem).Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// waitControllers waits for effects of the controller manager (the serviceaccount controller's
// default ServiceAccount) and for the scheduler's health: /healthz answers before controllers run.
func (cp *ControlPlane) waitControllers(ctx context.Context) error {
	cs, err := cp.adminClient()
	if err != nil {
		return err
	}
	if err := cp.waitFor(ctx, KubeControllerManager, func() error {
		_, err := cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		return err
	}); err != nil {
		return err
	}
	// The scheduler serves a self-signed certificate; this checks health on loopback only.
	insecure := &http.Client{Timeout: 2 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback only, as above
	return cp.waitFor(ctx, KubeScheduler, func() error {
		return httpOK(insecure, fmt.Sprintf("https://127.0.0.1:%d/healthz", cp.Ports.Scheduler))
	})
}

func (cp *ControlPlane) adminClient() (*kubernetes.Clientset, error) {
	cfg, err := cp.AdminRESTConfig()
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

func (cp *ControlPlane) caHTTPClient() (*http.Client, error) {
	ca, err := cp.CACert()
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("no certificate in %s", cp.CACertFile())
	}
	cfg := &tls.Config{RootCAs: pool}
	if cp.Kubeadm != nil {
		cfg.ServerName = cp.Kubeadm.ServerName
	}
	return &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}, nil
}

func httpOK(c *http.Client, url string) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }() // a read: its close error says nothing about the answer
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// freePorts finds n free loopback ports, trying the ports pick returns, and holds each until
// release is called: the caller releases them once its components have bound them.
//   - A port is free when a listener can bind it (nothing listens there).
//   - A port is held through proc.TryLock("port-N"), a lock every local control plane of this
//     user takes. The listener itself is closed before the component binds, and in that gap
//     another process starting a control plane could find the port free too: beside busy tests,
//     etcd failed with "bind: address already in use".
//
// randomBelow picks the ports below the kernel's ephemeral range, so that no outbound
// connection's source port takes one in that gap either.
func freePorts(n int, pick func() int) (ports []int, release func(), err error) {
	var held []func()
	releaseAll := func() {
		for _, r := range held {
			r()
		}
	}
	defer func() {
		if err != nil {
			releaseAll()
		}
	}()
	for range n {
		port, free := 0, false
		for try := 0; !free && try < 200; try++ {
			port = pick()
			if free, err = reservePort(port, &held); err != nil {
				return nil, nil, err
			}
		}
		if !free {
			return nil, nil, fmt.Errorf("no free loopback port after 200 tries (last tried %d)", port)
		}
		ports = append(ports, port)
	}
	return ports, releaseAll, nil
}

// reservePort takes port's lock, adding its release to held, if nothing listens on port.
func reservePort(port int, held *[]func()) (bool, error) {
	unlock, ok, err := proc.TryLock("port-" + strconv.Itoa(port))
	if err != nil || !ok {
		return false, err
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		unlock()
		return false, nil //nolint:nilerr // something listens there: the port is taken, which is an answer, not an error
	}
	_ = l.Close() // it only showed that the port is free
	*held = append(*held, unlock)
	return true, nil
}

// randomBelow picks ports at random below low, down to 1025, at most 16384 of them; where low is
// 0 (the range cannot be read), it picks from the 16384 ports below the default range's 32768.
func randomBelow(low int) func() int {
	if low == 0 {
		low = 32768
	}
	return func() int { return low - 1 - rand.IntN(min(low-1025, 16384)) }
}

// ephemeralLow is the first port of the kernel's ephemeral range; 0 when it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0
	}
	low, err := strconv.Atoi(f[0])
	if err != nil || low <= 1024+1 {
		return 0
	}
	return low
}
