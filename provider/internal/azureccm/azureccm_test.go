package azureccm

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubewin/kubewin/internal/controlplane"
	"github.com/kubewin/kubewin/internal/kubeversion"
	"github.com/kubewin/kubewin/internal/testkit/testenv"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &cp)) }

// apply applies an object server-side, as the cluster applies it, so that the API server
// validates it.
func apply(ctx context.Context, t *testing.T, cs kubernetes.Interface, o runtime.Object) {
	t.Helper()
	data, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	opts := metav1.PatchOptions{FieldManager: "kubewin", Force: ptr.To(true)}
	switch o := o.(type) {
	case *corev1.ServiceAccount:
		_, err = cs.CoreV1().ServiceAccounts(o.Namespace).Patch(ctx, o.Name, types.ApplyPatchType, data, opts)
	case *rbacv1.ClusterRole:
		_, err = cs.RbacV1().ClusterRoles().Patch(ctx, o.Name, types.ApplyPatchType, data, opts)
	case *rbacv1.ClusterRoleBinding:
		_, err = cs.RbacV1().ClusterRoleBindings().Patch(ctx, o.Name, types.ApplyPatchType, data, opts)
	case *rbacv1.RoleBinding:
		_, err = cs.RbacV1().RoleBindings(o.Namespace).Patch(ctx, o.Name, types.ApplyPatchType, data, opts)
	case *appsv1.Deployment:
		_, err = cs.AppsV1().Deployments(o.Namespace).Patch(ctx, o.Name, types.ApplyPatchType, data, opts)
	case *appsv1.DaemonSet:
		_, err = cs.AppsV1().DaemonSets(o.Namespace).Patch(ctx, o.Name, types.ApplyPatchType, data, opts)
	default:
		t.Fatalf("no apply for %T", o)
	}
	if err != nil {
		t.Fatalf("apply %T: %v", o, err)
	}
}

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
	cfg, err := cp.AdminRESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	v, err := ForMinor(kubeversion.NewestMinor)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // applying again changes nothing and is accepted
		for _, o := range Objects(Config{Versions: v, ClusterName: "acs"}) {
			apply(ctx, t, cs, o)
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

	can := func(account string, a authorizationv1.ResourceAttributes) bool {
		t.Helper()
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "system:serviceaccount:" + Namespace + ":" + account, ResourceAttributes: &a,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + Namespace, "system:authenticated"},
		}}
		r, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r.Status.Allowed
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
		{CloudControllerManager, res("patch", "", "nodes", "status", ""), true},
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
