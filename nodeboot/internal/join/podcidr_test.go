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
	client kubernetes.Interface
}

func (d podCIDRData) config() *v1alpha1.NodeConfig              { return &v1alpha1.NodeConfig{} }
func (d podCIDRData) nodeName() string                          { return "win000001" }
func (d podCIDRData) timeouts() Timeouts                        { return Timeouts{PodCIDR: 400 * time.Millisecond} }
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
