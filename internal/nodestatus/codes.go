// Package nodestatus is how a joining node tells its provisioner what it is doing: nodeboot
// writes a report into a ConfigMap per node (namespace kubewin-system, name nodeboot-<node>),
// with the bootstrap token before the node has credentials and with the node's own credentials
// afterwards; the provider reads it to wait for the node or fail naming node, phase and code.
// The package holds the report format and the catalogue of error codes; package nodeaccess
// grants the access.
package nodestatus

import (
	"errors"
	"fmt"
	"slices"
)

// Code identifies a failure kind. Codes are stable: the provider and users match on them.
type Code string

// CodeInfo documents a code.
type CodeInfo struct {
	Code    Code
	Phase   string
	Meaning string
	Remedy  string
}

// The catalogue. docs/nodeboot-errors.md is generated from it.
var Catalogue = []CodeInfo{
	{CodeConfigInvalid, "preflight", "The NodeConfig in custom data is missing, cannot be decoded or is invalid.",
		"Fix the fields the message names; the provider validates them at plan time, so this points at a hand-written or truncated NodeConfig."},
	{CodeManifestInvalid, "preflight", "The image manifest is missing or invalid, or does not fit the NodeConfig (runtime, version skew).",
		"Rebuild the image with the kubewin Packer plugin, or pick an image whose runtime and Kubernetes version fit the cluster."},
	{CodeOSBuildMismatch, "preflight", "The machine's Windows build differs from the build the image was baked for, so the pause image cannot run.",
		"Create the node from the image baked for this Windows Server release."},
	{CodePayloadCorrupt, "preflight", "A file of the image's payload is missing or its sha256 differs from the image manifest.",
		"Rebuild the image; do not modify files under the payload directory."},
	{CodeRuntimeMissing, "preflight", "The container runtime the NodeConfig names is not installed or not running.",
		"Use an image baked with that runtime: the runtime comes from the image (a pool's local.image, azure.image_id's " +
			"kubewin.io/runtime tag or azure.image_manifest; a kubewin_windows_node's install.release). In a hand-written NodeConfig, " +
			"set runtime.name to the image's runtime."},
	{CodePortInUse, "preflight", "A port the kubelet needs (10250) is already in use.",
		"Stop the program holding the port, or create the node from a clean image."},
	{CodeClockSkew, "discovery", "The machine's clock differs from the API server's by more than 5 minutes (checked once the server is trusted); " +
		"certificates and tokens would be rejected.", "Fix time synchronisation on the machine (w32time) and retry."},
	{CodeAPIServerUnreachable, "discovery", "The API server endpoint cannot be reached (connection refused, timeout, no route).",
		"Check the endpoint the node was given (the kubewin_cluster's, or the provider's kubernetes.host; NodeConfig " +
			"cluster.apiServerEndpoint), network security rules and routes between the node and the control plane."},
	{CodeTokenNotFound, "discovery", "The cluster-info ConfigMap carries no signature for the token ID: the token expired, was deleted, or belongs to " +
		"another cluster.", "Mint a new bootstrap token for the pool (re-apply) and make sure the endpoint is the cluster that issued it."},
	{CodeTokenInvalid, "discovery", "The cluster-info signature does not verify with the token's secret.",
		"The token's secret is wrong: mint a new token for the pool."},
	{CodeCAPinMismatch, "discovery", "The cluster CA does not match any pinned hash: the endpoint is another cluster, or something intercepts the " +
		"connection.", "Check the CA the node pins (the provider's kubernetes.cluster_ca_certificate, or the kubewin_cluster's CA; " +
		"NodeConfig cluster.caCertHashes) against `kubeadm token create --print-join-command` on the control plane, and the endpoint."},
	{CodeClusterInfoInvalid, "discovery", "The cluster-info ConfigMap is missing or malformed.",
		"Run `kubeadm init phase bootstrap-token` on the control plane, or create the cluster with kubewin."},
	{CodeTLSBootstrapUnauthorized, "tls-bootstrap", "The API server rejected the bootstrap token while requesting the kubelet certificate.",
		"The token expired during the join: raise token_ttl (of the pool or the kubewin_windows_node) or re-apply to mint a new one."},
	{CodeTLSBootstrapForbidden, "tls-bootstrap", "The bootstrap token may not create certificate signing requests.",
		"Bind the system:node-bootstrapper ClusterRole to the token's groups (kubeadm init does this)."},
	{CodeCSRDenied, "tls-bootstrap", "The kubelet client certificate request was denied.",
		"Check the approver (kube-controller-manager csrapproving, or your own) and the CSR's events."},
	{CodeCSRTimeout, "tls-bootstrap", "The kubelet client certificate request was not signed in time.",
		"Make sure kube-controller-manager runs the csrsigning and csrapproving controllers and that auto-approval is bound for the token's groups."},
	{CodeRegisterFailed, "register", "The node could not create or read its Node object with its new credentials.",
		"Check that the Node authorizer and NodeRestriction are enabled and that no other node uses the same name."},
	{CodeNodeNameTaken, "register", "A Ready Node with this machine's name already exists: another live machine uses the name.",
		"Delete the stale Node (`kubectl delete node <name>`) if its machine is gone, or give this machine another computer name."},
	{CodePodCIDRTimeout, "network", "No pod CIDR was assigned to the node in time and the NodeConfig has no static one.",
		"Enable node IPAM (--allocate-node-cidrs) on the controller manager, or free room in the cluster CIDR (a kubewin_cluster's " +
			"cluster_cidr and node_cidr_mask_size). No Terraform attribute sets a static pod CIDR; a hand-written NodeConfig may set " +
			"node.podCIDR."},
	{CodeNetworkFailed, "network", "The HNS network or its host endpoint could not be created.",
		"See the message; on Windows check the adapter name (a kubewin_windows_node's interface_name; NodeConfig " +
			"network.interfaceName) and that the Containers feature is enabled."},
	{CodeKubeletConfigFailed, "kubelet-config", "The kubelet or kube-proxy configuration could not be rendered or written.",
		"See the message: it names the field or flag at fault."},
	{CodeServiceFailed, "services", "A node service (kubelet, kube-proxy, cri-dockerd) could not be installed or started.",
		"See the message and the service's log under C:\\var\\log\\kubernetes."},
	{CodeRoutesFailed, "routes", "Routes to the other nodes' pod CIDRs could not be programmed.",
		"See the message; check that the node may list Nodes and that IP forwarding is enabled on its NIC."},
	{CodeInternal, "", "An unexpected error.", "Report it with the nodeboot status output and logs."},
}

