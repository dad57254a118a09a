package azurecsi

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/kubewin/kubewin/internal/controlplane"
	"github.com/kubewin/kubewin/internal/testkit/testenv"
	"github.com/kubewin/kubewin/provider/internal/kubeobjects"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &cp)) }

const testCA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"

// adminClient is a client of the test control plane as its administrator.
func adminClient(t *testing.T) kubernetes.Interface {
	t.Helper()
	cs := testenv.AdminClient(t, cp)
	return cs
}

func config(disk, file bool) Config {
	return Config{Versions: Pinned, AzureDisk: disk, AzureFile: file, ControlPlanes: 3,
		WindowsServer: "https://10.240.255.4:6443", CACert: []byte(testCA)}
}

// The drivers' objects, applied server-side to a real API server, are accepted; a claim without
// a class gets managed-csi through the API server's DefaultStorageClass admission; the
// controllers run on the control planes with the cloud configuration and the node plugins on
// every node, Windows as HostProcess pods whose kubeconfig names the server the Windows nodes
// reach; each service account may, by the real authorizer, do what its component does and not
// more; a driver turned off is deleted, and the other stays.
func TestObjectsApplyAndAuthorize(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs := adminClient(t)
	// Another installation of a driver kubewin does not run is left alone.
	theirs := &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "file.csi.azure.com"}}
	if _, err := cs.StorageV1().CSIDrivers().Create(ctx, theirs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := Reconcile(ctx, cs, config(true, false)); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.StorageV1().CSIDrivers().Get(ctx, "file.csi.azure.com", metav1.GetOptions{}); err != nil {
		t.Fatalf("another installation's CSIDriver: %v", err)
	}
	// Turned on over it, the driver is refused by name (the API server would refuse the
	// CSIDriver's immutable fields anyway), and nothing of it is applied.
	err := Reconcile(ctx, cs, config(true, true))
	if !errors.Is(err, ErrOtherInstallation) || !strings.Contains(err.Error(), "file.csi.azure.com") {
		t.Fatalf("Reconcile over another installation = %v", err)
	}
	if _, err := cs.AppsV1().Deployments(kubeobjects.Namespace).Get(ctx, "csi-azurefile-controller", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Azure File controller was applied over another installation: %v", err)
	}
	if err := cs.StorageV1().CSIDrivers().Delete(ctx, "file.csi.azure.com", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for range 2 { // applying again is accepted
		if err := Reconcile(ctx, cs, config(true, true)); err != nil {
			t.Fatal(err)
		}
	}

	pvc, err := cs.CoreV1().PersistentVolumeClaims("default").Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ptr.Deref(pvc.Spec.StorageClassName, ""); got != ManagedCSI {
		t.Errorf("a claim without a class got class %q, want the default %s", got, ManagedCSI)
	}

	for _, name := range []string{"csi-azuredisk-controller", "csi-azurefile-controller"} {
		d, err := cs.AppsV1().Deployments(kubeobjects.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ps := d.Spec.Template.Spec
		if ps.NodeSelector["node-role.kubernetes.io/control-plane"] != "" || !ps.HostNetwork || ptr.Deref(d.Spec.Replicas, 0) != 2 {
			t.Errorf("%s does not run twice on the control planes with the host's network: %+v", name, ps.NodeSelector)
		}
		if _, ok := ps.NodeSelector["node-role.kubernetes.io/control-plane"]; !ok {
			t.Errorf("%s is not on the control planes: %v", name, ps.NodeSelector)
		}
		if v := ps.Volumes[1].HostPath; v == nil || v.Path != "/etc/kubernetes/azure.json" {
			t.Errorf("%s does not read the control planes' cloud configuration: %+v", name, ps.Volumes)
		}
	}
	for _, name := range []string{"csi-azuredisk-node-win", "csi-azurefile-node-win"} {
		win, err := cs.AppsV1().DaemonSets(kubeobjects.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ps := win.Spec.Template.Spec
		if !ps.HostNetwork || ps.SecurityContext == nil || !ptr.Deref(ps.SecurityContext.WindowsOptions.HostProcess, false) ||
			ps.NodeSelector["kubernetes.io/os"] != "windows" {
			t.Errorf("%s is not a HostProcess pod on Windows nodes: %+v", name, ps)
		}
		args := ps.Containers[1].Args
		short := strings.TrimSuffix(strings.TrimPrefix(name, "csi-"), "-node-win")
		if !slices.Contains(args, "--enable-windows-host-process=true") ||
			!slices.Contains(args, "--kubeconfig=%CONTAINER_SANDBOX_MOUNT_POINT%/var/lib/csi-"+short+"/kubeconfig") ||
			ps.Containers[1].VolumeMounts[0].MountPath != "/var/lib/csi-"+short {
			t.Errorf("%s's plugin: arguments %q, mounts %+v", name, args, ps.Containers[1].VolumeMounts)
		}
		cm, err := cs.CoreV1().ConfigMaps(kubeobjects.Namespace).Get(ctx, ps.Volumes[0].ConfigMap.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		kc, err := clientcmd.Load([]byte(cm.Data["kubeconfig"]))
		if err != nil {
			t.Fatal(err)
		}
		if c := kc.Clusters[kc.Contexts[kc.CurrentContext].Cluster]; c.Server != "https://10.240.255.4:6443" {
			t.Errorf("%s's kubeconfig names server %s", name, c.Server)
		}
	}
	classes, err := cs.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var defaults []string
	for _, c := range classes.Items {
		if c.Annotations[DefaultClassAnnotation] == "true" {
			defaults = append(defaults, c.Name)
		}
	}
	if !slices.Equal(defaults, []string{ManagedCSI}) {
		t.Errorf("default classes %v, want only %s", defaults, ManagedCSI)
	}

	can := func(account string, a authorizationv1.ResourceAttributes) bool {
		return testenv.ServiceAccountMay(ctx, t, cs, kubeobjects.Namespace, account, a)
	}
	res := func(verb, group, resource, sub, ns string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource, Subresource: sub, Namespace: ns}
	}
	for _, tc := range []struct {
		account string
		attrs   authorizationv1.ResourceAttributes
		want    bool
	}{
		{"csi-azuredisk-controller-sa", res("create", "", "persistentvolumes", "", ""), true},
		{"csi-azuredisk-controller-sa", res("patch", "storage.k8s.io", "volumeattachments", "status", ""), true},
		{"csi-azuredisk-controller-sa", res("patch", "", "persistentvolumeclaims", "status", "default"), true},
		{"csi-azuredisk-controller-sa", res("update", "coordination.k8s.io", "leases", "", kubeobjects.Namespace), true},
		{"csi-azuredisk-controller-sa", res("get", "", "secrets", "", "default"), true},
		{"csi-azuredisk-controller-sa", res("create", "", "secrets", "", "default"), false},
		{"csi-azuredisk-controller-sa", res("delete", "", "pods", "", "default"), false},
		{"csi-azurefile-controller-sa", res("create", "", "secrets", "", "default"), true},
		{"csi-azurefile-controller-sa", res("update", "storage.k8s.io", "volumeattachments", "", ""), false},
		{"csi-azuredisk-node-sa", res("patch", "", "nodes", "", ""), true},
		{"csi-azuredisk-node-sa", res("watch", "storage.k8s.io", "volumeattachments", "", ""), true},
		{"csi-azuredisk-node-sa", res("delete", "", "nodes", "", ""), false},
		{"csi-azurefile-node-sa", res("get", "", "secrets", "", "default"), true},
		{"csi-azurefile-node-sa", res("patch", "", "nodes", "", ""), false},
		{"csi-azurefile-node-sa", res("list", "", "secrets", "", "default"), false},
	} {
		a := tc.attrs
		if got := can(tc.account, a); got != tc.want {
			t.Errorf("%s may %s %s/%s (%s): %v, want %v", tc.account, a.Verb, a.Resource, a.Subresource, a.Namespace, got, tc.want)
		}
	}

	// Azure File turned off: its objects go, Azure Disk's stay.
	for range 2 { // what is gone is left
		if err := Reconcile(ctx, cs, config(true, false)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cs.StorageV1().CSIDrivers().Get(ctx, "file.csi.azure.com", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Azure File driver after it was turned off: %v", err)
	}
	if _, err := cs.AppsV1().DaemonSets(kubeobjects.Namespace).Get(ctx, "csi-azurefile-node-win", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Azure File Windows node plugin after it was turned off: %v", err)
	}
	if _, err := cs.StorageV1().CSIDrivers().Get(ctx, "disk.csi.azure.com", metav1.GetOptions{}); err != nil {
		t.Errorf("the Azure Disk driver after Azure File was turned off: %v", err)
	}
}

// Images names every image the objects of the drivers that are on use, and no other.
func TestImages(t *testing.T) {
	for _, c := range []Config{config(true, true), config(true, false), config(false, true)} {
		objs, err := Objects(c)
		if err != nil {
			t.Fatal(err)
		}
		used := map[string]bool{}
		for _, o := range objs {
			var spec *corev1.PodSpec
			switch w := o.(type) {
			case *appsv1.Deployment:
				spec = &w.Spec.Template.Spec
			case *appsv1.DaemonSet:
				spec = &w.Spec.Template.Spec
			}
			if spec == nil {
				continue
			}
			for _, ct := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
				used[ct.Image] = true
			}
		}
		listed := map[string]bool{}
		for _, img := range Images(c) {
			listed[img] = true
		}
		for img := range used {
			if !listed[img] {
				t.Errorf("%+v: image %s is used and not listed", c, img)
			}
		}
		for img := range listed {
			if !used[img] {
				t.Errorf("%+v: image %s is listed and not used", c, img)
			}
		}
	}
}

// The DaemonSet controller makes a node plugin's pod only on a node cloud-node-manager has
// initialized (its zone and instance-type labels), so the plugin never tells the kubelet a
// node has no zone: a node without the labels gets none until it has them.
func TestNodePluginsWaitForCloudNodeManager(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cs := adminClient(t)
	if err := Reconcile(ctx, cs, config(true, false)); err != nil {
		t.Fatal(err)
	}
	initialized := map[string]string{corev1.LabelOSStable: "linux", corev1.LabelTopologyZone: "westeurope-1",
		corev1.LabelInstanceTypeStable: "Standard_D2s_v5"}
	for name, labels := range map[string]map[string]string{"initialized": initialized, "bare": {corev1.LabelOSStable: "linux"}} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
		if _, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// podsOn lists the nodes the Azure Disk node plugin's pods are for (the DaemonSet controller
	// names the node in the pod's affinity; these nodes have no capacity to be bound to).
	podsOn := func() []string {
		pods, err := cs.CoreV1().Pods(kubeobjects.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=csi-azuredisk-node"})
		if err != nil {
			t.Fatal(err)
		}
		var nodes []string
		for _, p := range pods.Items {
			if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
				for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
					for _, f := range term.MatchFields {
						nodes = append(nodes, f.Values...)
					}
				}
			}
		}
		slices.Sort(nodes)
		return nodes
	}
	waitFor := func(want ...string) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for got := podsOn(); !slices.Equal(got, want); got = podsOn() {
			if time.Now().After(deadline) {
				t.Fatalf("the node plugin's pods are for %v, want %v", got, want)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	waitFor("initialized")
	time.Sleep(2 * time.Second) // the controller has synced both nodes: still none for the bare one
	waitFor("initialized")
	bare, err := cs.CoreV1().Nodes().Get(ctx, "bare", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bare.Labels = initialized
	if _, err := cs.CoreV1().Nodes().Update(ctx, bare, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("bare", "initialized")
}
