package pool

import (
	"context"
	"strings"
	"testing"

	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// The Hyper-V RuntimeClass is shared: created by the first Hyper-V pool, kept while any holds
// it, deleted with the last; releasing it when no pool holds it does nothing; one kubewin did not
// create is refused, never changed.
func TestHoldRuntimeClass(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset()
	get := func() *nodev1.RuntimeClass {
		t.Helper()
		rc, err := c.NodeV1().RuntimeClasses().Get(ctx, HyperVRuntimeClass, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return rc
	}
	step := func(pool string, hold bool, wantHolders string) {
		t.Helper()
		if err := holdRuntimeClass(ctx, c, pool, hold); err != nil {
			t.Fatal(err)
		}
		rc := get()
		switch {
		case wantHolders == "" && rc != nil:
			t.Errorf("after %s (hold %v): RuntimeClass left with holders %q", pool, hold, rc.Annotations[hyperVPoolsAnnotation])
		case wantHolders != "" && rc == nil:
			t.Errorf("after %s (hold %v): no RuntimeClass, want holders %q", pool, hold, wantHolders)
		case rc != nil && rc.Annotations[hyperVPoolsAnnotation] != wantHolders:
			t.Errorf("after %s (hold %v): holders %q, want %q", pool, hold, rc.Annotations[hyperVPoolsAnnotation], wantHolders)
		}
	}
	step("plain", false, "")
	step("hv-b", true, "hv-b")
	rc := get()
	if rc.Handler != "runhcs-wcow-hypervisor" || rc.Scheduling == nil || rc.Scheduling.NodeSelector["kubernetes.io/os"] != "windows" ||
		rc.Scheduling.NodeSelector["kubewin.io/hyperv-isolation"] != "true" || len(rc.Scheduling.NodeSelector) != 2 || rc.Overhead != nil {
		t.Errorf("RuntimeClass: %+v", rc)
	}
	step("hv-a", true, "hv-a,hv-b")
	step("hv-a", true, "hv-a,hv-b")
	step("plain", false, "hv-a,hv-b")
	step("hv-b", false, "hv-a")
	step("hv-a", false, "")

	foreign := hyperVRuntimeClass(nil)
	foreign.Labels = nil
	foreign.Handler = "something-else"
	if _, err := c.NodeV1().RuntimeClasses().Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := holdRuntimeClass(ctx, c, "hv-a", true)
	if err == nil || !strings.Contains(err.Error(), "RuntimeClass windows-hyperv exists and kubewin did not create it") {
		t.Errorf("a RuntimeClass kubewin did not create: %v", err)
	}
	if err := holdRuntimeClass(ctx, c, "hv-a", false); err != nil {
		t.Fatal(err)
	}
	if rc := get(); rc == nil || rc.Handler != "something-else" {
		t.Errorf("a RuntimeClass kubewin did not create was changed: %+v", rc)
	}
}
