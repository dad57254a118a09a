// Package azurecsi is the Azure Disk and Azure File CSI drivers as an azure cluster runs them:
// their controllers on the control planes (which carry the cloud provider's identity and its
// configuration), their node plugins on every Linux node and, as HostProcess DaemonSets, on
// every Windows node, their RBAC, CSIDriver objects and default StorageClasses. The objects
// follow the drivers' own deployments at the pinned releases (kubernetes-sigs/azuredisk-csi-driver
// deploy/v1.34.5 and charts/v1.34.5, kubernetes-sigs/azurefile-csi-driver deploy/v1.35.7 and
// charts/v1.35.7), with the differences named where they are made.
package azurecsi

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubewin/kubewin/provider/internal/kubeobjects"
)

// Registry is where the drivers and their sidecars are published (both drivers' values.yaml:
// image.baseRepo mcr.microsoft.com, repositories /oss/v2/kubernetes-csi/...).
const Registry = "mcr.microsoft.com/oss/v2/kubernetes-csi"

// Versions are the drivers' releases.
type Versions struct{ AzureDisk, AzureFile string }

// Pinned are kubewin's releases, the newest of each driver: both drivers support every
// Kubernetes release from 1.21 (their READMEs' compatibility tables), and AKS runs these lines
// (Azure Disk v1.34, Azure File v1.35) on Kubernetes 1.35 and 1.36 (AKS's supported Kubernetes
// versions page, "AKS components breaking changes by version").
var Pinned = Versions{AzureDisk: "v1.34.5", AzureFile: "v1.35.7"}

// OldestMinor is the oldest release line (v1.OldestMinor.x) of either driver whose flags and
// images the objects use: every flag exists in Azure Disk v1.33.11 and Azure File v1.33.10
// (their azuredisk_option.go and azurefile_options.go), the -windows-hp images since v1.28; an
// unknown flag stops a driver (its flags exit on error).
const OldestMinor = 33

// sidecars are the kubernetes-csi sidecars' releases the pinned drivers deploy with (their
// values.yaml at v1.34.5 and v1.35.7 agree on these).
var sidecars = map[string]string{
	"csi-provisioner": "v6.3.0", "csi-attacher": "v4.12.0", "csi-resizer": "v2.2.0", "livenessprobe": "v2.19.0",
	"csi-node-driver-registrar": "v2.17.0",
}

// Config is what the objects depend on.
type Config struct {
	Versions Versions
	// AzureDisk and AzureFile turn the drivers on.
	AzureDisk, AzureFile bool
	// ControlPlanes is the number of control planes, where the controllers run (two replicas
	// at most, as the drivers deploy them, one per control plane: they use the host's ports).
	ControlPlanes int
	// WindowsServer is the API server's URL as the Windows nodes reach it, and CACert its CA
	// certificate (PEM): the Windows node plugins' kubeconfig.
	WindowsServer string
	CACert        []byte
}

// A driver is what differs between the two drivers.
type driver struct {
	name    string // the CSI driver's name
	short   string // the objects' prefix: azuredisk, azurefile
	version string
	// ports on the host: the controller's health and metrics, the node plugin's health and
	// metrics, the node registrar's health (values.yaml).
	controllerHealth, controllerMetrics, nodeHealth, nodeMetrics, registrarHealth int
	attach                                                                        bool
	controllerArgs, nodeArgs, windowsArgs                                         []string
	controllerSecrets                                                             []string
	preStop                                                                       string
	linuxVolumes                                                                  []corev1.Volume
	linuxMounts                                                                   []corev1.VolumeMount
	driverSpec                                                                    storagev1.CSIDriverSpec
	class                                                                         *storagev1.StorageClass
}

// Names of the StorageClasses, as AKS names its defaults (AKS's storage concepts page).
const (
	ManagedCSI   = "managed-csi"
	AzureFileCSI = "azurefile-csi"
	// DefaultClassAnnotation marks the default StorageClass.
	DefaultClassAnnotation = "storageclass.kubernetes.io/is-default-class"
)

var (
	devDir   = kubeobjects.HostPath("device-dir", "/dev", corev1.HostPathDirectory)
	devMount = corev1.VolumeMount{Name: "device-dir", MountPath: "/dev"}
)

var diskNodeArgs = []string{"--allow-empty-cloud-config=true", "--support-zone=true", "--get-node-info-from-labels=true",
	"--remove-not-ready-taint=true"}

