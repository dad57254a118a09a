package azureccm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/kubewin/kubewin/internal/controlplane"
	"github.com/kubewin/kubewin/internal/kubeversion"
	"github.com/kubewin/kubewin/internal/testkit/testenv"
)

var cp *controlplane.ControlPlane

// testCA stands for the cluster's CA certificate.
const testCA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &cp)) }

// Every supported minor has a pinned release, of the same minor.
func TestVersions(t *testing.T) {
	for minor := kubeversion.OldestMinor; minor <= kubeversion.NewestMinor; minor++ {
		v, err := ForMinor(minor)
		if err != nil {
			t.Fatal(err)
		}
		for _, got := range []string{v.CloudControllerManager, v.CloudNodeManager} {
			if want := fmt.Sprintf("v1.%d.", minor); !strings.HasPrefix(got, want) || len(got) == len(want) {
				t.Errorf("Kubernetes 1.%d: %s is not a %sz release", minor, got, want)
			}
		}
	}
	if _, err := ForMinor(kubeversion.NewestMinor + 1); err == nil {
		t.Error("a release was found for an unsupported minor")
	}
}

// The objects, applied server-side to a real API server, are accepted and kept as applied (the
// Windows DaemonSet a HostProcess pod on Windows nodes), and each service account may do, by the
// real authorizer, what its component does, and no more than that on what it does not need.
func TestObjectsApplyAndAuthorize(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs := testenv.AdminClient(t, cp)
	v, err := ForMinor(kubeversion.NewestMinor)
	if err != nil {
		t.Fatal(err)
	}
	// The route controller off, then on: applying again is accepted and changes what changed.
	for _, routes := range []bool{false, true, true} {
		objs, err := Objects(Config{Versions: v, ClusterName: "acs", ClusterCIDR: "10.244.0.0/16", CloudRoutes: routes,
			WindowsServer: "https://10.240.255.4:6443", CACert: []byte(testCA)})
		if err != nil {
			t.Fatal(err)
		}
		if err := Apply(ctx, cs, objs); err != nil {
			t.Fatal(err)
		}
	}
	win, err := cs.AppsV1().DaemonSets(Namespace).Get(ctx, CloudNodeManagerWin, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ps := win.Spec.Template.Spec
	if !ps.HostNetwork || ps.SecurityContext == nil || !ptr.Deref(ps.SecurityContext.WindowsOptions.HostProcess, false) ||
		ps.NodeSelector["kubernetes.io/os"] != "windows" {
		t.Errorf("the Windows node manager is not a HostProcess pod on Windows nodes: %+v", ps)
	}
	ccm, err := cs.AppsV1().Deployments(Namespace).Get(ctx, CloudControllerManager, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if img := ccm.Spec.Template.Spec.Containers[0].Image; img != Registry+"/azure-cloud-controller-manager:"+v.CloudControllerManager {
		t.Errorf("cloud-controller-manager image %s", img)
	}
	// The route controller runs (cloud-provider-azure starts it on --configure-cloud-routes with
	// --cluster-cidr) and the node managers wait for the routes; node CIDRs stay
	// kube-controller-manager's.
	args := ccm.Spec.Template.Spec.Containers[0].Args
	for _, want := range []string{"--configure-cloud-routes=true", "--cluster-cidr=10.244.0.0/16", "--allocate-node-cidrs=false"} {
		if !slices.Contains(args, want) {
			t.Errorf("cloud-controller-manager's arguments %q lack %s", args, want)
		}
	}
	if c := win.Spec.Template.Spec.Containers[0].Command; !slices.Contains(c, "--wait-routes=true") ||
		!slices.Contains(c, "--kubeconfig=%CONTAINER_SANDBOX_MOUNT_POINT%/var/lib/cnm/kubeconfig") {
		t.Errorf("the Windows node manager's command %q", c)
	}
	// The Windows node manager's kubeconfig names the server the Windows nodes reach, the CA, and
	// the service account token by a path client-go resolves next to the mounted file.
	cm, err := cs.CoreV1().ConfigMaps(Namespace).Get(ctx, WindowsKubeconfig, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sandbox := t.TempDir() // the container's files as the kubelet mounts them, under its sandbox
	token := filepath.Join(sandbox, "var/run/secrets/kubernetes.io/serviceaccount/token")
	kubeconfig := filepath.Join(sandbox, "var/lib/cnm/kubeconfig")
	for file, data := range map[string]string{token: "token", kubeconfig: cm.Data["kubeconfig"]} {
		if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	rest, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if rest.Host != "https://10.240.255.4:6443" || string(rest.CAData) != testCA ||
		rest.BearerTokenFile != token {
		t.Errorf("the Windows kubeconfig: server %s, CA %q, token file %s", rest.Host, rest.CAData, rest.BearerTokenFile)
	}
	if vols := win.Spec.Template.Spec.Volumes; len(vols) != 1 || vols[0].ConfigMap == nil || vols[0].ConfigMap.Name != WindowsKubeconfig {
		t.Errorf("the Windows node manager's volumes %+v", vols)
	}

	can := func(account string, a authorizationv1.ResourceAttributes) bool {
		return testenv.ServiceAccountMay(ctx, t, cs, Namespace, account, a)
	}
	res := func(verb, group, resource, sub, ns string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource, Subresource: sub, Namespace: ns}
	}
	for _, tc := range []struct {
		account string
		attrs   authorizationv1.ResourceAttributes
		want    bool
	}{
		{CloudControllerManager, res("update", "", "services", "status", "default"), true},
		{CloudControllerManager, res("watch", "", "services", "", ""), true},
		{CloudControllerManager, res("delete", "", "nodes", "", ""), true},
		{CloudControllerManager, res("patch", "", "nodes", "status", ""), true}, // the route controller's NetworkUnavailable
		{CloudControllerManager, res("create", "", "events", "", "default"), true},
		{CloudControllerManager, res("update", "coordination.k8s.io", "leases", "", Namespace), true},
		{CloudControllerManager, res("list", "discovery.k8s.io", "endpointslices", "", ""), true},
		{CloudControllerManager, res("get", "", "configmaps", "", Namespace), true},
		{CloudControllerManager, res("get", "", "secrets", "", Namespace), false},
		{CloudControllerManager, res("delete", "", "pods", "", "default"), false},
		{CloudNodeManager, res("patch", "", "nodes", "", ""), true},
		{CloudNodeManager, res("patch", "", "nodes", "status", ""), true},
		{CloudNodeManager, res("create", "", "events", "", "default"), true},
		{CloudNodeManager, res("delete", "", "nodes", "", ""), false},
		{CloudNodeManager, res("update", "", "services", "status", "default"), false},
		{CloudNodeManager, res("get", "", "secrets", "", Namespace), false},
	} {
		a := tc.attrs
		if got := can(tc.account, a); got != tc.want {
			t.Errorf("%s may %s %s/%s (%s): %v, want %v", tc.account, a.Verb, a.Resource, a.Subresource, a.Namespace, got, tc.want)
		}
	}
}
