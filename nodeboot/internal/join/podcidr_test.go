package join

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/nodestatus"
)

// podCIDRData is a network phase's data reading a Node through a client.
type podCIDRData struct {
	networkData
	client  kubernetes.Interface
	timeout time.Duration // default 400 ms
}

func (d podCIDRData) config() *v1alpha1.NodeConfig { return &v1alpha1.NodeConfig{} }
func (d podCIDRData) nodeName() string             { return "win000001" }
func (d podCIDRData) timeouts() Timeouts {
	if d.timeout == 0 {
		return Timeouts{PodCIDR: 400 * time.Millisecond}
	}
	return Timeouts{PodCIDR: d.timeout}
}
func (d podCIDRData) NodeClient() (kubernetes.Interface, error) { return d.client, nil }

// A node that gets no pod CIDR in time says why: the read's failure when the last read failed,
// no stale failure when later reads answered (the Node simply has none yet).
func TestPodCIDRTimeoutSaysWhy(t *testing.T) {
	for _, tc := range []struct {
		name     string
		failFor  int32 // reads that fail before the API server answers
		lastRead bool
	}{
		{"the cluster answers without one", 0, false},
		{"a read failed, later ones answered", 1, false},
		{"every read fails", 1 << 20, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "win000001"}})
			var reads atomic.Int32
			c.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
				if reads.Add(1) <= tc.failFor {
					return true, nil, errors.New("etcdserver: request timed out")
				}
				return false, nil, nil
			})
			_, err := waitPodCIDR(context.Background(), podCIDRData{client: c})
			var se *nodestatus.Error
			if !errors.As(err, &se) || se.Code != nodestatus.CodePodCIDRTimeout {
				t.Fatalf("want PodCIDRTimeout, got %v", err)
			}
			if got := strings.Contains(err.Error(), "last read: etcdserver: request timed out"); got != tc.lastRead {
				t.Errorf("%d reads: the message %q names the last read's failure: %v, want %v", reads.Load(), err, got, tc.lastRead)
			}
		})
	}
}

// The wait for the pod CIDR reads the Node once and then watches it, whatever the time node IPAM
// takes: a pool's joins all wait at once, and reading each Node every 100 ms loaded the API
// server as the pool grew.
func TestPodCIDRWatched(t *testing.T) {
	c := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "win000001"}})
	var reads atomic.Int32
	c.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		reads.Add(1)
		return false, nil, nil
	})
	go func() {
		time.Sleep(time.Second) // as long as ten reads every 100 ms
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "win000001"}, Spec: corev1.NodeSpec{PodCIDR: "10.244.3.0/24"}}
		if _, err := c.CoreV1().Nodes().Update(context.Background(), node, metav1.UpdateOptions{}); err != nil {
			t.Error(err)
		}
	}()
	d := podCIDRData{client: c, timeout: 10 * time.Second}
	got, err := waitPodCIDR(context.Background(), d)
	if err != nil || got.String() != "10.244.3.0/24" {
		t.Fatalf("waitPodCIDR = %v, %v", got, err)
	}
	if n := reads.Load(); n != 1 {
		t.Errorf("the Node was read %d times: once, then watched", n)
	}
}
