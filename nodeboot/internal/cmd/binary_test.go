package cmd

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kubewin/kubewin/internal/api"
	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/bootstraptoken"
	"github.com/kubewin/kubewin/internal/capin"
	"github.com/kubewin/kubewin/internal/controlplane"
	"github.com/kubewin/kubewin/internal/nodeaccess"
	"github.com/kubewin/kubewin/internal/sim/simmachine"
	"github.com/kubewin/kubewin/internal/testkit/testenv"
)

var (
	cp       *controlplane.ControlPlane
	nodeboot string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "nodeboot-bin-")
	if err != nil {
		panic(err)
	}
	// os.Exit skips deferred calls, so the directory is removed before each exit.
	code := func() int {
		nodeboot = filepath.Join(dir, "nodeboot")
		// Built as it is released, so that figures such as its memory are the released binary's.
		build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", nodeboot, "../..")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build nodeboot: %v\n%s", err, out)
			return 1
		}
		return testenv.Main(m, &cp)
	}()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// machine provisions a simulated machine for a pool node and returns its root.
func machine(t testing.TB, pool, name string) string {
	t.Helper()
	root, customData := provision(t, pool, name, name, func(*simmachine.Machine) {})
	if err := simmachine.WriteCustomData(root, customData); err != nil {
		t.Fatal(err)
	}
	return root
}

