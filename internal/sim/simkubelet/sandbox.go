package simkubelet

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kubewin/kubewin/internal/nodecmd"
)

// SandboxRuntime is the container runtime's answer to a pod sandbox asked with a runtime
// handler (CRI RunPodSandbox): nil when the runtime would start it, else the runtime's error.
// The simulated kubelet starts no sandbox, but it refuses what the node's runtime would refuse.
type SandboxRuntime func(handler string) error

// WindowsContainerd is containerd on Windows. Its runtime handlers are runhcs-wcow-process (the
// default) and runhcs-wcow-hypervisor: containerd's Windows defaults (DefaultConfig in
// pkg/cri/config/config_windows.go in 1.7, internal/cri/config/config_windows.go in 2.x), which
// kubewin's configuration restates. Any other handler is refused as containerd's CRI plugin
// refuses it (getSandboxRuntime: "no runtime for %q is configured", wrapped "failed to get
// sandbox runtime"). A Hyper-V sandbox needs the Hyper-V feature, which the bake installs only
// for an image with Hyper-V isolation: without it the compute service cannot start the utility
// VM. hcsshim names the operation "hcs::CreateComputeSystem" and the compute system before the
// error (internal/hcs/system.go, SystemError in internal/hcs/errors.go); Windows' message is
// moby/moby#40792's.
func WindowsContainerd(hyperV bool) SandboxRuntime {
	return func(handler string) error {
		switch handler {
		case "", nodecmd.ProcessHandler:
			return nil
		case nodecmd.HyperVHandler:
			if !hyperV {
				return errors.New("hcs::CreateComputeSystem sandbox: The virtual machine could not be started because a required feature is not installed")
			}
			return nil
		}
		return noRuntime(handler)
	}
}

// noRuntime is containerd's refusal of a handler it has no runtime for.
func noRuntime(handler string) error {
	return fmt.Errorf("failed to get sandbox runtime: no runtime for %q is configured", handler)
}

// WindowsDocker is Docker Engine behind cri-dockerd, which takes no runtime handler but its own
// name (cri-dockerd core/sandbox_helpers.go RunPodSandbox: "RuntimeHandler %q not supported").
func WindowsDocker() SandboxRuntime {
	return func(handler string) error {
		if handler != "" && handler != "docker" {
			return fmt.Errorf("RuntimeHandler %q not supported", handler)
		}
		return nil
	}
}

// LinuxContainerd is containerd on Linux with its default configuration: one runtime handler,
// runc (DefaultConfig in containerd's config_unix.go).
func LinuxContainerd() SandboxRuntime {
	return func(handler string) error {
		if handler != "" && handler != "runc" {
			return noRuntime(handler)
		}
		return nil
	}
}

// sandbox resolves the pod's RuntimeClass to its handler, as the kubelet does
// (pkg/kubelet/runtimeclass LookupRuntimeHandler: no RuntimeClass is the empty handler; a
// missing one is the API's NotFound error as it is, any other error wrapped), and asks the
// runtime for a sandbox with it. The runtime's refusal reaches the kubelet over CRI's gRPC, as a
// status error of code Unknown (containerd returns plain errors from RunPodSandbox).
func (k *Kubelet) sandbox(ctx context.Context, pod *corev1.Pod) error {
	handler := ""
	if name := ptr.Deref(pod.Spec.RuntimeClassName, ""); name != "" {
		rc, err := k.Client.NodeV1().RuntimeClasses().Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return err
		case err != nil:
			return fmt.Errorf("failed to lookup RuntimeClass %s: %w", name, err)
		}
		handler = rc.Handler
	}
	runtime := k.Sandbox
	if runtime == nil {
		runtime = WindowsContainerd(false)
	}
	if err := runtime(handler); err != nil {
		return fmt.Errorf("rpc error: code = Unknown desc = %w", err)
	}
	return nil
}

// sandboxFailed reports a pod whose sandbox the runtime refused as the kubelet does: a Warning
// event FailedCreatePodSandBox on the pod (kuberuntime_manager.go SyncPod, "Failed to create
// pod sandbox: %v") and the pod Pending with its containers waiting in ContainerCreating. The
// kubelet tries again at every sync of the pod; the same refusal is reported once.
func (k *Kubelet) sandboxFailed(ctx context.Context, pod *corev1.Pod, cause error) {
	k.mu.Lock()
	reported := k.refused[pod.UID] == cause.Error()
	k.mu.Unlock()
	if reported {
		return
	}
	now := metav1.Now()
	msg := fmt.Sprintf("Failed to create pod sandbox: %v", cause)
	_, _ = fmt.Fprintf(k.Out, "[simulated-kubelet] pod %s/%s: %s\n", pod.Namespace, pod.Name, msg)
	p := pod.DeepCopy()
	p.Status.Phase = corev1.PodPending
	p.Status.HostIP = k.NodeIP.String()
	p.Status.HostIPs = []corev1.HostIP{{IP: p.Status.HostIP}}
	p.Status.StartTime = &now
	cond := func(t corev1.PodConditionType, s corev1.ConditionStatus, reason string) corev1.PodCondition {
		return corev1.PodCondition{Type: t, Status: s, Reason: reason, LastTransitionTime: now}
	}
	p.Status.Conditions = []corev1.PodCondition{cond(corev1.PodScheduled, corev1.ConditionTrue, ""),
		cond(corev1.PodInitialized, corev1.ConditionTrue, ""), cond(corev1.PodReadyToStartContainers, corev1.ConditionFalse, ""),
		cond(corev1.ContainersReady, corev1.ConditionFalse, "ContainersNotReady"), cond(corev1.PodReady, corev1.ConditionFalse, "ContainersNotReady")}
	p.Status.ContainerStatuses = nil
	for _, c := range p.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}})
	}
	if _, err := k.Client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		// A conflict or a deleted pod is synced again: the refusal is reported then, or never.
		if !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && ctx.Err() == nil {
			_, _ = fmt.Fprintf(k.Out, "[simulated-kubelet] pod %s/%s status: %v\n", pod.Namespace, pod.Name, err)
		}
		return
	}
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: pod.Name + ".", Namespace: pod.Namespace},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
			ResourceVersion: pod.ResourceVersion},
		Reason: "FailedCreatePodSandBox", Message: msg, Type: corev1.EventTypeWarning, Count: 1, FirstTimestamp: now, LastTimestamp: now,
		Source: corev1.EventSource{Component: "kubelet", Host: k.Node.Name}, ReportingController: "kubelet", ReportingInstance: k.Node.Name,
	}
	if _, err := k.Client.CoreV1().Events(pod.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		if ctx.Err() == nil {
			_, _ = fmt.Fprintf(k.Out, "[simulated-kubelet] event of pod %s/%s: %v\n", pod.Namespace, pod.Name, err)
		}
		return
	}
	k.mu.Lock()
	if k.refused == nil {
		k.refused = map[types.UID]string{}
	}
	k.refused[pod.UID] = cause.Error()
	k.mu.Unlock()
}
