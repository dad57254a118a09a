// Package simcloud is a SIMULATED cloud-node-manager of the out-of-tree Azure cloud provider
// (cloud-provider-azure), for simulated machines whose kubelet runs with
// --cloud-provider=external. The real one cannot be built or pulled where kubewin is tested, and
// without it such nodes keep the uninitialized taint: "if the cloud controller manager is not
// available, new nodes in the cluster will be left unschedulable"
// (https://kubernetes.io/docs/tasks/administer-cluster/running-cloud-controller/).
//
// It does for its node what cloud-provider-azure's pkg/nodemanager initializeNode does with
// --use-instance-metadata, from the machine's instance metadata service (IMDS): the provider ID
// (the instance's resource ID with its subscription and resource group lower-cased,
// azure_instances_v1.go getLocalInstanceProviderID), the zone (<location>-<zone>, or the fault
// domain without zones: azure_zones.go GetZone), region and instance-type labels, the addresses;
// it refuses to initialize a node whose kubelet-provided address (alpha.kubernetes.io/provided-node-ip)
// is not one of the machine's, keeping the taint; with --wait-routes it marks the node's network
// unavailable until a route controller says otherwise; then it removes the taint. It acts with
// the credential of cloud-node-manager's service account (a token the kubelet requests for the
// pod, as for a projected volume), so the cluster's RBAC for it is what the real authorizer
// checks. It does not reconcile afterwards (the real one updates addresses periodically) and
// it runs no route controller. Nodes it initialized carry the annotation SimulatedAnnotation.
package simcloud

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/kubewin/kubewin/internal/nodecmd"
)

// Names this package shares with cloud-provider-azure and Kubernetes.
const (
	// ProvidedNodeIPAnnotation is the kubelet's --node-ip, which it records with an external cloud
	// provider (k8s.io/cloud-provider api.AnnotationAlphaNodeProvidedIPAddr).
	ProvidedNodeIPAnnotation = "alpha.kubernetes.io/provided-node-ip"
	// Namespace and DaemonSets are where cloud-node-manager runs: cloud-provider-azure's chart's
	// names, which kubewin's objects keep.
	Namespace = "kube-system"
	// SimulatedAnnotation marks a node this package initialized.
	SimulatedAnnotation = "kubewin.io/simulated-cloud-node-manager"
	// metadataAPIVersion is the IMDS api-version cloud-provider-azure reads
	// (pkg/provider/azure_instance_metadata.go).
	metadataAPIVersion = "2021-10-01"
)

// DaemonSets are cloud-node-manager's DaemonSets, Linux and Windows.
var DaemonSets = []string{"cloud-node-manager", "cloud-node-manager-windows"}

// NodeManager initializes one node, as cloud-node-manager does on it.
type NodeManager struct {
	// Client has cloud-node-manager's service account's credential.
	Client   kubernetes.Interface
	NodeName string
	// MetadataEndpoint is the base URL of the machine's IMDS (Azure's http://169.254.169.254).
	MetadataEndpoint string
	// WaitRoutes is cloud-node-manager's --wait-routes.
	WaitRoutes bool
	Out        io.Writer
}

// InstanceMetadata is the part of IMDS's /metadata/instance cloud-provider-azure reads
// (https://learn.microsoft.com/azure/virtual-machines/instance-metadata-service, "Instance
// metadata").
type InstanceMetadata struct {
	Compute struct {
		ResourceID          string `json:"resourceId"`
		Location            string `json:"location"`
		VMSize              string `json:"vmSize"`
		Zone                string `json:"zone"`
		PlatformFaultDomain string `json:"platformFaultDomain"`
		SubscriptionID      string `json:"subscriptionId"`
		ResourceGroupName   string `json:"resourceGroupName"`
		OSProfile           struct {
			ComputerName string `json:"computerName"`
		} `json:"osProfile"`
	} `json:"compute"`
	Network struct {
		Interface []MetadataInterface `json:"interface"`
	} `json:"network"`
}

// MetadataInterface is a network interface in the instance metadata, with its private addresses.
type MetadataInterface struct {
	IPv4 struct {
		IPAddress []MetadataAddress `json:"ipAddress"`
	} `json:"ipv4"`
}

// MetadataAddress is an interface's address.
type MetadataAddress struct {
	PrivateIPAddress string `json:"privateIpAddress"`
}

// Metadata reads the machine's instance metadata as the cloud provider does ("Metadata: true").
func (n *NodeManager) Metadata(ctx context.Context) (*InstanceMetadata, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.MetadataEndpoint+"/metadata/instance?api-version="+metadataAPIVersion, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Metadata", "true")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("instance metadata: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("instance metadata: %s: %s", resp.Status, body)
	}
	var md InstanceMetadata
	if err := json.Unmarshal(body, &md); err != nil {
		return nil, fmt.Errorf("instance metadata: %w", err)
	}
	if md.Compute.ResourceID == "" {
		return nil, fmt.Errorf("instance metadata has no compute.resourceId")
	}
	return &md, nil
}

// ProviderID is the node's provider ID from its instance metadata.
func (md *InstanceMetadata) ProviderID() string {
	c := md.Compute
	id := strings.ReplaceAll(c.ResourceID, c.SubscriptionID, strings.ToLower(c.SubscriptionID))
	return "azure://" + strings.ReplaceAll(id, c.ResourceGroupName, strings.ToLower(c.ResourceGroupName))
}