// provision provisions a simulated machine for a pool node, whose NodeConfig names it nodeName
// (none when empty), as setUp describes it, and returns its root and its custom data, which it
// leaves for the caller to write.
func provision(t testing.TB, pool, name, nodeName string, setUp func(*simmachine.Machine)) (string, []byte) {
	t.Helper()
	ctx := context.Background()
	cfg, _ := cp.AdminRESTConfig()
	admin := kubernetes.NewForConfigOrDie(cfg)
	token, err := bootstraptoken.Create(ctx, admin, pool, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := nodeaccess.Prepare(ctx, admin, pool, []string{name}); err != nil {
		t.Fatal(err)
	}
	ca, _ := cp.CACert()
	pin, _ := capin.HashPEM(ca)
	image := t.TempDir()
	if err := simmachine.WriteImage(image, v1alpha1.ImageManifest{
		APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindImageManifest, WindowsBuild: v1alpha1.WindowsServer2022,
		KubernetesVersion: cp.Version, Runtime: v1alpha1.RuntimeInfo{Name: v1alpha1.RuntimeContainerd, Version: "2.1.4"},
		PauseImage:      v1alpha1.PauseImage{Reference: "registry.k8s.io/pause:3.10", Digest: "sha256:" + strings.Repeat("1", 64)},
		NodebootVersion: "test",
	}, map[string][]byte{"k/kubelet.exe": []byte("simulated"), "k/kube-proxy.exe": []byte("simulated"),
		"k/kube-log-runner.exe": []byte("simulated")}); err != nil {
		t.Fatal(err)
	}
	nc := v1alpha1.NodeConfig{
		APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindNodeConfig,
		Cluster: v1alpha1.Cluster{APIServerEndpoint: cp.HostPort(), CACertHashes: []string{pin}, BootstrapToken: token,
			ClusterCIDR: "10.244.0.0/16", ServiceCIDR: "10.96.0.0/12"},
		Node: v1alpha1.Node{Name: nodeName},
	}
	customData, err := api.EncodeJSON(nc)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	m := simmachine.Machine{Root: root, Build: 20348, Adapter: "Ethernet", Address: netip.MustParseAddr("127.2.0.1"),
		Subnet: netip.MustParsePrefix("127.2.0.0/16"), Runtime: v1alpha1.RuntimeContainerd}
	setUp(&m)
	if err := simmachine.Provision(m, image, nil); err != nil {
		t.Fatal(err)
	}
	return root, customData
}

func nb(t *testing.T, root string, args ...string) string {
	t.Helper()
	out, err := exec.Command(nodeboot, append([]string{"--platform", "sim", "--root", root}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("nodeboot %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// The nodeboot binary joins in separate runs (a process per phase boundary), removes the
// token, reports status, runs the node until stopped, and resets.
func TestBinary(t *testing.T) {
	const name = "winbin000001"
	root := machine(t, "binpool", name)

	out := nb(t, root, "join", "phase", "discovery")
	if !strings.Contains(out, "[preflight] done") || !strings.Contains(out, "[discovery] done") {
		t.Errorf("phase output:\n%s", out)
	}
	out = nb(t, root, "join")
	for _, want := range []string{"[preflight] already done", "[discovery] already done", "[tls-bootstrap] done", "joined the cluster"} {
		if !strings.Contains(out, want) {
			t.Errorf("join output lacks %q:\n%s", want, out)
		}
	}
	customData := simmachine.Path(root, `C:\AzureData\CustomData.bin`)
	b, err := os.ReadFile(customData)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := api.DecodeNodeConfig(b); err != nil || c.Cluster.BootstrapToken != "" {
		t.Errorf("the bootstrap token is still on disk after the join (%v)", err)
	}
	for _, f := range []string{customData, simmachine.Path(root, `C:\var\lib\kubelet\pki\kubelet-client-current.pem`), simmachine.Path(root,
		`C:\etc\kubernetes\kubelet.conf`)} {
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v (%v), want owner-only", f, fi.Mode(), err)
		}
	}
	status := nb(t, root, "status")
	if !strings.Contains(status, "node "+name+": Done") || !strings.Contains(status, "routes") {
		t.Errorf("status:\n%s", status)
	}

	// run: the node goes Ready, survives a SIGKILL and a restart, and stops on SIGTERM.
	for i, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
		var buf lockedBuffer
		cmd := exec.Command(nodeboot, "--platform", "sim", "--root", root, "run")
		cmd.Stdout, cmd.Stderr = &buf, &buf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			return strings.Contains(buf.String(), "[simulated-kubelet] node "+name+" registered"), nil
		}); err != nil {
			t.Fatalf("run %d did not come up:\n%s", i, buf.String())
		}
		waitNodeReady(t, name)
		if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			return strings.Contains(buf.String(), "[conditions] KubewinRuntimeReady=True"), nil
		}); err != nil {
			t.Fatalf("run %d published no conditions:\n%s", i, buf.String())
		}
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		err := cmd.Wait()
		if sig == syscall.SIGTERM && err != nil {
			t.Errorf("run %d exited with %v after SIGTERM:\n%s", i, err, buf.String())
		}
		if sig == syscall.SIGTERM && !strings.Contains(buf.String(), "[simulated-kubelet] node "+name+" stopped") {
			t.Errorf("run did not stop cleanly:\n%s", buf.String())
		}
	}
	// status shows what run last found: its conditions (the simulated machine's DNS probe
	// says the pod network is simulated, rather than failing as if a real one were broken)
	// and no repairs.
	status = nb(t, root, "status")
	for _, want := range []string{"KubewinNetworkReady   True    NetworkReady", "KubewinDNSReady       Unknown PodNetworkSimulated",
		"KubewinRuntimeReady   True    ServicesRunning", "repairs: none"} {
		if !strings.Contains(status, want) {
			t.Errorf("status lacks %q:\n%s", want, status)
		}
	}
	out = nb(t, root, "reset")
	if !strings.Contains(out, "[reset]") {
		t.Errorf("reset output:\n%s", out)
	}
	if _, err := os.Stat(simmachine.Path(root, `C:\ProgramData\kubewin\nodeboot\state.json`)); !os.IsNotExist(err) {
		t.Errorf("state survived reset: %v", err)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func waitNodeReady(t *testing.T, name string) {
	t.Helper()
	cfg, _ := cp.AdminRESTConfig()
	c := kubernetes.NewForConfigOrDie(cfg)
	var readErr error // the last failed read, retried until the timeout
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			readErr = err
			return false, nil //nolint:nilerr // a failed read is retried until the timeout; readErr keeps it for the message
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				// A fresh heartbeat tells this run's kubelet from an earlier one's.
				return time.Since(cond.LastHeartbeatTime.Time) < 5*time.Second, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("node %s not Ready: %v (last failed read: %v)", name, err, readErr)
	}
}
