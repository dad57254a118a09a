// Package simkubelet is a SIMULATED kubelet for the local backend and the ARM test server's
// simulated machines. It is not a kubelet: it runs no containers. It reads the command line and
// configuration file nodeboot wrote for kubelet.exe and, with the credential the kubeconfig
// names, registers the Node (if nodeboot has not), marks it simulated, keeps it Ready with node
// status and Lease heartbeats, reports the pods bound to it as Running and Ready (as kwok does)
// unless the node's container runtime would refuse their sandbox (a RuntimeClass handler it
// cannot run: SandboxRuntime), and confirms their deletion, so that scheduling, drains,
// PodDisruptionBudgets and workloads behave as on a real node. It stops cleanly: the node then
// goes NotReady when its lease expires, as a stopped machine would. The sim platform of the
// local backend runs it for Windows machines, and the ARM test server's simulated Linux machines
// (internal/armtest/simboot) for theirs; nodeboot.exe does not contain it.
package simkubelet

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	kubeletapis "k8s.io/kubelet/pkg/apis"
	"k8s.io/utils/ptr"

	"github.com/kubewin/kubewin/internal/ipam"
	"github.com/kubewin/kubewin/internal/nodecmd"
	"github.com/kubewin/kubewin/internal/sim/simcloud"
)

// Kubelet is the simulated kubelet of one node.
type Kubelet struct {
	Client kubernetes.Interface
	// Node is the Node to register when it does not exist: its name, labels and taints.
	Node   *corev1.Node
	NodeIP netip.Addr
	// Info is what the node reports about itself.
	Info    corev1.NodeSystemInfo
	MaxPods int32
	// LeaseInterval is the heartbeat period (the kubelet's default is 10 s; the lease lasts 40 s).
	LeaseInterval time.Duration
	// StatusInterval is how often the node's status is posted when nothing changed: the
	// kubelet's nodeStatusReportFrequency, 5 minutes by default (KubeletConfiguration). With
	// leases, the status is not the heartbeat, and each post reaches every watcher of Nodes.
	StatusInterval time.Duration
	// Note is the simulated annotation's text: what the node stands for. Default: a simulated
	// Windows machine of the local backend.
	Note string
	Out  io.Writer
	// ExternalCloudProvider is the kubelet's --cloud-provider=external: the Node registers with
	// the uninitialized taint, and the addresses a cloud provider set are kept.
	ExternalCloudProvider bool
	// Config is the kubelet's client configuration, and MetadataEndpoint its machine's instance
	// metadata service: with both, a cloud-node-manager pod bound to the node runs as
	// simcloud's simulated one, with its service account's token.
	Config           *rest.Config
	MetadataEndpoint string
	// Sandbox is the node's container runtime, which refuses a pod sandbox whose runtime handler
	// it cannot run. Default: WindowsContainerd without Hyper-V.
	Sandbox SandboxRuntime

	mu      sync.Mutex
	podCIDR netip.Prefix
	podIPs  map[types.UID]string
	next    uint64
	// cloudNodeManager is the pod whose simulated cloud-node-manager runs.
	cloudNodeManager types.UID
	// refused are the pods whose sandbox the runtime refused, with the refusal last reported.
	refused map[types.UID]string
	// lease is the node's Lease as last written, which the next renewal updates.
	lease *coordinationv1.Lease
}

// Simulated marks what the simulated kubelet registers: a label and an annotation on its Node.
const (
	SimulatedLabel      = "kubewin.io/simulated"
	SimulatedAnnotation = "kubewin.io/simulated"
	simulatedNote       = "a simulated Windows machine of kubewin's local backend: no containers run on it"
)

const leaseDuration = 40 * time.Second

