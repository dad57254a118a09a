package azureccm

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubewin/kubewin/internal/kubeversion"
	"github.com/kubewin/kubewin/internal/testkit/testenv"
)

// The Service policy, applied to a real API server: LoadBalancer Services with annotation values
// the cloud provider refuses are refused at creation with a message naming the annotation, the
// value and the fix, and every value the cloud provider accepts is accepted (the same values on
// a ClusterIP Service too, which the cloud provider ignores). A Service that had a refused value
// before the policy can still be changed and deleted, but not given another refused value.
func TestServicePolicy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs := testenv.AdminClient(t, cp)
	services := cs.CoreV1().Services("default")
	seq := 0
	create := func(typ corev1.ServiceType, annotations map[string]string, edit func(*corev1.Service)) error {
		seq++
		s := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("policy-%d", seq), Annotations: annotations},
			Spec:       corev1.ServiceSpec{Type: typ, Ports: []corev1.ServicePort{{Port: 80}}, Selector: map[string]string{"app": "web"}},
		}
		if edit != nil {
			edit(s)
		}
		_, err := services.Create(ctx, s, metav1.CreateOptions{})
		if err == nil {
			_ = services.Delete(ctx, s.Name, metav1.DeleteOptions{})
		}
		return err
	}
	bad := map[string]string{annotationIdleTimeout: "3"}
	// until waits for the API server's policy plugin to see the policy (refuse) or its absence.
	until := func(refuse bool) {
		t.Helper()
		for {
			err := create(corev1.ServiceTypeLoadBalancer, bad, nil)
			if (err != nil) == refuse {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("the policy's refusal is %v after 2 minutes, want %v: %v", err != nil, refuse, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	// Services made before the policy, with values the cloud provider refuses (or would refuse
	// once they are load balancers, or probed): each holds a finalizer, as the cloud provider's
	// load balancer cleanup does.
	err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, ServicePolicy, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	until(false)
	const finalizer = "service.kubernetes.io/load-balancer-cleanup"
	before := map[string]*corev1.Service{}
	for name, edit := range map[string]func(*corev1.Service){
		"idle":   func(s *corev1.Service) { s.Annotations = map[string]string{annotationIdleTimeout: "200"} },
		"probes": func(s *corev1.Service) { s.Annotations = map[string]string{annotationProbeCount: "24"} },
		"ranges": func(s *corev1.Service) {
			s.Annotations, s.Spec.LoadBalancerSourceRanges = map[string]string{annotationAllowedRanges: "192.168.0.0/16"}, []string{"10.0.0.0/8"}
		},
		"cluster-ip": func(s *corev1.Service) {
			s.Annotations, s.Spec.Type = map[string]string{annotationIdleTimeout: "200"}, corev1.ServiceTypeClusterIP
		},
		"udp": func(s *corev1.Service) {
			s.Annotations, s.Spec.Ports[0].Protocol = map[string]string{annotationProbeInterval: "4"}, corev1.ProtocolUDP
		},
	} {
		s := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "before-" + name, Finalizers: []string{finalizer}},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80}}},
		}
		edit(s)
		if before[name], err = services.Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	v, err := ForMinor(kubeversion.NewestMinor)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Objects(Config{Versions: v, ClusterName: "acs", ClusterCIDR: "10.244.0.0/16", WindowsServer: "https://10.240.255.4:6443",
		CACert: []byte(testCA)})
	if err != nil {
		t.Fatal(err)
	}
	if err := Apply(ctx, cs, objs); err != nil {
		t.Fatal(err)
	}
	until(true)

	local := func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal }
	udp := func(s *corev1.Service) { s.Spec.Ports[0].Protocol = corev1.ProtocolUDP }
	ranges := func(r ...string) func(*corev1.Service) {
		return func(s *corev1.Service) { s.Spec.LoadBalancerSourceRanges = r }
	}
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		edit        func(*corev1.Service)
		refused     string // what the message says, "" when accepted
	}{
		{"idle timeout 4", map[string]string{annotationIdleTimeout: "4"}, nil, ""},
		{"idle timeout 100, spaces and sign", map[string]string{annotationIdleTimeout: " +100 "}, nil, ""},
		{"idle timeout 0030", map[string]string{annotationIdleTimeout: "0030"}, nil, ""},
		{"idle timeout 0000000030", map[string]string{annotationIdleTimeout: "0000000030"}, nil, ""},
		{"idle timeout 3, another load balancer class", map[string]string{annotationIdleTimeout: "3"},
			func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr.To("example.com/other") }, ""},
		{"idle timeout 3", map[string]string{annotationIdleTimeout: "3"}, nil, `tcp-idle-timeout: "3" is not a whole number of minutes from 4 to 100`},
		{"idle timeout 101", map[string]string{annotationIdleTimeout: "101"}, nil, `"101" is not a whole number of minutes from 4 to 100`},
		{"idle timeout 5m", map[string]string{annotationIdleTimeout: "5m"}, nil, `"5m" is not a whole number`},
		{"idle timeout empty", map[string]string{annotationIdleTimeout: ""}, nil, `"" is not a whole number`},
		{"idle timeout huge", map[string]string{annotationIdleTimeout: "99999999999999999999"}, nil, "is not a whole number"},
		{"interval 5", map[string]string{annotationProbeInterval: "5"}, nil, ""},
		{"interval 4", map[string]string{annotationProbeInterval: "4"}, nil, `health-probe-interval: "4" is not a whole number of seconds, 5 or more`},
		{"interval 4, UDP only", map[string]string{annotationProbeInterval: "4"}, udp, ""},
		{"interval 4, UDP only, local traffic", map[string]string{annotationProbeInterval: "4"}, func(s *corev1.Service) { udp(s); local(s) },
			"5 or more"},
		{"interval 4, per-port annotation", map[string]string{annotationProbeInterval: "4",
			"service.beta.kubernetes.io/port_80_health-probe_interval": "10"}, nil, ""},
		{"interval 4, high-availability ports", map[string]string{annotationProbeInterval: "4",
			"service.beta.kubernetes.io/azure-load-balancer-enable-high-availability-ports": "True"}, nil, ""},
		{"probes 1", map[string]string{annotationProbeCount: "1"}, nil, `num-of-probe: "1" is not a whole number, 2 or more`},
		{"probes 23 at 5 s", map[string]string{annotationProbeCount: "23"}, nil, ""},
		{"probes 24 at 5 s", map[string]string{annotationProbeCount: "24"}, nil, "5 seconds times 24 probes is not below 120"},
		{"interval 60 with 2 probes", map[string]string{annotationProbeInterval: "60"}, nil, "60 seconds times 2 probes is not below 120"},
		{"interval 59 with 2 probes", map[string]string{annotationProbeInterval: "59"}, nil, ""},
		{"health probe protocol anything", map[string]string{"service.beta.kubernetes.io/azure-load-balancer-health-probe-protocol": "quic"}, nil, ""},
		{"internal True", map[string]string{"service.beta.kubernetes.io/azure-load-balancer-internal": "True"}, nil, ""},
		{"source ranges in the spec and allowed ranges", map[string]string{annotationAllowedRanges: "192.168.0.0/16"}, ranges("10.0.0.0/8"),
			"both restrict the sources"},
		{"source ranges in the spec and the annotation", map[string]string{annotationSourceRanges: " 10.1.0.0/16 , nonsense"},
			ranges("10.0.0.0/8"), "both restrict the sources"},
		{"source ranges in the spec, unmasked allowed ranges", map[string]string{annotationAllowedRanges: "10.0.0.1/8,"}, ranges("10.0.0.0/8"), ""},
		{"source ranges in the spec only", nil, ranges("10.0.0.0/8", "2001:db8::/32"), ""},
		{"allowed ranges only", map[string]string{annotationAllowedRanges: "192.168.0.0/16"}, nil, ""},
	} {
		err := create(corev1.ServiceTypeLoadBalancer, tc.annotations, tc.edit)
		switch {
		case tc.refused == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused) ||
			!strings.Contains(err.Error(), "Write ") && !strings.Contains(err.Error(), "Lower either") && !strings.Contains(err.Error(), "Keep the ranges")):
			t.Errorf("%s: %v, want a refusal saying %q and the fix", tc.name, err, tc.refused)
		}
		shape := corev1.Service{Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{}}}}
		if tc.edit != nil {
			tc.edit(&shape)
		}
		if shape.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal || len(shape.Spec.LoadBalancerSourceRanges) > 0 ||
			shape.Spec.LoadBalancerClass != nil {
			continue // only for externally reachable Services
		}
		if err := create(corev1.ServiceTypeClusterIP, tc.annotations, tc.edit); err != nil {
			t.Errorf("%s: a ClusterIP Service is refused: %v", tc.name, err)
		}
	}

	// The Services made before the policy: a load balancer whose values are what they were
	// can still be changed and lose its finalizer (and so be deleted)...
	for _, name := range []string{"idle", "probes", "ranges"} {
		s := before[name]
		s.Labels = map[string]string{"changed": "yes"}
		if s, err = services.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Errorf("%s: a Service with the values it had before the policy cannot be changed: %v", name, err)
			continue
		}
		s.Finalizers = nil
		if _, err = services.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Errorf("%s: the cloud provider could not remove its finalizer: %v", name, err)
		}
	}
	// ...but is not given another refused value;
	idle, err := services.Get(ctx, "before-idle", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	idle.Annotations[annotationIdleTimeout] = "300"
	if _, err := services.Update(ctx, idle, metav1.UpdateOptions{}); err == nil || !strings.Contains(err.Error(), `"300"`) {
		t.Errorf("a Service was given another refused value: %v", err)
	}
	// a Service the check did not apply to is checked once it does: a ClusterIP Service made a
	// load balancer, a UDP one given a TCP port.
	ip := before["cluster-ip"]
	ip.Spec.Type = corev1.ServiceTypeLoadBalancer
	if _, err := services.Update(ctx, ip, metav1.UpdateOptions{}); err == nil || !strings.Contains(err.Error(), `"200"`) {
		t.Errorf("a ClusterIP Service with a refused value was made a load balancer: %v", err)
	}
	probeless := before["udp"]
	probeless.Spec.Ports = append(probeless.Spec.Ports, corev1.ServicePort{Name: "tcp", Port: 81, Protocol: corev1.ProtocolTCP})
	probeless.Spec.Ports[0].Name = "udp"
	if _, err := services.Update(ctx, probeless, metav1.UpdateOptions{}); err == nil || !strings.Contains(err.Error(), "5 or more") {
		t.Errorf("a Service whose probe interval was not read was given a TCP port: %v", err)
	}
	for name, s := range before {
		if s, err := services.Get(ctx, s.Name, metav1.GetOptions{}); err == nil && len(s.Finalizers) > 0 {
			s.Finalizers = nil
			if _, err := services.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
		if err := services.Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
