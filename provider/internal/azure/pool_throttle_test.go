package azure

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubewin/kubewin/internal/api"
	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/drain"
	"github.com/kubewin/kubewin/internal/testkit/armtest"
	"github.com/kubewin/kubewin/provider/internal/pool"
)

// joinBooter boots scale-set instances whose nodes register, Ready, after a Windows machine's
// boot and join: a few minutes of Azure's time, spread over the instances.
type joinBooter struct {
	client *fake.Clientset
	scale  float64 // the server's TimeScale
}

func (b *joinBooter) Boot(ctx context.Context, in armtest.Instance) error {
	cfg, err := api.DecodeNodeConfig(in.CustomData)
	if err != nil {
		return err
	}
	id, _ := strconv.Atoi(in.InstanceID)
	boot := 210*time.Second + time.Duration(id%7)*20*time.Second
	select {
	case <-time.After(time.Duration(float64(boot) / b.scale)):
	case <-ctx.Done():
		return ctx.Err()
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: strings.ToLower(in.ComputerName), Labels: cfg.Node.Labels}}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	_, err = b.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	return err
}

func (b *joinBooter) Shutdown(context.Context, armtest.Instance) error { return nil }
func (b *joinBooter) SerialLog(armtest.Instance) []byte                { return nil }
func (b *joinBooter) RunCommand(context.Context, armtest.Instance, string) ([]byte, []byte, int, error) {
	return nil, nil, 0, errors.New("no run command here")
}

// A 50-node pool's create spends the subscription's Compute budgets sparingly: with Compute's
// budgets (HighCostGetVMScaleSet: 190 lists of instances per 3 minutes, 900 per 30) and nodes that
// take 3.5 to 5.5 minutes to join, it gets no 429, and the test logs its ARM reads per minute. The
// world runs 8 times faster than the wall clock: the server's throttling clock, the machines'
// boots and the pool's intervals alike.
func TestPoolCreateWithinComputeBudgets(t *testing.T) {
	t.Parallel()
	const scale = 8
	scaled := func(d time.Duration) time.Duration { return time.Duration(float64(d) / scale) }
	k8s := fake.NewClientset()
	srv, err := armtest.New(armtest.Options{TimeScale: scale, RetryAfter: scaled(10 * time.Second), Booter: &joinBooter{client: k8s, scale: scale}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Close() }()
	vnet, err := srv.AddVirtualNetwork(armtest.VirtualNetwork{ResourceGroup: "pool", Name: "vnet", AddressPrefixes: []string{"10.240.0.0/16"},
		Subnets: map[string]string{"nodes": "10.240.0.0/20"}})
	if err != nil {
		t.Fatal(err)
	}
	image := srv.ResourceGroupID("pool") + "/providers/Microsoft.Compute/galleries/kubewin/images/ws2022/versions/1.0.0"
	if err := srv.AddImage(image, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), scaled(15*time.Minute))
	defer cancel()
	client, err := newClient(ctx, Config{SubscriptionID: srv.SubscriptionID(), TenantID: srv.TenantID(), MetadataHost: srv.MetadataHost(),
		ClientID: srv.Credentials().ClientID, ClientSecret: srv.Credentials().ClientSecret}, srv.HTTPClient())
	if err != nil {
		t.Fatal(err)
	}
	client.poll = scaled(10 * time.Second)
	ss := &ScaleSet{Client: client, Name: "win", Pool: "win", ComputerNamePrefix: "win", Machines: Machines{
		ResourceGroup: "pool", Location: srv.Location(), SubnetID: vnet + "/subnets/nodes", VMSize: "Standard_D4s_v5",
		ImageID: image, AdminUsername: "kwadmin",
	}}
	m := &pool.Manager{Client: k8s, Compute: ss, Poll: scaled(250 * time.Millisecond), MachineReportsAfter: scaled(5 * time.Second)}
	tmpl := v1alpha1.NodeConfig{
		APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindNodeConfig,
		Cluster: v1alpha1.Cluster{APIServerEndpoint: "10.240.255.4:6443", CACertHashes: []string{"sha256:" + strings.Repeat("a", 64)},
			KubernetesVersion: "v1.37.1", ClusterCIDR: "10.244.0.0/16", ServiceCIDR: "10.96.0.0/12"},
	}
	tmpl.Default()
	start := time.Now()
	nodes, err := m.Reconcile(ctx, pool.Spec{Pool: "win", Count: 50, Image: image, Template: tmpl, MaxSurge: 1, TokenTTL: time.Hour,
		Drain: drain.Options{Timeout: time.Minute}})
	elapsed := time.Since(start) * scale
	if err != nil {
		t.Fatal(err)
	}
	ready := 0
	for _, n := range nodes {
		if n.Ready {
			ready++
		}
	}
	if ready != 50 {
		t.Fatalf("%d Ready nodes, want 50", ready)
	}
	var reads, writes, lists, throttled, serial int
	for _, r := range srv.Requests() {
		switch {
		case r.Status == http.StatusTooManyRequests:
			throttled++
		case strings.HasSuffix(strings.ToLower(r.Path), "/retrievebootdiagnosticsdata"):
			serial++
		case r.Method == http.MethodGet:
			reads++
			if strings.HasSuffix(r.Path, "/virtualMachines") {
				lists++
			}
		default:
			writes++
		}
	}
	perMinute := func(n int) string { return fmt.Sprintf("%.1f/min", float64(n)/elapsed.Minutes()) }
	t.Logf("50-node create in %s of Azure time: %d ARM reads (%s), of which %d instance lists (%s); %d writes (%s); %d answered 429",
		elapsed.Round(time.Second), reads, perMinute(reads), lists, perMinute(lists), writes, perMinute(writes), throttled)
	if throttled > 0 {
		t.Errorf("%d requests were throttled (429): the pool spends Compute's budgets faster than they refill", throttled)
	}
	// A Windows instance's serial console is SAC's: reading it finds none of nodeboot's reports.
	if serial > 0 {
		t.Errorf("%d boot diagnostics reads of Windows instances, whose serial console never carries a join report", serial)
	}
}