// Run registers the node, then keeps it alive and runs its pods until ctx ends. Ending ctx is
// a clean stop, whenever it happens.
func (k *Kubelet) Run(ctx context.Context) error {
	if err := k.run(ctx); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

func (k *Kubelet) run(ctx context.Context) error {
	if k.LeaseInterval == 0 {
		k.LeaseInterval = 10 * time.Second
	}
	if k.StatusInterval == 0 {
		k.StatusInterval = 5 * time.Minute
	}
	k.podIPs = map[types.UID]string{}
	k.next = 3
	name := k.Node.Name
	uninitialized := func(t corev1.Taint) bool { return t.Key == nodecmd.TaintExternalCloudProvider }
	if k.ExternalCloudProvider && !slices.ContainsFunc(k.Node.Spec.Taints, uninitialized) {
		// A kubelet whose cloud provider is external registers its Node with this taint, which the
		// cloud provider removes (kubernetes pkg/kubelet/kubelet_node_status.go initialNode).
		k.Node.Spec.Taints = append(k.Node.Spec.Taints, corev1.Taint{Key: nodecmd.TaintExternalCloudProvider, Value: "true",
			Effect: corev1.TaintEffectNoSchedule})
	}
	if err := retry.OnError(startBackoff, func(error) bool { return ctx.Err() == nil }, func() error { return k.register(ctx) }); err != nil {
		return err
	}
	// The Node says that it is simulated before it is ever Ready.
	if err := retry.OnError(startBackoff, func(error) bool { return ctx.Err() == nil }, func() error { return k.markSimulated(ctx) }); err != nil {
		return err
	}
	// The node's first status and lease race the controllers that just saw it (node IPAM,
	// node lifecycle): retry them, as a kubelet does.
	if err := retry.OnError(startBackoff, func(error) bool { return ctx.Err() == nil }, func() error { return k.updateStatus(ctx) }); err != nil {
		return err
	}
	if err := retry.OnError(startBackoff, func(error) bool { return ctx.Err() == nil }, func() error { return k.renewLease(ctx) }); err != nil {
		return err
	}
	_, _ = fmt.Fprintf(k.Out, "[simulated-kubelet] node %s registered and Ready (simulated: no containers run)\n", name)

	// One informer on this node's pods only (not a factory, which links every API group in).
	lw := cache.NewListWatchFromClient(k.Client.CoreV1().RESTClient(), "pods", metav1.NamespaceAll, fields.OneTermEqualSelector("spec.nodeName", name))
	// Every pod is synced again each minute, the kubelet's default --sync-frequency: a pod whose
	// sandbox was refused is tried again.
	pods := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, time.Minute, cache.Indexers{})
	handle := func(obj any) {
		if pod, ok := obj.(*corev1.Pod); ok {
			k.syncPod(ctx, pod)
		}
	}
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: handle, UpdateFunc: func(_, obj any) { handle(obj) }}); err != nil {
		return err
	}
	go pods.RunWithContext(ctx)

	lease := time.NewTicker(k.LeaseInterval)
	defer lease.Stop()
	status := time.NewTicker(k.StatusInterval)
	defer status.Stop()
	for {
		select {
		case <-ctx.Done():
			_, _ = fmt.Fprintf(k.Out, "[simulated-kubelet] node %s stopped\n", name)
			return nil
		case <-lease.C:
			if err := k.renewLease(ctx); err != nil && ctx.Err() == nil {
				_, _ = fmt.Fprintf(k.Out, "[simulated-kubelet] lease: %v\n", err)
			}
		case <-status.C:
			if err := k.updateStatus(ctx); err != nil && ctx.Err() == nil {
				_, _ = fmt.Fprintf(k.Out, "[simulated-kubelet] node status: %v\n", err)
			}
		}
	}
}

// defaultLabels are the labels the kubelet keeps at its own values on a Node it finds registered
// (kubernetes pkg/kubelet/kubelet_node_status.go updateDefaultLabels).
var defaultLabels = []string{
	corev1.LabelHostname, corev1.LabelTopologyZone, corev1.LabelTopologyRegion, corev1.LabelFailureDomainBetaZone,
	corev1.LabelFailureDomainBetaRegion, corev1.LabelInstanceTypeStable, corev1.LabelInstanceType, corev1.LabelOSStable,
	corev1.LabelArchStable, corev1.LabelWindowsBuild, kubeletapis.LabelOS, kubeletapis.LabelArch,
}

// register creates the node's Node, as the kubelet's registration does; when the Node exists
// (nodeboot registers it first), the kubelet reads it and brings the default labels it has
// values for to those values, in a write of its own (tryRegisterWithAPIServer,
// updateDefaultLabels).
func (k *Kubelet) register(ctx context.Context) error {
	nodes := k.Client.CoreV1().Nodes()
	_, err := nodes.Create(ctx, k.Node, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("register node %s: %w", k.Node.Name, err)
		}
		return nil
	}
	existing, err := nodes.Get(ctx, k.Node.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("read registered node %s: %w", k.Node.Name, err)
	}
	if existing.Labels == nil {
		existing.Labels = map[string]string{}
	}
	changed := false
	for _, label := range defaultLabels {
		want, ok := k.Node.Labels[label]
		if !ok {
			continue
		}
		if existing.Labels[label] != want {
			existing.Labels[label] = want
			changed = true
		}
		if existing.Labels[label] == "" {
			delete(existing.Labels, label)
		}
	}
	if !changed {
		return nil
	}
	if _, err := nodes.Update(ctx, existing, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("reconcile the default labels of registered node %s: %w", k.Node.Name, err)
	}
	return nil
}

