package simcloud

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubewin/kubewin/internal/nodecmd"
)

const resourceID = "/subscriptions/AB12/resourceGroups/RG-Mixed/providers/Microsoft.Compute/virtualMachineScaleSets/acs-agents/virtualMachines/3"

// imds serves instance metadata as Azure's IMDS does: only with "Metadata: true".
func imds(t *testing.T, zone, ip string) string {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Metadata") != "true" || r.URL.Path != "/metadata/instance" || r.URL.Query().Get("api-version") == "" {
			http.Error(w, `{"error":"Bad request"}`, http.StatusBadRequest)
			return
		}
		var md InstanceMetadata
		c := &md.Compute
		c.ResourceID, c.Location, c.VMSize, c.Zone, c.PlatformFaultDomain = resourceID, "WestEurope", "Standard_D2s_v3", zone, "1"
		c.SubscriptionID, c.ResourceGroupName = "AB12", "RG-Mixed"
		var nic MetadataInterface
		nic.IPv4.IPAddress = []MetadataAddress{{PrivateIPAddress: ip}}
		md.Network.Interface = []MetadataInterface{nic}
		_ = json.NewEncoder(w).Encode(md)
	}))
	t.Cleanup(s.Close)
	return s.URL
}

func taintedNode(providedIP string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "acs-agent-000003", Labels: map[string]string{"kubernetes.io/os": "linux"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{
			{Key: "other", Effect: corev1.TaintEffectNoSchedule},
			{Key: nodecmd.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule},
		}}}
	if providedIP != "" {
		n.Annotations = map[string]string{ProvidedNodeIPAnnotation: providedIP}
	}
	return n
}

// A tainted node gets what cloud-provider-azure's node manager gives it from the instance
// metadata: the provider ID with its subscription and group lower-cased, the zone
// <location>-<zone> (or the fault domain), region and instance type, the cloud's addresses; the
// uninitialized taint goes, other taints stay, and the node says a simulation did it.
func TestNodeManagerInitializes(t *testing.T) {
	for _, tc := range []struct{ zone, want string }{{"2", "westeurope-2"}, {"", "1"}} {
		ctx := context.Background()
		c := fake.NewClientset(taintedNode("10.240.0.7"))
		nm := &NodeManager{Client: c, NodeName: "acs-agent-000003", MetadataEndpoint: imds(t, tc.zone, "10.240.0.7"), Out: io.Discard}
		if done, err := nm.initialize(ctx); !done || err != nil {
			t.Fatalf("initialize: %v, %v", done, err)
		}
		n, err := c.CoreV1().Nodes().Get(ctx, "acs-agent-000003", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if want := "azure:///subscriptions/ab12/resourceGroups/rg-mixed/providers/Microsoft.Compute/virtualMachineScaleSets/acs-agents/" +
			"virtualMachines/3"; n.Spec.ProviderID != want {
			t.Errorf("provider ID %s, want %s", n.Spec.ProviderID, want)
		}
		if l := n.Labels; l[corev1.LabelTopologyZone] != tc.want || l[corev1.LabelTopologyRegion] != "westeurope" ||
			l[corev1.LabelInstanceTypeStable] != "Standard_D2s_v3" || l["kubernetes.io/os"] != "linux" {
			t.Errorf("labels %v (zone %q)", l, tc.zone)
		}
		if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "other" {
			t.Errorf("taints %v, want only the other one", n.Spec.Taints)
		}
		if !slices.Contains(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.240.0.7"}) {
			t.Errorf("addresses %v", n.Status.Addresses)
		}
		if !strings.Contains(n.Annotations[SimulatedAnnotation], "SIMULATED") {
			t.Errorf("annotations %v do not say the node was initialized by a simulation", n.Annotations)
		}
	}
}

// A node whose kubelet's --node-ip is not one of the machine's addresses stays tainted
// (KEP-3705: the cloud provider does not initialize it), and a node without the taint is left
// alone.
func TestNodeManagerProvidedIPMismatch(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset(taintedNode("10.240.0.99"))
	nm := &NodeManager{Client: c, NodeName: "acs-agent-000003", MetadataEndpoint: imds(t, "1", "10.240.0.7"), Out: io.Discard}
	if done, err := nm.initialize(ctx); done || err == nil || !strings.Contains(err.Error(), "10.240.0.99") {
		t.Fatalf("initialize with a foreign --node-ip: %v, %v", done, err)
	}
	n, _ := c.CoreV1().Nodes().Get(ctx, "acs-agent-000003", metav1.GetOptions{})
	if n.Spec.ProviderID != "" || len(n.Spec.Taints) != 2 {
		t.Errorf("node changed: %+v", n.Spec)
	}
	plain := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "plain"}}
	c = fake.NewClientset(plain)
	nm = &NodeManager{Client: c, NodeName: "plain", MetadataEndpoint: "http://127.0.0.1:1", Out: io.Discard}
	if done, err := nm.initialize(ctx); !done || err != nil {
		t.Fatalf("a node without the taint: %v, %v", done, err)
	}
}

// With --wait-routes the node's network is unavailable until a route controller says
// otherwise.
func TestNodeManagerWaitRoutes(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset(taintedNode(""))
	nm := &NodeManager{Client: c, NodeName: "acs-agent-000003", MetadataEndpoint: imds(t, "1", "10.240.0.7"), WaitRoutes: true, Out: io.Discard}
	if done, err := nm.initialize(ctx); !done || err != nil {
		t.Fatalf("initialize: %v, %v", done, err)
	}
	n, _ := c.CoreV1().Nodes().Get(ctx, "acs-agent-000003", metav1.GetOptions{})
	if !slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
		return c.Type == corev1.NodeNetworkUnavailable && c.Status == corev1.ConditionTrue && c.Reason == "NoRouteCreated"
	}) {
		t.Errorf("conditions %+v", n.Status.Conditions)
	}
}