func disk(v string) driver {
	return driver{
		name: "disk.csi.azure.com", short: "azuredisk", version: v, attach: true,
		controllerHealth: 29602, controllerMetrics: 29604, nodeHealth: 29603, nodeMetrics: 29605, registrarHealth: 29607,
		// The node plugins read their zone and size from the labels cloud-node-manager sets
		// (--get-node-info-from-labels): the nodes have no cloud configuration, and without one
		// the Windows plugin's node-info path reads through an uninitialized cloud (nodeserver.go
		// NodeGetInfo at v1.34.5; upstream issue kubernetes-sigs/azuredisk-csi-driver#3400 shows
		// the labels' path on nodes without one).
		controllerArgs:    []string{"--disable-avset-nodes=false", "--allow-empty-cloud-config=false", "--check-disk-lun-collision=true"},
		nodeArgs:          diskNodeArgs,
		windowsArgs:       diskNodeArgs,
		controllerSecrets: []string{"get"},
		// The disks' devices and the SCSI buses they appear on.
		linuxVolumes: []corev1.Volume{devDir,
			kubeobjects.HostPath("sys-devices-dir", "/sys/bus/scsi/devices", corev1.HostPathDirectory),
			kubeobjects.HostPath("sys-class", "/sys/class/", corev1.HostPathDirectory),
		},
		linuxMounts: []corev1.VolumeMount{devMount,
			{Name: "sys-devices-dir", MountPath: "/sys/bus/scsi/devices"},
			{Name: "sys-class", MountPath: "/sys/class/"},
		},
		// The node plugin waits, when its pod stops, for the node's disks to be detached if
		// the node is drained or going away (pkg/azurediskplugin/hooks/prestop.go), so that a
		// deleted node's disks are not left to the force-detach timeout.
		preStop: "--pre-stop-hook=true",
		driverSpec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(true), PodInfoOnMount: ptr.To(false),
			FSGroupPolicy: ptr.To(storagev1.FileFSGroupPolicy)},
		class: storageClass(ManagedCSI, "disk.csi.azure.com", true, storagev1.VolumeBindingWaitForFirstConsumer,
			map[string]string{"skuName": "StandardSSD_LRS"}, nil),
	}
}

func file(v string) driver {
	return driver{
		name: "file.csi.azure.com", short: "azurefile", version: v,
		controllerHealth: 29612, controllerMetrics: 29614, nodeHealth: 29613, nodeMetrics: 29615, registrarHealth: 29617,
		controllerArgs: []string{"--allow-empty-cloud-config=false"},
		// Loop devices of the VHD disks on file shares (--enable-vhd, on by default).
		linuxVolumes: []corev1.Volume{devDir},
		linuxMounts:  []corev1.VolumeMount{devMount},
		// No azurefile-proxy: its init container rewrites the host's /etc/krb5.conf and installs
		// packages from the internet on the host (pkg/azurefile-proxy/init.sh at v1.35.7); it
		// serves aznfs mounts, and kubewin's classes mount SMB.
		nodeArgs: []string{"--allow-empty-cloud-config=true", "--enable-azurefile-proxy=false", "--enable-volume-mount-group=true",
			"--enable-get-volume-stats=true", "--mount-permissions=0777"},
		windowsArgs: []string{"--allow-empty-cloud-config=true", "--enable-get-volume-stats=true"},
		// The controller keeps each storage account's key in a Secret the node plugins read
		// (azure-storage-account-<account>-secret: pkg/azurefile/azurefile.go at v1.35.7).
		controllerSecrets: []string{"get", "create"},
		// No tokenRequests (nor requiresRepublish, which refreshes them): the driver's chart asks
		// the kubelet for a workload identity token on every mount, for mounts as a workload
		// identity, which kubewin's clusters do not configure; the API server warns that such
		// tokens may be logged in volume attributes (spec.serviceAccountTokenInSecrets).
		driverSpec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(false), PodInfoOnMount: ptr.To(true),
			VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral},
			FSGroupPolicy:        ptr.To(storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy)},
		// Mount options of the driver's example class (deploy/example/storageclass-azurefile-csi.yaml).
		class: storageClass(AzureFileCSI, "file.csi.azure.com", false, storagev1.VolumeBindingImmediate,
			map[string]string{"skuName": "Standard_LRS"},
			[]string{"dir_mode=0777", "file_mode=0777", "mfsymlinks", "cache=strict", "nosharesock", "actimeo=30", "nobrl"}),
	}
}

// storageClass is a driver's class: reclaim Delete, expandable, as AKS's defaults (AKS's
// storage concepts page and its Azure Disk and Azure Files volume pages).
func storageClass(name, provisioner string, isDefault bool, binding storagev1.VolumeBindingMode, params map[string]string,
	mountOptions []string) *storagev1.StorageClass {
	m := kubeobjects.ClusterMeta(name)
	m.Annotations = map[string]string{DefaultClassAnnotation: strconv.FormatBool(isDefault)}
	return &storagev1.StorageClass{
		TypeMeta: metav1.TypeMeta{APIVersion: "storage.k8s.io/v1", Kind: "StorageClass"}, ObjectMeta: m,
		Provisioner: provisioner, Parameters: params, MountOptions: mountOptions,
		ReclaimPolicy: ptr.To(corev1.PersistentVolumeReclaimDelete), AllowVolumeExpansion: ptr.To(true), VolumeBindingMode: &binding,
	}
}