// startBackoff spans about a minute of retries.
var startBackoff = wait.Backoff{Steps: 12, Duration: 100 * time.Millisecond, Factor: 1.6, Cap: 10 * time.Second}

// markSimulated labels and annotates the Node as simulated, and learns its pod CIDR.
func (k *Kubelet) markSimulated(ctx context.Context) error {
	note := k.Note
	if note == "" {
		note = simulatedNote
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"true"},"annotations":{%q:%q}}}`, SimulatedLabel, SimulatedAnnotation, note)
	node, err := k.Client.CoreV1().Nodes().Patch(ctx, k.Node.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("mark node %s simulated: %w", k.Node.Name, err)
	}
	if p, err := ipam.ParsePrefix(node.Spec.PodCIDR); err == nil {
		k.mu.Lock()
		k.podCIDR = p
		k.mu.Unlock()
	}
	return nil
}

// updateStatus reports the node Ready, retrying when another writer changed the Node meanwhile.
func (k *Kubelet) updateStatus(ctx context.Context) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error { return k.writeStatus(ctx) })
}

func (k *Kubelet) writeStatus(ctx context.Context) error {
	node, err := k.Client.CoreV1().Nodes().Get(ctx, k.Node.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("read node %s: %w", k.Node.Name, err)
	}
	now := metav1.Now()
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		c := corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
		for _, old := range node.Status.Conditions {
			if old.Type == t && old.Status == s {
				c.LastTransitionTime = old.LastTransitionTime
			}
		}
		return c
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("4"),
		corev1.ResourceMemory:           resource.MustParse("16Gi"),
		corev1.ResourceEphemeralStorage: resource.MustParse("128Gi"),
		corev1.ResourcePods:             *resource.NewQuantity(int64(k.MaxPods), resource.DecimalSI),
	}
	node.Status.Capacity, node.Status.Allocatable = capacity, capacity
	own := []corev1.NodeCondition{
		cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "simulated kubelet has sufficient memory available"),
		cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "simulated kubelet has no disk pressure"),
		cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "simulated kubelet has sufficient PID available"),
		cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "simulated kubelet is posting ready status"),
	}
	// The conditions of other writers (node-problem-detector, nodeboot) stay: the kubelet sets
	// its own types only (kubernetes pkg/kubelet/nodestatus/setters.go).
	for _, c := range node.Status.Conditions {
		if !slices.ContainsFunc(own, func(o corev1.NodeCondition) bool { return o.Type == c.Type }) {
			own = append(own, c)
		}
	}
	node.Status.Conditions = own
	// With an external cloud provider, the addresses it set take precedence (kubernetes
	// pkg/kubelet/nodestatus/setters.go NodeAddress).
	if !k.ExternalCloudProvider || len(node.Status.Addresses) == 0 {
		node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: k.NodeIP.String()}, {Type: corev1.NodeHostName,
			Address: k.Node.Name}}
	}
	node.Status.NodeInfo = k.Info
	if _, err = k.Client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsConflict(err) {
			return err // retried as it is
		}
		return fmt.Errorf("update status of node %s: %w", k.Node.Name, err)
	}
	return nil
}

// renewLease renews the node's Lease as the kubelet's lease controller does
// (k8s.io/component-helpers/apimachinery/lease): it updates the Lease it last wrote, and reads
// it (or creates it) only when it has none or that update conflicted.
func (k *Kubelet) renewLease(ctx context.Context) error {
	leases := k.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NewMicroTime(time.Now())
	if k.lease != nil {
		l := k.lease.DeepCopy()
		l.Spec.RenewTime = &now
		updated, err := leases.Update(ctx, l, metav1.UpdateOptions{})
		if err == nil {
			k.lease = updated
			return nil
		}
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return err // tried again with the same Lease
		}
	}
	l, err := leases.Get(ctx, k.Node.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		l, err = k.createLease(ctx, now)
	case err == nil:
		l.Spec.RenewTime = &now
		l, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	}
	if err != nil {
		k.lease = nil
		return err
	}
	k.lease = l
	return nil
}

// createLease creates the node's Lease, owned by its Node.
func (k *Kubelet) createLease(ctx context.Context, now metav1.MicroTime) (*coordinationv1.Lease, error) {
	node, err := k.Client.CoreV1().Nodes().Get(ctx, k.Node.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return k.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: k.Node.Name, Namespace: corev1.NamespaceNodeLease, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID,
		}}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(k.Node.Name), LeaseDurationSeconds: ptr.To(int32(leaseDuration.Seconds())), RenewTime: &now},
	}, metav1.CreateOptions{})
}

// syncPod reports a pod Running and Ready, or confirms its deletion.
func (k *Kubelet) syncPod(ctx context.Context, pod *corev1.Pod) {
	pods := k.Client.CoreV1().Pods(pod.Namespace)
	if pod.DeletionTimestamp != nil {
		// The containers are "stopped" at once: confirm the deletion as a kubelet does.
		err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0)),
			Preconditions: metav1.NewUIDPreconditions(string(pod.UID))})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && ctx.Err() == nil {
			_, _ = fmt.Fprintf(k.Out, "[simulated-kubelet] delete pod %s/%s: %v\n", pod.Namespace, pod.Name, err)
		}
		k.mu.Lock()
		delete(k.podIPs, pod.UID)
		delete(k.refused, pod.UID)
		k.mu.Unlock()
		return
	}
	if pod.Status.Phase == corev1.PodRunning || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return
	}
	if err := k.sandbox(ctx, pod); err != nil {
		k.sandboxFailed(ctx, pod, err)
		return
	}
	now := metav1.Now()
	p := pod.DeepCopy()
	p.Status.Phase = corev1.PodRunning
	p.Status.HostIP = k.NodeIP.String()
	p.Status.HostIPs = []corev1.HostIP{{IP: p.Status.HostIP}}
	ip := p.Status.HostIP
	if !p.Spec.HostNetwork {
		ip = k.podIP(p.UID)
	}
	p.Status.PodIP, p.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	p.Status.StartTime = &now
	p.Status.Conditions = nil
	for _, t := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	p.Status.ContainerStatuses = nil
	for _, c := range p.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image, Ready: true, Started: ptr.To(true),
			ContainerID: "simulated://" + string(p.UID) + "/" + c.Name,
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	if _, err := pods.UpdateStatus(ctx, p,
		metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && ctx.Err() == nil {
		_, _ = fmt.Fprintf(k.Out, "[simulated-kubelet] pod %s/%s status: %v\n", pod.Namespace, pod.Name, err)
		return
	}
	k.startCloudNodeManager(ctx, pod)
}

// startCloudNodeManager runs simcloud's simulated cloud-node-manager for a pod of its
// DaemonSets that the scheduler bound to this node, once, with the pod's service account's
// token (as the kubelet mounts it) and --wait-routes as the pod's command line says.
func (k *Kubelet) startCloudNodeManager(ctx context.Context, pod *corev1.Pod) {
	if k.Config == nil || k.MetadataEndpoint == "" || pod.Namespace != simcloud.Namespace || !slices.ContainsFunc(pod.OwnerReferences,
		func(o metav1.OwnerReference) bool {
			return o.Kind == "DaemonSet" && slices.Contains(simcloud.DaemonSets, o.Name)
		}) {
		return
	}
	k.mu.Lock()
	started := k.cloudNodeManager != ""
	k.cloudNodeManager = pod.UID
	k.mu.Unlock()
	if started {
		return
	}
	tr, err := k.Client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, pod.Spec.ServiceAccountName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600),
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}},
	}, metav1.CreateOptions{})
	if err != nil {
		_, _ = fmt.Fprintf(k.Out, "[simulated-kubelet] token of pod %s/%s: %v\n", pod.Namespace, pod.Name, err)
		return
	}
	cfg := rest.AnonymousClientConfig(k.Config)
	cfg.BearerToken = tr.Status.Token
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		_, _ = fmt.Fprintf(k.Out, "[simulated-kubelet] cloud-node-manager client: %v\n", err)
		return
	}
	var args []string
	for _, c := range pod.Spec.Containers {
		args = append(append(args, c.Command...), c.Args...)
	}
	nm := &simcloud.NodeManager{Client: client, NodeName: k.Node.Name, MetadataEndpoint: k.MetadataEndpoint,
		WaitRoutes: slices.Contains(args, "--wait-routes=true"), Out: k.Out}
	go nm.Run(ctx)
}

// podIP hands out addresses from the node's pod CIDR, past the l2bridge gateway and host endpoint.
func (k *Kubelet) podIP(uid types.UID) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if ip, ok := k.podIPs[uid]; ok {
		return ip
	}
	if !k.podCIDR.IsValid() {
		return k.NodeIP.String() // no pod network yet: as a host-network pod
	}
	a, err := ipam.Nth(k.podCIDR, k.next)
	if err != nil {
		k.next = 3
		a, _ = ipam.Nth(k.podCIDR, k.next)
	}
	k.next++
	k.podIPs[uid] = a.String()
	return a.String()
}
