// Package testenv gives tests the real programs built by `make testenv` (kube-apiserver,
// kube-controller-manager, kube-scheduler, kubeadm, kubectl, etcd, terraform, tofu, packer, and
// credential-provider-check, which loads a kubelet image credential provider configuration with the
// kubelet's own loader) and a real control plane per test package. A missing program fails the
// test: run `make testenv`.
package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubewin/kubewin/internal/controlplane"
)

// EnvBinDir overrides where the test environment's binaries are.
const EnvBinDir = "KUBEWIN_TESTBIN"

// CredentialProviderCheck is the program (tools/kube/credentialprovidercheck) that loads a
// CredentialProviderConfig with the kubelet's own loader, as the kubelet does at start:
// `credential-provider-check -config FILE -bin-dir DIR` exits 0 when the kubelet would accept it,
// or prints the kubelet's error on stderr and exits 1. Find it with Binary or MustBinary.
const CredentialProviderCheck = "credential-provider-check"

// BinDir returns $KUBEWIN_TESTBIN, or .testbin at the root of the module holding the working
// directory.
func BinDir() (string, error) {
	if d := os.Getenv(EnvBinDir); d != "" {
		return filepath.Abs(d)
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "tools", "kube", "go.mod")); err == nil {
				return filepath.Join(dir, ".testbin"), nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no kubewin module root above the working directory: set %s", EnvBinDir)
		}
		dir = parent
	}
}

// Binary returns the path of a test environment program, or an error telling how to build it.
func Binary(name string) (string, error) {
	dir, err := BinDir()
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, name)
	if fi, err := os.Stat(p); err != nil || fi.IsDir() {
		return "", fmt.Errorf("%s is missing from %s: run `make testenv`", name, dir)
	}
	return p, nil
}

// MustBinary is Binary for tests: a missing program fails the test.
func MustBinary(t testing.TB, name string) string {
	t.Helper()
	p, err := Binary(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// AdminClient is a cluster-admin client of the control plane.
func AdminClient(t testing.TB, cp *controlplane.ControlPlane) kubernetes.Interface {
	t.Helper()
	cfg, err := cp.AdminRESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// Main runs a test package's tests against one real control plane, which it stores in *cp, and
// returns the exit code for os.Exit. When a test fails it prints the tail of every component's
// log. Use it from TestMain.
func Main(m *testing.M, cp **controlplane.ControlPlane) int {
	bin, err := BinDir()
	if err == nil {
		_, err = Binary(controlplane.KubeAPIServer)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "kubewin-cp-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	ctx := context.Background()
	*cp, err = controlplane.Start(ctx, controlplane.Config{Dir: dir, BinDir: bin, Progress: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv: start control plane:", err)
		return 1
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintln(os.Stderr, (*cp).LogTails(40))
	}
	if err := (*cp).Stop(ctx, 10*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, "testenv: stop control plane:", err)
	}
	return code
}

// KubeletLoadsCredentialProviders runs the kubelet's own credential provider loader
// (CredentialProviderCheck) on a CredentialProviderConfig, with a bin dir holding executables of
// the providers named, and returns its refusal with the loader's words. On this host the loader
// looks for each provider by its name; the Windows kubelet finds <name>.exe by the same name
// (exec.LookPath).
func KubeletLoadsCredentialProviders(t testing.TB, config []byte, providers ...string) error {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range providers {
		if err := os.WriteFile(filepath.Join(bin, p), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(dir, "credential-provider-config.yaml")
	if err := os.WriteFile(file, config, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(MustBinary(t, CredentialProviderCheck), "-config", file, "-bin-dir", bin).CombinedOutput(); err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	return nil
}

// ServiceAccountMay asks the API server's real authorizer (a SubjectAccessReview) whether
// service account account of namespace ns, with its groups, may do what a describes.
func ServiceAccountMay(ctx context.Context, t testing.TB, cs kubernetes.Interface, ns, account string, a authorizationv1.ResourceAttributes) bool {
	t.Helper()
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: "system:serviceaccount:" + ns + ":" + account, ResourceAttributes: &a,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}}
	r, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r.Status.Allowed
}