func (c Config) drivers() (on, off []driver) {
	for _, d := range []struct {
		driver
		on bool
	}{{disk(c.Versions.AzureDisk), c.AzureDisk}, {file(c.Versions.AzureFile), c.AzureFile}} {
		if d.on {
			on = append(on, d.driver)
		} else {
			off = append(off, d.driver)
		}
	}
	return on, off
}

// Objects are the objects of the drivers that are on, in the order they are applied.
func Objects(c Config) ([]runtime.Object, error) {
	on, _ := c.drivers()
	var objs []runtime.Object
	for _, d := range on {
		o, err := d.objects(c)
		if err != nil {
			return nil, err
		}
		objs = append(objs, o...)
	}
	return objs, nil
}

func (d driver) controllerAccount() string { return "csi-" + d.short + "-controller-sa" }
func (d driver) nodeAccount() string       { return "csi-" + d.short + "-node-sa" }
func (d driver) kubeconfigName() string    { return "csi-" + d.short + "-node-win-kubeconfig" }

// leaseRule is what the sidecars' leader election needs (the drivers' RBAC).
var leaseRule = kubeobjects.Rule("coordination.k8s.io", []string{"leases"}, "get", "watch", "list", "delete", "update", "create", "patch")

// The sidecars' roles, as both drivers' charts grant them
// (templates/rbac-csi-azure{disk,file}-controller.yaml); no snapshotter: kubewin installs no
// VolumeSnapshot CRDs, and the cloud provider's identity has no snapshot permissions.
var (
	provisionerRules = []rbacv1.PolicyRule{
		kubeobjects.Rule("", []string{"persistentvolumes"}, "get", "list", "watch", "create", "patch", "delete"),
		kubeobjects.Rule("", []string{"persistentvolumeclaims"}, "get", "list", "watch", "update"),
		kubeobjects.Rule("storage.k8s.io", []string{"storageclasses"}, "get", "list", "watch"),
		kubeobjects.Rule("", []string{"events"}, "get", "list", "watch", "create", "update", "patch"),
		kubeobjects.Rule("storage.k8s.io", []string{"csinodes"}, "get", "list", "watch"),
		kubeobjects.Rule("", []string{"nodes"}, "get", "list", "watch"),
		kubeobjects.Rule("storage.k8s.io", []string{"volumeattributesclasses"}, "get"),
		leaseRule,
	}
	attacherRules = []rbacv1.PolicyRule{
		kubeobjects.Rule("", []string{"persistentvolumes"}, "get", "list", "watch", "update"),
		kubeobjects.Rule("", []string{"nodes"}, "get", "list", "watch"),
		kubeobjects.Rule("storage.k8s.io", []string{"csinodes"}, "get", "list", "watch"),
		kubeobjects.Rule("storage.k8s.io", []string{"volumeattachments"}, "get", "list", "watch", "update", "patch"),
		kubeobjects.Rule("storage.k8s.io", []string{"volumeattachments/status"}, "get", "list", "watch", "update", "patch"),
		leaseRule,
	}
	resizerRules = []rbacv1.PolicyRule{
		kubeobjects.Rule("", []string{"persistentvolumes"}, "get", "list", "watch", "update", "patch"),
		kubeobjects.Rule("", []string{"persistentvolumeclaims"}, "get", "list", "watch"),
		kubeobjects.Rule("", []string{"persistentvolumeclaims/status"}, "update", "patch"),
		kubeobjects.Rule("", []string{"events"}, "list", "watch", "create", "update", "patch"),
		kubeobjects.Rule("", []string{"pods"}, "get", "list", "watch"),
		kubeobjects.Rule("storage.k8s.io", []string{"volumeattributesclasses"}, "get", "list", "watch"),
		leaseRule,
	}
)

// nodeRules are the node plugins': secrets to read (Azure File's account keys; Azure Disk's
// optional cloud configuration), their node (Azure Disk removes its not-ready taint), and the
// attachments (the drivers' templates/rbac-csi-azure{disk,file}-node.yaml).
func (d driver) nodeRules() []rbacv1.PolicyRule {
	rules := []rbacv1.PolicyRule{kubeobjects.Rule("", []string{"secrets"}, "get")}
	if d.attach {
		rules = append(rules, kubeobjects.Rule("", []string{"nodes"}, "get", "patch"),
			kubeobjects.Rule("storage.k8s.io", []string{"csinodes"}, "get"),
			kubeobjects.Rule("storage.k8s.io", []string{"volumeattachments"}, "get", "list", "watch"))
	}
	return rules
}

