package azureccm

import (
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/kubewin/kubewin/provider/internal/kubeobjects"
)

// ServicePolicy is the ValidatingAdmissionPolicy that refuses, when a LoadBalancer Service is
// created or updated, an annotation value cloud-controller-manager would refuse. The cloud
// provider reports such a value only as an event on the Service, whose load balancer then never
// comes; the API server refuses it at `kubectl apply` instead, naming the annotation, the value
// and what the cloud provider accepts. A value the Service already had is let through on
// update, so that a Service made before the policy can still be changed and deleted (the cloud
// provider updates its finalizers).
//
// The checks are those cloud-provider-azure makes of the values alone, before it calls Azure,
// the same from v1.34.9 to v1.36.5 and on its main branch (the 1.37 line), where they apply
// whatever the cloud configuration (kubewin's has one Standard load balancer and per-Service
// health probes). A check that applies to some Services only is made only where it surely
// applies: the policy never refuses what the cloud provider accepts.
const ServicePolicy = "kubewin-azure-service-annotations"

// Annotations the policy checks (pkg/consts/consts.go).
const (
	annotationIdleTimeout   = "service.beta.kubernetes.io/azure-load-balancer-tcp-idle-timeout"
	annotationProbeInterval = "service.beta.kubernetes.io/azure-load-balancer-health-probe-interval"
	annotationProbeCount    = "service.beta.kubernetes.io/azure-load-balancer-health-probe-num-of-probe"
	annotationAllowedRanges = "service.beta.kubernetes.io/azure-allowed-ip-ranges"
	annotationSourceRanges  = "service.beta.kubernetes.io/load-balancer-source-ranges"
)

// annotationCheck is one validation: the annotations whose values it reads and, in CEL, what
// else it reads changed (a Service none of them changed on update is let through), the CEL
// expression that holds for what the cloud provider accepts, and the message's CEL expression.
type annotationCheck struct {
	reads                       []string
	otherChanged, valid, reason string
}

// validPrefix holds for a CIDR the cloud provider reads as a source range: trimmed, parsed by
// netip.ParsePrefix and masked (pkg/util/iputil/prefix.go:38-48 ParsePrefix). Kubernetes' CEL
// isCIDR parses with netip.ParsePrefix too, refusing IPv4-mapped IPv6 and zones.
func validPrefix(e string) string {
	return fmt.Sprintf("isCIDR(%s.trim()) && cidr(%s.trim()).masked() == cidr(%s.trim())", e, e, e)
}

// sourceRangesExpression is spec.loadBalancerSourceRanges of object, or an empty list.
func sourceRangesExpression(object string) string {
	return fmt.Sprintf("(has(%s.spec.loadBalancerSourceRanges) ? %s.spec.loadBalancerSourceRanges : [])", object, object)
}

// value is the CEL expression of an annotation's value, trimmed as the cloud provider trims it
// before it parses an integer (pkg/consts/helpers.go extractInt32FromString).
func value(name string) string { return fmt.Sprintf("variables.annotations[%q].trim()", name) }

// isSet is the CEL expression that holds when the Service has the annotation.
func isSet(name string) string { return fmt.Sprintf("%q in variables.annotations", name) }

// wholeNumber holds for a value strconv.ParseInt(v, 10, 32) reads (an optional sign, decimal
// digits, leading zeros; nine digits at most after them here, which every bound below is within).
func wholeNumber(v string) string { return v + ".matches('^[+-]?0*[0-9]{1,9}$')" }

// inRange holds when the Service has no annotation name, or a whole number in it from lo to hi
// (no upper bound when hi is negative).
func inRange(name string, lo, hi int) string {
	v := value(name)
	bounds := fmt.Sprintf("int(%s) >= %d", v, lo)
	if hi >= 0 {
		bounds += fmt.Sprintf(" && int(%s) <= %d", v, hi)
	}
	return fmt.Sprintf("!(%s) || (%s && %s)", isSet(name), wholeNumber(v), bounds)
}

