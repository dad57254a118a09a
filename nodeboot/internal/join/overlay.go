package join

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/nodeboot/internal/platform"
)

// Overlay peers are found and published the way flannel's kube subnet manager does, so that
// kubewin nodes and flannel nodes (Linux, or Windows with flannel's vxlan backend) reach each
// other's pods: every node publishes its VTEP in annotations of its own Node, and every node
// programs a route to each peer's pod CIDR through the peer's VTEP (flannel-io/flannel
// pkg/subnet/kube/kube.go AcquireLease and nodeToLease, pkg/subnet/kube/annotations.go, with
// the default prefix flannel.alpha.coreos.com; the vxlan lease data is pkg/backend/vxlan
// vxlanLeaseAttrs).
const (
	flannelPrefix = "flannel.alpha.coreos.com/"
	// AnnotationKubeSubnetManager marks a Node whose annotations carry a lease.
	AnnotationKubeSubnetManager = flannelPrefix + "kube-subnet-manager"
	// AnnotationBackendType is the lease's backend: vxlan.
	AnnotationBackendType = flannelPrefix + "backend-type"
	// AnnotationBackendData is the vxlan lease data: {"VNI":4096,"VtepMAC":"..."}.
	AnnotationBackendData = flannelPrefix + "backend-data"
	// AnnotationPublicIP is the address VXLAN packets for the node go to.
	AnnotationPublicIP = flannelPrefix + "public-ip"
	// AnnotationPublicIPOverwrite, set by an administrator, replaces the published address.
	AnnotationPublicIPOverwrite = flannelPrefix + "public-ip-overwrite"
)

// vxlanLeaseData is flannel's vxlan backend data. VtepMAC is a MAC in net.HardwareAddr's form;
// on Windows it is the overlay network's distributed router MAC (flannel
// pkg/backend/vxlan/vxlan_windows.go RegisterNetwork).
type vxlanLeaseData struct {
	VNI     int32
	VtepMAC string
}

// vtepAnnotations are the annotations a node with this VTEP publishes.
func vtepAnnotations(node *corev1.Node, vni int32, mac string, ip netip.Addr) map[string]string {
	public := ip.String()
	if o := node.Annotations[AnnotationPublicIPOverwrite]; o != "" {
		public = o
	}
	data, _ := json.Marshal(vxlanLeaseData{VNI: vni, VtepMAC: mac})
	return map[string]string{
		AnnotationKubeSubnetManager: "true",
		AnnotationBackendType:       "vxlan",
		AnnotationBackendData:       string(data),
		AnnotationPublicIP:          public,
	}
}

// publishVTEP writes the overlay network's VTEP (vtepMAC, as ensureNetwork returned it) into
// the node's own Node (which the node's credential may patch: the Node authorizer and
// NodeRestriction let a node change its own Node object), unless the annotations already say so.
func publishVTEP(ctx context.Context, d networkData, vtepMAC string) error {
	network := d.config().Network
	if network.Mode != v1alpha1.NetworkModeOverlay {
		return nil
	}
	if vtepMAC == "" {
		return fmt.Errorf("the overlay network %s reported no VTEP MAC", network.Name)
	}
	c, err := d.NodeClient()
	if err != nil {
		return err
	}
	name := d.nodeName()
	node, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("read Node %s: %w", name, err)
	}
	want := vtepAnnotations(node, network.VNI, vtepMAC, d.learned().NodeIP)
	same := true
	for k, v := range want {
		same = same && node.Annotations[k] == v
	}
	if same {
		return nil
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": want}})
	if _, err := c.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("publish the VTEP on Node %s: %w", name, err)
	}
	_, _ = fmt.Fprintf(d.out(), "[network] VTEP %s at %s published on Node %s\n", vtepMAC, want[AnnotationPublicIP], name)
	return nil
}

// PeerRemoteSubnets are the overlay routes of node self: each other node's pod CIDR through
// the VTEP its annotations publish, sorted by destination. Nodes without a vxlan lease, with a
// VNI below 4096 (which Windows cannot use) or with malformed data are skipped, as flannel's
// Windows backend skips them (pkg/backend/vxlan/vxlan_network_windows.go).
func PeerRemoteSubnets(self string, nodes []corev1.Node) []platform.RemoteSubnet {
	var out []platform.RemoteSubnet
	for _, node := range nodes {
		a := node.Annotations
		if node.Name == self || a[AnnotationKubeSubnetManager] != "true" || !strings.EqualFold(a[AnnotationBackendType], "vxlan") {
			continue
		}
		var data vxlanLeaseData
		if json.Unmarshal([]byte(a[AnnotationBackendData]), &data) != nil || data.VNI < v1alpha1.DefaultVNI || data.VNI > v1alpha1.MaxWindowsVNI {
			continue
		}
		mac, err := net.ParseMAC(data.VtepMAC)
		if err != nil {
			continue
		}
		public, err := netip.ParseAddr(a[AnnotationPublicIP])
		if err != nil || !public.Is4() {
			continue
		}
		dst, err := netip.ParsePrefix(node.Spec.PodCIDR)
		if err != nil || !dst.Addr().Is4() {
			continue
		}
		out = append(out, platform.RemoteSubnet{Destination: dst, ProviderAddress: public, VTEPMAC: mac.String(), VNI: data.VNI})
	}
	slices.SortFunc(out, func(a, b platform.RemoteSubnet) int {
		return strings.Compare(a.Destination.String(), b.Destination.String())
	})
	return out
}