func (d driver) objects(c Config) ([]runtime.Object, error) {
	kubeconfig, err := kubeobjects.HostProcessKubeconfig(d.kubeconfigName(), d.nodeAccount(), c.WindowsServer, c.CACert)
	if err != nil {
		return nil, err
	}
	roles := map[string][]rbacv1.PolicyRule{
		d.short + "-external-provisioner-role":       provisionerRules,
		d.short + "-external-resizer-role":           resizerRules,
		"csi-" + d.short + "-controller-secret-role": {kubeobjects.Rule("", []string{"secrets"}, d.controllerSecrets...)},
	}
	if d.attach {
		roles[d.short+"-external-attacher-role"] = attacherRules
	}
	objs := []runtime.Object{kubeobjects.ServiceAccount(d.controllerAccount()), kubeobjects.ServiceAccount(d.nodeAccount())}
	for _, name := range slices.Sorted(maps.Keys(roles)) {
		objs = append(objs, kubeobjects.ClusterRole(name, roles[name]), kubeobjects.ClusterRoleBinding(name, name, d.controllerAccount()))
	}
	nodeRole := "csi-" + d.short + "-node-role"
	objs = append(objs, kubeobjects.ClusterRole(nodeRole, d.nodeRules()), kubeobjects.ClusterRoleBinding(nodeRole, nodeRole, d.nodeAccount()),
		&storagev1.CSIDriver{TypeMeta: metav1.TypeMeta{APIVersion: "storage.k8s.io/v1", Kind: "CSIDriver"},
			ObjectMeta: kubeobjects.ClusterMeta(d.name), Spec: d.driverSpec},
		d.controller(c), d.linuxNode(), kubeconfig, d.windowsNode(), d.class)
	return objs, nil
}

// Reconcile applies the objects of the drivers that are on, and deletes those of a driver that
// is off whose CSIDriver object kubewin applied. A driver another installation runs (its
// CSIDriver object is not kubewin's) is refused when on, and left alone when off.
func Reconcile(ctx context.Context, cs kubernetes.Interface, c Config) error {
	on, off := c.drivers()
	for _, d := range on {
		if by, err := d.installedBy(ctx, cs); err != nil {
			return err
		} else if by == others {
			return fmt.Errorf("CSIDriver %s exists and kubewin did not apply it (it has no label %s=kubewin): another installation, "+
				"such as the driver's Helm chart, runs the %s driver. Remove that installation, or turn kubewin's off: %w", d.name,
				kubeobjects.ManagedByLabel, d.short, ErrOtherInstallation)
		}
	}
	objs, err := Objects(c)
	if err != nil {
		return err
	}
	if err := Apply(ctx, cs, objs); err != nil {
		return err
	}
	for _, d := range off {
		by, err := d.installedBy(ctx, cs)
		if err != nil {
			return err
		}
		if by != kubewin {
			continue
		}
		objs, err := d.objects(c)
		if err != nil {
			return err
		}
		if err := Delete(ctx, cs, objs); err != nil {
			return err
		}
	}
	return nil
}

// ErrOtherInstallation is a driver that another installation runs.
var ErrOtherInstallation = errors.New("the driver is installed by something else")

// An installer is who applied a driver's CSIDriver object.
type installer int

const (
	nobody installer = iota
	kubewin
	others
)

// installedBy reads who applied the driver's CSIDriver object.
func (d driver) installedBy(ctx context.Context, cs kubernetes.Interface) (installer, error) {
	o, err := cs.StorageV1().CSIDrivers().Get(ctx, d.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nobody, nil
	case err != nil:
		return nobody, fmt.Errorf("read CSIDriver %s: %w", d.name, err)
	case o.Labels[kubeobjects.ManagedByLabel] != kubeobjects.ManagedBy[kubeobjects.ManagedByLabel]:
		return others, nil
	}
	return kubewin, nil
}

// Apply applies the objects server-side (kubeobjects.Apply).
func Apply(ctx context.Context, cs kubernetes.Interface, objs []runtime.Object) error {
	return kubeobjects.Apply(ctx, cs, "the Azure CSI drivers", objs)
}

// Delete deletes the objects (kubeobjects.Delete).
func Delete(ctx context.Context, cs kubernetes.Interface, objs []runtime.Object) error {
	return kubeobjects.Delete(ctx, cs, "the Azure CSI drivers", objs)
}