// Zone is the node's failure domain: <location>-<zone>, or the fault domain without zones.
func (md *InstanceMetadata) Zone() string {
	if md.Compute.Zone != "" {
		return strings.ToLower(md.Compute.Location + "-" + md.Compute.Zone)
	}
	return strings.ToLower(md.Compute.PlatformFaultDomain)
}

// Run initializes the node once it carries the uninitialized taint, retrying until it did or
// ctx ends (a clean stop). A node without the taint is left alone.
func (n *NodeManager) Run(ctx context.Context) {
	var last error
	// The condition never fails: the poll ends once the node is initialized, or with ctx.
	_ = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		done, err := n.initialize(ctx)
		if err != nil && (last == nil || err.Error() != last.Error()) {
			n.logf("node %s not initialized: %v", n.NodeName, err)
		}
		last = err
		return done, nil
	})
}

func (n *NodeManager) logf(format string, args ...any) {
	if n.Out != nil {
		_, _ = fmt.Fprintf(n.Out, "[SIMULATED cloud-node-manager] "+format+"\n", args...)
	}
}

// initialize initializes the node if it has the taint, and reports whether it is done.
func (n *NodeManager) initialize(ctx context.Context) (bool, error) {
	nodes := n.Client.CoreV1().Nodes()
	node, err := nodes.Get(ctx, n.NodeName, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	if !slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == nodecmd.TaintExternalCloudProvider }) {
		return true, nil
	}
	md, err := n.Metadata(ctx)
	if err != nil {
		return false, err
	}
	var addrs []corev1.NodeAddress
	for _, nic := range md.Network.Interface {
		for _, a := range nic.IPv4.IPAddress {
			addrs = append(addrs, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a.PrivateIPAddress})
		}
	}
	addrs = append(addrs, corev1.NodeAddress{Type: corev1.NodeHostName, Address: n.NodeName})
	if ip := node.Annotations[ProvidedNodeIPAnnotation]; ip != "" &&
		!slices.ContainsFunc(addrs, func(a corev1.NodeAddress) bool { return a.Address == ip }) {
		// KEP-3705: the node stays tainted when its kubelet's --node-ip is not the cloud's.
		return false, fmt.Errorf("failed to find kubelet node IP %s from cloud provider (its addresses: %v)", ip, addrs)
	}
	if n.WaitRoutes {
		if err := n.setNetworkUnavailable(ctx); err != nil {
			return false, err
		}
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := nodes.Get(ctx, n.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.Spec.ProviderID == "" {
			cur.Spec.ProviderID = md.ProviderID()
		}
		if cur.Labels == nil {
			cur.Labels = map[string]string{}
		}
		cur.Labels[corev1.LabelInstanceTypeStable] = md.Compute.VMSize
		cur.Labels[corev1.LabelTopologyZone] = md.Zone()
		cur.Labels[corev1.LabelTopologyRegion] = strings.ToLower(md.Compute.Location)
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations[SimulatedAnnotation] = "initialized by kubewin's SIMULATED cloud-node-manager (internal/sim/simcloud), not cloud-provider-azure"
		cur.Spec.Taints = slices.DeleteFunc(cur.Spec.Taints, func(t corev1.Taint) bool { return t.Key == nodecmd.TaintExternalCloudProvider })
		updated, err := nodes.Update(ctx, cur, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		return n.patchStatus(ctx, updated, func(s *corev1.NodeStatus) { s.Addresses = addrs })
	})
	if err != nil {
		return false, err
	}
	n.logf("node %s initialized: provider ID %s, zone %s, instance type %s", n.NodeName, md.ProviderID(), md.Zone(), md.Compute.VMSize)
	return true, nil
}

// setNetworkUnavailable marks the node's network unavailable until its route exists, as
// cloud-node-manager does with --wait-routes (nodemanager.go updateNetworkingCondition).
func (n *NodeManager) setNetworkUnavailable(ctx context.Context) error {
	now := metav1.Now()
	cond := corev1.NodeCondition{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionTrue, Reason: "NoRouteCreated",
		Message: "Node created without a route", LastTransitionTime: now, LastHeartbeatTime: now}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := n.Client.CoreV1().Nodes().Get(ctx, n.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if slices.ContainsFunc(node.Status.Conditions, func(c corev1.NodeCondition) bool { return c.Type == corev1.NodeNetworkUnavailable }) {
			return nil
		}
		return n.patchStatus(ctx, node, func(s *corev1.NodeStatus) { s.Conditions = append(s.Conditions, cond) })
	})
}

// patchStatus patches the node's status with a two-way strategic merge patch, as
// cloud-provider-azure's PatchNodeStatus does: its role may patch nodes/status, not update it.
func (n *NodeManager) patchStatus(ctx context.Context, node *corev1.Node, change func(*corev1.NodeStatus)) error {
	old, err := json.Marshal(corev1.Node{Status: node.Status})
	if err != nil {
		return err
	}
	status := node.Status.DeepCopy()
	change(status)
	cur, err := json.Marshal(corev1.Node{Status: *status})
	if err != nil {
		return err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(old, cur, corev1.Node{})
	if err != nil {
		return err
	}
	_, err = n.Client.CoreV1().Nodes().Patch(ctx, node.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}