// Codes.
const (
	CodeConfigInvalid            Code = "ConfigInvalid"
	CodeManifestInvalid          Code = "ManifestInvalid"
	CodeOSBuildMismatch          Code = "OSBuildMismatch"
	CodePayloadCorrupt           Code = "PayloadCorrupt"
	CodeRuntimeMissing           Code = "RuntimeMissing"
	CodePortInUse                Code = "PortInUse"
	CodeClockSkew                Code = "ClockSkew"
	CodeAPIServerUnreachable     Code = "APIServerUnreachable"
	CodeTokenNotFound            Code = "TokenNotFound"
	CodeTokenInvalid             Code = "TokenInvalid"
	CodeCAPinMismatch            Code = "CAPinMismatch"
	CodeClusterInfoInvalid       Code = "ClusterInfoInvalid"
	CodeTLSBootstrapUnauthorized Code = "TLSBootstrapUnauthorized"
	CodeTLSBootstrapForbidden    Code = "TLSBootstrapForbidden"
	CodeCSRDenied                Code = "CSRDenied"
	CodeCSRTimeout               Code = "CSRTimeout"
	CodeRegisterFailed           Code = "RegisterFailed"
	CodeNodeNameTaken            Code = "NodeNameTaken"
	CodePodCIDRTimeout           Code = "PodCIDRTimeout"
	CodeNetworkFailed            Code = "NetworkFailed"
	CodeKubeletConfigFailed      Code = "KubeletConfigFailed"
	CodeServiceFailed            Code = "ServiceFailed"
	CodeRoutesFailed             Code = "RoutesFailed"
	CodeInternal                 Code = "Internal"
)

// Error is a failure with its code.
type Error struct {
	Code Code
	Err  error
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %v", e.Code, e.Err) }

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with code and a formatted message (%w wraps as in fmt.Errorf).
func Errorf(code Code, format string, args ...any) error {
	return &Error{Code: code, Err: fmt.Errorf(format, args...)}
}

// CodeOf returns the code of err, or CodeInternal when it carries none.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// Lookup returns the catalogue entry of a code.
func Lookup(c Code) (CodeInfo, bool) {
	for _, info := range Catalogue {
		if info.Code == c {
			return info, true
		}
	}
	return CodeInfo{}, false
}

// machineLevel are the codes of failures that lie with one machine — its clock, its network
// stack, its services, a transient error — which another machine from the same image and
// configuration is likely not to have. The others lie with the image, the configuration or
// the cluster, and fail again on any machine.
var machineLevel = []Code{CodeClockSkew, CodePortInUse, CodeAPIServerUnreachable, CodeRegisterFailed, CodeNetworkFailed,
	CodeKubeletConfigFailed, CodeServiceFailed, CodeRoutesFailed, CodeInternal}

// MachineLevel reports whether a failure with code c lies with the machine (see machineLevel).
func MachineLevel(c Code) bool { return slices.Contains(machineLevel, c) }