// message is a refusal's CEL message: the annotation, its value, what the cloud provider
// accepts, and the fix.
func message(name, accepts string) string {
	return fmt.Sprintf(`'annotation %s: "' + variables.annotations[%q] + '" is not %s: the Azure cloud provider would refuse the `+
		`Service and make no load balancer for it. Write %s, or remove the annotation for the cloud provider default.'`,
		name, name, accepts, accepts)
}

// annotationChecks are the policy's validations; each cites where cloud-provider-azure makes
// the check (its main branch; v1.34.9's lines differ by a few).
var annotationChecks = []annotationCheck{
	{
		// pkg/provider/azure_loadbalancer.go:3340-3354 getExpectedLoadBalancingRulePropertiesForPort:
		// an integer from 4 to 100 (minutes), made for every port's load-balancing rule.
		reads:  []string{annotationIdleTimeout},
		valid:  inRange(annotationIdleTimeout, 4, 100),
		reason: message(annotationIdleTimeout, "a whole number of minutes from 4 to 100"),
	},
	{
		// pkg/provider/azure_loadbalancer_healthprobe.go:227-251: at least 5 (seconds).
		reads:        []string{annotationProbeInterval},
		otherChanged: "!variables.oldProbed",
		valid:        "!variables.probed || " + inRange(annotationProbeInterval, 5, -1),
		reason:       message(annotationProbeInterval, "a whole number of seconds, 5 or more"),
	},
	{
		// azure_loadbalancer_healthprobe.go:256-280: at least 2.
		reads:        []string{annotationProbeCount},
		otherChanged: "!variables.oldProbed",
		valid:        "!variables.probed || " + inRange(annotationProbeCount, 2, -1),
		reason:       message(annotationProbeCount, "a whole number, 2 or more"),
	},
	{
		// azure_loadbalancer_healthprobe.go:217-220: interval × number of probes below 120,
		// with the defaults 5 and 2 (pkg/consts/consts.go HealthProbeDefault*). The cloud
		// provider multiplies in 32 bits, so products that wrap pass it; Azure refuses them.
		reads:        []string{annotationProbeInterval, annotationProbeCount},
		otherChanged: "!variables.oldProbed",
		valid:        "!variables.probed || !variables.probeNumbers || variables.probeInterval * variables.probeCount < 120",
		reason: fmt.Sprintf(`'annotations %s and %s: ' + string(variables.probeInterval) + ' seconds times ' + `+
			`string(variables.probeCount) + ' probes is not below 120: the Azure cloud provider would refuse the Service and make no `+
			`load balancer for it. Lower either (their defaults are 5 seconds and 2 probes).'`, annotationProbeInterval, annotationProbeCount),
	},
	{
		// pkg/provider/loadbalancer/accesscontrol.go:84-107 and configuration.go:58-118: source
		// ranges both in the spec and in either annotation (comma-separated), a valid prefix in
		// each, are refused (ErrSetBothLoadBalancerSourceRangesAndAllowedIPRanges).
		reads:        []string{annotationAllowedRanges, annotationSourceRanges},
		otherChanged: fmt.Sprintf("%s != %s", sourceRangesExpression("oldObject"), sourceRangesExpression("object")),
		valid: fmt.Sprintf("!%s.exists(e, %s) || ![%q, %q].exists(k, k in variables.annotations && "+
			"variables.annotations[k].trim().split(',').exists(e, %s))", sourceRangesExpression("object"), validPrefix("e"),
			annotationAllowedRanges, annotationSourceRanges, validPrefix("e")),
		reason: fmt.Sprintf(`'spec.loadBalancerSourceRanges and annotation %s (or %s) both restrict the sources of the load balancer: `+
			`the Azure cloud provider refuses a Service with both, and makes no load balancer for it. Keep the ranges in one of them.'`,
			annotationAllowedRanges, annotationSourceRanges),
	},
}

// probedExpression is the CEL expression, over a Service and its annotations, that holds when
// the cloud provider surely makes the Service's health probes from the two probe annotations:
// always with externalTrafficPolicy Local (its health check node port:
// azure_loadbalancer.go:3187-3193), else for a TCP port (azure_loadbalancer_healthprobe.go:56-58).
// Left out, where it may not: a Service with per-port annotations (port_<p>_..., which take
// precedence or skip the port), one asking for a private link service (which may skip the node
// port's probe) and one with high-availability ports (whose probe errors are ignored:
// azure_loadbalancer.go:3229-3235).
func probedExpression(annotations, object string) string {
	return strings.NewReplacer("ANNOTATIONS", annotations, "OBJECT", object).Replace(
		`!ANNOTATIONS.exists(k, k.startsWith('service.beta.kubernetes.io/port_')) && ` +
			`!ANNOTATIONS.exists(k, k in ['service.beta.kubernetes.io/azure-pls-create', ` +
			`'service.beta.kubernetes.io/azure-load-balancer-enable-high-availability-ports'] && ANNOTATIONS[k].trim().lowerAscii() == 'true') && ` +
			`((has(OBJECT.spec.externalTrafficPolicy) && OBJECT.spec.externalTrafficPolicy == 'Local') || ` +
			`OBJECT.spec.ports.exists(p, !has(p.protocol) || p.protocol == 'TCP'))`)
}

// servicePolicyObjects are the policy and its binding.
func servicePolicyObjects() []runtime.Object {
	number := func(name, def string) string {
		return fmt.Sprintf("%s ? int(%s) : %s", isSet(name), value(name), def)
	}
	var validations []admissionregistrationv1.Validation
	for _, c := range annotationChecks {
		// New to the check: a create, a Service that was not a load balancer of the cloud
		// provider's, or a change of what the check reads.
		changed := "request.operation != 'UPDATE' || !variables.wasChecked"
		if c.otherChanged != "" {
			changed += " || " + c.otherChanged
		}
		for _, name := range c.reads {
			changed += fmt.Sprintf(" || (%q in variables.oldAnnotations) != (%s) || (%s && variables.oldAnnotations[%q] != variables.annotations[%q])",
				name, isSet(name), isSet(name), name, name)
		}
		validations = append(validations, admissionregistrationv1.Validation{
			Expression:        fmt.Sprintf("!(%s) || (%s)", changed, c.valid),
			MessageExpression: c.reason,
			Reason:            ptr.To(metav1.StatusReasonInvalid),
		})
	}
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: kubeobjects.ClusterMeta(ServicePolicy),
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"services"}},
				},
			}}},
			// The cloud provider's service controller leaves Services of another load balancer
			// class alone (k8s.io/cloud-provider controllers/service wantsLoadBalancer).
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "load-balancer",
				Expression: `object.spec.type == 'LoadBalancer' && !has(object.spec.loadBalancerClass)`}},
			Variables: []admissionregistrationv1.Variable{
				{Name: "annotations", Expression: `has(object.metadata.annotations) ? object.metadata.annotations : {}`},
				{Name: "oldAnnotations", Expression: `oldObject != null && has(oldObject.metadata.annotations) ? oldObject.metadata.annotations : {}`},
				{Name: "probed", Expression: probedExpression("variables.annotations", "object")},
				{Name: "wasChecked", Expression: `oldObject != null && oldObject.spec.type == 'LoadBalancer' && !has(oldObject.spec.loadBalancerClass)`},
				{Name: "oldProbed", Expression: "variables.wasChecked && (" + probedExpression("variables.oldAnnotations", "oldObject") + ")"},
				{Name: "probeNumbers", Expression: fmt.Sprintf("(!(%s) || %s) && (!(%s) || %s)",
					isSet(annotationProbeInterval), wholeNumber(value(annotationProbeInterval)),
					isSet(annotationProbeCount), wholeNumber(value(annotationProbeCount)))},
				{Name: "probeInterval", Expression: fmt.Sprintf("variables.probeNumbers ? (%s) : 0", number(annotationProbeInterval, "5"))},
				{Name: "probeCount", Expression: fmt.Sprintf("variables.probeNumbers ? (%s) : 0", number(annotationProbeCount, "2"))},
			},
			Validations: validations,
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: kubeobjects.ClusterMeta(ServicePolicy),
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        ServicePolicy,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	return []runtime.Object{policy, binding}
}
