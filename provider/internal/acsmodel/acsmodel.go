// Package acsmodel reads an acs-engine or aks-engine api model (apiVersion "vlabs", the
// `properties` of a ContainerService) into the settings of a kubewin cluster, its Windows pools
// and the Windows image they need. Every field of the vlabs types is handled one of four ways:
// mapped to a kubewin setting; ignored with a warning that names it (kubewin does that part its
// own way, or it does not matter to the cluster's behaviour); rejected with an error that names
// it, when ignoring it would change the cluster's behaviour; or, for secrets (passwords, service
// principal secrets, private keys), dropped with a warning that names the field, never its value,
// and what to use instead (the write-only attribute): the result, which Terraform stores, holds
// no secret. Unknown fields are warnings.
//
// The field list follows aks-engine's pkg/api/vlabs/types.go (the last release, which includes
// acs-engine's fields) and acs-engine's older names (servicePrincipalClientID,
// servicePrincipalClientSecret).
package acsmodel

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/ipam"
	"github.com/kubewin/kubewin/internal/kubeversion"
	"github.com/kubewin/kubewin/internal/winname"
)

// Cluster is the kubewin_cluster part of a model; nil and empty values mean "not in the model".
type Cluster struct {
	// Name is masterProfile.dnsPrefix made a cluster name.
	Name string
	// KubernetesVersion is the model's version when kubewin supports it ("1.37.1"), else "".
	KubernetesVersion string
	// OrchestratorVersion is what the model names (orchestratorVersion or orchestratorRelease).
	OrchestratorVersion                 string
	Location                            string
	ClusterCIDR, ServiceCIDR            string
	DNSPrefix                           string
	APIServerAccess                     string
	APIServerAuthorizedIPRanges         []string
	VNetCIDR                            string
	ControlPlaneSubnetID, AgentSubnetID string
	AdminUsername                       string
	SSHPublicKeys                       []string
	ControlPlanes                       Machines
	LinuxPool                           *Machines
	Tags                                map[string]string
	// MaxPods and WindowsKubeletArgs are kubernetesConfig's, for the Windows pools.
	MaxPods            int
	WindowsKubeletArgs map[string]string
}

// Machines are the control planes or the Linux pool.
type Machines struct {
	Count        int
	VMSize       string
	ImageID      string
	Zones        []string
	OSDiskSizeGB int
}

// WindowsPool is an agent pool of osType Windows.
type WindowsPool struct {
	Name, NodeNamePrefix string
	NodeCount            int
	VMSize               string
	ImageID              string
	SubnetID             string
	Zones                []string
	OSDiskSizeGB         int
	OSDiskCaching        string
	MaxPods              int
	Labels               map[string]string
	KubeletExtraArgs     map[string]string
	AdminUsername        string
	Priority             string
	MaxBidPrice          *float64
	AcceleratedNetwork   bool
	Tags                 map[string]string
}

// WindowsImage is what the Windows nodes' image must hold: settings for its Packer build.
type WindowsImage struct {
	// Publisher, Offer, SKU and Version are the base marketplace image.
	Publisher, Offer, SKU, Version string
	// SourceVHDURL is a VHD to start from instead.
	SourceVHDURL string
	// Runtime is containerd or docker; DockerVersion the Docker version for docker.
	Runtime, DockerVersion string
	// PauseImage is the pause (infra) container image.
	PauseImage string
	// HyperVIsolation: the image is to be baked with the kubewin-node provisioner's
	// hyperv_isolation (aks-engine's windowsRuntimes asked for Hyper-V isolation).
	HyperVIsolation bool
}

// Result is a converted model.
type Result struct {
	Cluster      Cluster
	WindowsPools []WindowsPool
	WindowsImage WindowsImage
	// Warnings name every field that was ignored, and why.
	Warnings []string
}

// Error is a model kubewin cannot take: it lists every field it rejects or refuses.
type Error struct{ Problems []string }

func (e *Error) Error() string {
	return "the api model cannot be converted:\n  - " + strings.Join(e.Problems, "\n  - ")
}

// converter walks the model, remembering what it read.
type converter struct {
	res      Result
	problems []string
	// windowsAdmin and windowsImageID are windowsProfile's, for every Windows pool.
	windowsAdmin, windowsImageID string
}

func (c *converter) warn(path, format string, args ...any) {
	c.res.Warnings = append(c.res.Warnings, path+": "+fmt.Sprintf(format, args...))
}

func (c *converter) reject(path, format string, args ...any) {
	c.problems = append(c.problems, path+": "+fmt.Sprintf(format, args...))
}

// object is a JSON object whose members are taken one by one; what is left is unknown.
type object struct {
	path string
	m    map[string]any
}

func (o *object) take(key string) (any, string) {
	v, ok := o.m[key]
	if !ok {
		// The vlabs JSON names are matched case-insensitively, as encoding/json does.
		for k, kv := range o.m {
			if strings.EqualFold(k, key) {
				v, ok, key = kv, true, k
				break
			}
		}
	}
	if !ok {
		return nil, o.path + "." + key
	}
	delete(o.m, key)
	return v, o.path + "." + key
}

func (c *converter) unknown(o *object) {
	for _, k := range sortedKeys(o.m) {
		if !isUnset(o.m[k]) {
			c.warn(o.path+"."+k, "not a field of the vlabs api model kubewin knows: ignored")
		}
	}
}

func sortedKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// isUnset reports whether a value is absent or empty: null, "", 0, false, [] or {}.
func isUnset(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case json.Number:
		f, err := x.Float64()
		return err == nil && f == 0
	case bool:
		return !x
	case []any:
		return len(x) == 0
	case map[string]any:
		for _, e := range x {
			if !isUnset(e) {
				return false
			}
		}
		return true
	}
	return false
}

func (c *converter) objectAt(v any, path string) *object {
	switch x := v.(type) {
	case nil:
		return &object{path: path, m: map[string]any{}}
	case map[string]any:
		return &object{path: path, m: x}
	}
	c.reject(path, "must be a JSON object")
	return &object{path: path, m: map[string]any{}}
}

func (c *converter) str(v any, path string) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	}
	c.reject(path, "must be a string")
	return ""
}

func (c *converter) num(v any, path string) int {
	switch x := v.(type) {
	case nil:
		return 0
	case json.Number:
		n, err := strconv.Atoi(x.String())
		if err == nil {
			return n
		}
	}
	c.reject(path, "must be a whole number")
	return 0
}

func (c *converter) boolean(v any, path string) *bool {
	switch x := v.(type) {
	case nil:
		return nil
	case bool:
		return &x
	}
	c.reject(path, "must be true or false")
	return nil
}

func (c *converter) strings(v any, path string) []string {
	list, ok := v.([]any)
	if v == nil {
		return nil
	}
	if !ok {
		c.reject(path, "must be a list of strings")
		return nil
	}
	var out []string
	for i, e := range list {
		out = append(out, c.str(e, fmt.Sprintf("%s[%d]", path, i)))
	}
	return out
}

func (c *converter) stringMap(v any, path string) map[string]string {
	if v == nil {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		c.reject(path, "must be an object of strings")
		return nil
	}
	out := map[string]string{}
	for k, e := range m {
		out[k] = c.str(e, path+"."+k)
	}
	return out
}

// ignore takes a field and warns when it is set.
func (c *converter) ignore(o *object, key, why string) {
	if v, path := o.take(key); !isUnset(v) {
		c.warn(path, "ignored: %s", why)
	}
}

// refuse takes a field and rejects it when it is set.
func (c *converter) refuse(o *object, key, why string) {
	if v, path := o.take(key); !isUnset(v) {
		c.reject(path, "%s", why)
	}
}

// secret takes a field that holds a secret and drops it with a warning that names the field,
// never its value: the value reaches no result (what Terraform stores of a function call).
func (c *converter) secret(o *object, key, fix string) {
	if v, path := o.take(key); !isUnset(v) {
		c.warn(path, "dropped: it holds a secret, which the result never holds (Terraform stores the result in plans and state); %s", fix)
	}
}

// Convert reads an api model.
func Convert(data []byte) (*Result, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		return nil, fmt.Errorf("the api model is not JSON: %w", err)
	}
	if dec.More() {
		return nil, errors.New("the api model holds more than one JSON value")
	}
	c := &converter{}
	c.res.Cluster.ControlPlanes = Machines{Count: 1}
	top := c.objectAt(root, "")
	top.path = ""
	v, _ := top.take("apiVersion")
	if av := c.str(v, "apiVersion"); av != "vlabs" {
		c.reject("apiVersion", "is %q: kubewin reads vlabs api models (acs-engine's and aks-engine's input format); convert the model with "+
			"acs-engine first", av)
	}
	if v, _ := top.take("location"); v != nil {
		c.res.Cluster.Location = c.str(v, "location")
	}
	if v, _ := top.take("tags"); v != nil {
		c.res.Cluster.Tags = c.stringMap(v, "tags")
	}
	for _, k := range []string{"id", "name", "type"} {
		c.ignore(top, k, "an ARM resource's identity; the kubewin_cluster has its own")
	}
	c.ignore(top, "plan", "marketplace purchase plans are not used")
	pv, _ := top.take("properties")
	if pv == nil {
		c.reject("properties", "is missing: a vlabs api model has its settings under properties")
	}
	props := c.objectAt(pv, "properties")
	c.properties(props)
	c.unknown(props)
	c.unknown(top)
	if len(c.problems) > 0 {
		return nil, &Error{Problems: c.problems}
	}
	sort.Strings(c.res.Warnings)
	return &c.res, nil
}

func (c *converter) properties(p *object) {
	c.ignore(p, "provisioningState", "an output of acs-engine")
	c.orchestrator(c.take(p, "orchestratorProfile"))
	c.windowsProfile(c.take(p, "windowsProfile"))
	c.master(c.take(p, "masterProfile"))
	pools, path := p.take("agentPoolProfiles")
	list, _ := pools.([]any)
	if pools != nil && list == nil {
		c.reject(path, "must be a list of agent pools")
	}
	for i, e := range list {
		c.agentPool(c.objectAt(e, fmt.Sprintf("%s[%d]", path, i)))
	}
	for i := range c.res.WindowsPools {
		p := &c.res.WindowsPools[i]
		p.AdminUsername = c.windowsAdmin
		if p.ImageID == "" {
			p.ImageID = c.windowsImageID
		}
		if p.MaxPods == 0 {
			p.MaxPods = c.res.Cluster.MaxPods
		}
		if p.KubeletExtraArgs == nil {
			p.KubeletExtraArgs = c.res.Cluster.WindowsKubeletArgs
		}
	}
	if c.res.Cluster.LinuxPool == nil {
		c.warn(path, "the model has no Linux agent pool: kubewin's cluster has one anyway (linux_pool), as CoreDNS and other system pods need Linux nodes")
	}
	c.linuxProfile(c.take(p, "linuxProfile"))
	sp := c.take(p, "servicePrincipalProfile")
	for _, k := range []string{"clientId", "servicePrincipalClientID", "objectId"} {
		c.ignore(sp, k, "kubewin's clusters use no service principal: the provider's azure credentials make the resources, and the nodes join with "+
			"bootstrap tokens")
	}
	for _, k := range []string{"secret", "servicePrincipalClientSecret"} {
		c.secret(sp, k, "kubewin's clusters need no service principal (the provider's azure block or ARM_* variables authenticate Terraform)")
	}
	c.ignore(sp, "keyvaultSecretRef", "kubewin's clusters use no service principal")
	c.unknown(sp)
	cp := c.take(p, "certificateProfile")
	for _, k := range []string{"caPrivateKey", "apiServerPrivateKey", "clientPrivateKey", "kubeConfigPrivateKey", "etcdServerPrivateKey",
		"etcdClientPrivateKey", "etcdPeerPrivateKeys"} {
		c.secret(cp, k, "the first control plane's kubeadm makes the cluster's PKI, whose keys never leave the control planes")
	}
	for _, k := range []string{"caCertificate", "apiServerCertificate", "clientCertificate", "kubeConfigCertificate", "etcdServerCertificate",
		"etcdClientCertificate", "etcdPeerCertificates"} {
		c.refuse(cp, k, "kubewin does not take a PKI from the model: the first control plane's kubeadm makes the cluster's CA and certificates. Remove "+
			"certificateProfile.")
	}
	c.unknown(cp)
	c.refuse(p, "aadProfile", "kubewin does not configure Azure AD authentication of the API server; remove aadProfile (admin credentials come from "+
		"kubewin_cluster_credentials)")
	c.refuse(p, "customCloudProfile", "set the provider's azure.metadata_host (or environment) for another cloud instead")
	c.ignore(p, "extensionProfiles", "acs-engine VM extensions are not installed")
	c.ignore(p, "telemetryProfile", "no telemetry is sent")
	ff := c.take(p, "featureFlags")
	for _, k := range []string{"enableIPv6DualStack", "enableIPv6Only"} {
		c.refuse(ff, k, "kubewin's clusters are IPv4 only")
	}
	for _, k := range []string{"enableCSERunInBackground", "blockOutboundInternet", "enableTelemetry", "enableWinDSR"} {
		c.ignore(ff, k, "an acs-engine provisioning option kubewin has no use for (kubewin's Windows nodes run kube-proxy as their image's "+
			"NodeConfig says)")
	}
	c.unknown(ff)
}

// take is a member object of o.
func (c *converter) take(o *object, key string) *object {
	v, path := o.take(key)
	return c.objectAt(v, path)
}

var versionRE = regexp.MustCompile(`^v?(\d+)\.(\d+)(\.\d+)?$`)

func (c *converter) orchestrator(o *object) {
	v, path := o.take("orchestratorType")
	if t := c.str(v, path); t != "" && !strings.EqualFold(t, "Kubernetes") {
		c.reject(path, "is %q: kubewin makes Kubernetes clusters only", t)
	}
	release, relPath := o.take("orchestratorRelease")
	ver, verPath := o.take("orchestratorVersion")
	name, at := c.str(ver, verPath), verPath
	if name == "" {
		name, at = c.str(release, relPath), relPath
	}
	c.res.Cluster.OrchestratorVersion = name
	switch m := versionRE.FindStringSubmatch(name); {
	case name == "":
		c.warn(verPath, "the model names no Kubernetes version: set the cluster's kubernetes_version")
	case m == nil:
		c.reject(at, "%q is not a Kubernetes version such as \"1.37.1\"", name)
	case m[3] == "":
		c.warn(at, "%q names a minor release without its patch: not taken; set the cluster's kubernetes_version to a release of Kubernetes 1.%d to 1.%d, "+
			"such as \"1.%d.1\"",
			name, kubeversion.OldestMinor, kubeversion.NewestMinor, kubeversion.NewestMinor)
	default:
		parsed, err := kubeversion.Parse(name)
		if err == nil {
			err = kubeversion.CheckSupported(parsed)
		}
		if err != nil {
			c.warn(at, "%s: not taken; set the cluster's kubernetes_version to a supported release (an acs-engine cluster of that version is upgraded by "+
				"replacing it with a kubewin cluster)", err)
			break
		}
		c.res.Cluster.KubernetesVersion = strings.TrimPrefix(name, "v")
	}
	c.kubernetesConfig(c.take(o, "kubernetesConfig"), false)
	c.unknown(o)
}

// kubernetesConfig reads a cluster's (or, perPool, an agent pool's) kubernetesConfig.
func (c *converter) kubernetesConfig(k *object, perPool bool) {
	cl := &c.res.Cluster
	v, path := k.take("networkPlugin")
	switch plugin := c.str(v, path); plugin {
	case "kubenet":
	case "":
		if !perPool {
			c.warn(path, "the model names no network plugin (aks-engine's default was Azure CNI): kubewin's cluster uses kubenet-style routing, each node's "+
				"pod CIDR routed to it by the route table (Windows: l2bridge)")
		}
	default:
		c.reject(path, "is %q: kubewin's azure clusters route each node's pod CIDR through the route table (kubenet; l2bridge on Windows) and install no "+
			"other CNI; use kubenet", plugin)
	}
	v, path = k.take("networkPolicy")
	if pol := c.str(v, path); pol != "" && pol != "none" {
		c.reject(path, "is %q: kubewin installs no network policy engine; remove it, or install one yourself after the cluster is made", pol)
	}
	c.ignore(k, "networkMode", "an Azure CNI setting")
	v, path = k.take("containerRuntime")
	switch rt := c.str(v, path); rt {
	case "":
	case "docker", "containerd":
		c.res.WindowsImage.Runtime = rt
		if perPool {
			c.warn(path, "the Windows nodes' runtime is their image's (windows_image.runtime): one for every pool")
		}
	default:
		c.reject(path, "is %q: kubewin's Windows images run containerd or docker", rt)
	}
	if perPool {
		return
	}
	if v, path := k.take("clusterSubnet"); v != nil {
		cl.ClusterCIDR = c.cidr(v, path)
	}
	if v, path := k.take("serviceCidr"); v != nil {
		cl.ServiceCIDR = c.cidr(v, path)
	}
	if v, path := k.take("dnsServiceIP"); !isUnset(v) {
		c.checkDNSIP(c.str(v, path), path)
	}
	if v, path := k.take("maxPods"); v != nil {
		cl.MaxPods = c.num(v, path)
	}
	if v, path := k.take("kubeletConfig"); v != nil {
		cl.WindowsKubeletArgs = flagsOf(c.stringMap(v, path))
		if len(cl.WindowsKubeletArgs) > 0 {
			c.warn(path, "taken as the Windows pools' kubelet_extra_args only: the Linux machines' kubelets are kubeadm's")
		}
	}
	if v, path := k.take("enableRbac"); v != nil {
		if b := c.boolean(v, path); b != nil && !*b {
			c.reject(path, "is false: kubeadm's clusters always authorize with RBAC")
		}
	}
	if v, path := k.take("enableSecureKubelet"); v != nil {
		if b := c.boolean(v, path); b != nil && !*b {
			c.reject(path, "is false: kubeadm's kubelets always authenticate and authorize their API")
		}
	}
	if v, path := k.take("enableAggregatedAPIs"); v != nil {
		if b := c.boolean(v, path); b != nil && !*b {
			c.warn(path, "is false: ignored, kubeadm's API servers serve aggregated APIs")
		}
	}
	pc := c.take(k, "privateCluster")
	if v, path := pc.take("enabled"); v != nil {
		if b := c.boolean(v, path); b != nil && *b {
			cl.APIServerAccess = "internal"
		}
	}
	c.ignore(pc, "enableHostsConfigAgent", "kubewin's private clusters are reached through the internal load balancer's address")
	c.ignore(pc, "jumpboxProfile", "kubewin makes no jumpbox")
	c.unknown(pc)
	if v, path := k.take("kubeProxyMode"); !isUnset(v) {
		if mode := c.str(v, path); mode != "iptables" {
			c.reject(path, "is %q: kubeadm's Linux kube-proxy runs in iptables mode (Windows nodes: kernelspace)", mode)
		}
	}
	if v, path := k.take("enablePodSecurityPolicy"); v != nil {
		if b := c.boolean(v, path); b != nil && *b {
			c.reject(path, "PodSecurityPolicy was removed in Kubernetes 1.25: use Pod Security Admission")
		}
	}
	if v, path := k.take("enableDataEncryptionAtRest"); v != nil {
		if b := c.boolean(v, path); b != nil && *b {
			c.reject(path, "kubewin does not configure encryption of secrets at rest yet")
		}
	}
	c.refuse(k, "enableEncryptionWithExternalKms", "kubewin does not configure a KMS provider")
	c.secret(k, "etcdEncryptionKey", "kubewin does not configure encryption of secrets at rest yet")
	for _, key := range []string{"apiServerConfig", "controllerManagerConfig", "schedulerConfig"} {
		c.refuse(k, key, "kubewin does not pass flags to the control plane's components; remove them (kubeadm's defaults apply)")
	}
	for _, key := range []string{"kubernetesImageBase", "kubernetesImageBaseType", "mcrKubernetesImageBase", "customHyperkubeImage",
		"customKubeAPIServerImage",
		"customKubeControllerManagerImage", "customKubeProxyImage", "customKubeSchedulerImage", "customKubeBinaryURL", "customCcmImage",
		"dockerEngineVersion",
		"mobyVersion", "linuxMobyURL", "linuxRuncURL", "containerdVersion", "linuxContainerdURL", "etcdVersion", "azureCNIVersion", "azureCNIURLLinux",
		"azureCNIURLWindows", "microsoftAptRepositoryURL", "privateAzureRegistryServer"} {
		c.ignore(k, key, "the Linux machines install kubeadm's packages of the cluster's version; the Windows nodes' binaries are baked into their image "+
			"by the kubewin Packer plugin")
	}
	for _, key := range []string{"customWindowsPackageURL", "windowsNodeBinariesURL", "windowsContainerdURL", "windowsSdnPluginURL"} {
		c.ignore(k, key, "the Windows nodes' binaries, runtime and CNI plugins are baked into their image by the kubewin Packer plugin (its "+
			"kubewin-release data source)")
	}
	for _, key := range []string{"useManagedIdentity", "userAssignedID", "userAssignedClientID", "useCloudControllerManager",
		"cloudControllerManagerConfig", "useInstanceMetadata",
		"cloudProviderBackoffMode", "cloudProviderBackoff", "cloudProviderBackoffRetries", "cloudProviderBackoffJitter", "cloudProviderBackoffDuration",
		"cloudProviderBackoffExponent", "cloudProviderRateLimit", "cloudProviderRateLimitQPS", "cloudProviderRateLimitQPSWrite",
		"cloudProviderRateLimitBucket",
		"cloudProviderRateLimitBucketWrite", "cloudProviderDisableOutboundSNAT", "excludeMasterFromStandardLB", "loadBalancerOutboundIPs",
		"maximumLoadBalancerRuleCount", "enableMultipleStandardLoadBalancers", "outboundRuleIdleTimeoutInMinutes"} {
		c.ignore(k, key, "kubewin's azure clusters run the out-of-tree Azure cloud provider (azure.cloud_provider) with a user-assigned "+
			"identity of their own, instance metadata and cloud-provider-azure's defaults; kubewin makes the load balancer and its outbound rules")
	}
	if v, path := k.take("loadBalancerSku"); !isUnset(v) && !strings.EqualFold(c.str(v, path), "standard") {
		c.warn(path, "ignored: kubewin's load balancer is a Standard one (Basic ones are retired)")
	}
	for _, key := range []string{"dockerBridgeSubnet", "gchighthreshold", "gclowthreshold", "kubeReservedCgroup", "containerRuntimeConfig",
		"etcdDiskSizeGB",
		"etcdStorageLimitGB", "podSecurityPolicyConfig", "tags", "keyVaultSku"} {
		c.ignore(k, key, "an acs-engine provisioning option kubewin does not set")
	}
	c.ignore(k, "addons", "acs-engine's addons are not installed (kubeadm's CoreDNS and kube-proxy are, and the Azure Disk and File CSI "+
		"drivers with the cluster's azure.storage)")
	c.ignore(k, "components", "the control plane's components are kubeadm's")
	c.unknown(k)
}

// flagsOf turns kubelet flags ("--max-pods": "30") into kubelet_extra_args names.
func flagsOf(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := map[string]string{}
	for k, v := range m {
		out[strings.TrimLeft(k, "-")] = v
	}
	return out
}

func (c *converter) cidr(v any, path string) string {
	s := c.str(v, path)
	if _, err := ipam.ParsePrefix(s); err != nil {
		c.reject(path, "%v", err)
	}
	return s
}

// checkDNSIP accepts a DNS service address only if it is kubeadm's: the service network's
// tenth address.
func (c *converter) checkDNSIP(ip, path string) {
	svc := c.res.Cluster.ServiceCIDR
	if svc == "" {
		svc = v1alpha1.DefaultServiceCIDR
	}
	p, err := ipam.ParsePrefix(svc)
	if err != nil {
		return
	}
	want, _ := ipam.Nth(p, 10)
	if a, err := netip.ParseAddr(ip); err != nil || a != want {
		c.reject(path, "is %s: kubeadm's cluster DNS address is the service network's tenth address, %s; remove it (or set serviceCidr to match)", ip, want)
	}
}

var nameRE = regexp.MustCompile(`[^a-z0-9-]+`)

// clusterName makes a cluster name of a DNS prefix.
func clusterName(dnsPrefix string) string {
	n := strings.Trim(nameRE.ReplaceAllString(strings.ToLower(dnsPrefix), "-"), "-")
	if len(n) > 40 {
		n = strings.TrimRight(n[:40], "-")
	}
	if n == "" || n[0] < 'a' || n[0] > 'z' {
		return ""
	}
	return n
}

func (c *converter) master(o *object) {
	cl := &c.res.Cluster
	v, path := o.take("count")
	if v != nil {
		cl.ControlPlanes.Count = c.num(v, path)
		if !slices.Contains([]int{1, 3, 5}, cl.ControlPlanes.Count) {
			c.reject(path, "is %d: a cluster has 1, 3 or 5 control planes", cl.ControlPlanes.Count)
		}
	}
	v, path = o.take("dnsPrefix")
	cl.DNSPrefix = c.str(v, path)
	if cl.Name = clusterName(cl.DNSPrefix); cl.Name == "" {
		c.warn(path, "%q makes no cluster name: set the cluster's name", cl.DNSPrefix)
	}
	if !dnsLabel.MatchString(cl.DNSPrefix) {
		cl.DNSPrefix = ""
	}
	v, path = o.take("vmSize")
	cl.ControlPlanes.VMSize = c.str(v, path)
	v, path = o.take("osDiskSizeGB")
	cl.ControlPlanes.OSDiskSizeGB = c.num(v, path)
	v, path = o.take("availabilityZones")
	cl.ControlPlanes.Zones = c.strings(v, path)
	v, path = o.take("vnetSubnetID")
	cl.ControlPlaneSubnetID = c.str(v, path)
	v, path = o.take("agentVnetSubnetID")
	cl.AgentSubnetID = c.str(v, path)
	if (cl.ControlPlaneSubnetID == "") != (cl.AgentSubnetID == "") {
		c.reject(path, "give the control planes' subnet (vnetSubnetID) and the agents' (agentVnetSubnetID) together: kubewin's clusters put them in "+
			"two subnets")
	}
	if v, path := o.take("vnetCidr"); v != nil {
		cl.VNetCIDR = c.cidr(v, path)
	}
	if v, path := o.take("HTTPSourceAddressPrefix"); !isUnset(v) {
		cl.APIServerAuthorizedIPRanges = []string{c.str(v, path)}
	}
	if v, path := o.take("imageReference"); v != nil {
		cl.ControlPlanes.ImageID = c.imageID(c.objectAt(v, path))
	}
	if v, path := o.take("availabilityProfile"); !isUnset(v) && c.str(v, path) != "AvailabilitySet" {
		c.warn(path, "ignored: kubewin's control planes are virtual machines, spread over availability zones when masterProfile.availabilityZones "+
			"names them")
	}
	c.ignore(o, "firstConsecutiveStaticIP", "control plane i has the control planes' subnet's sixth address on (10.240.255.5, ... by default)")
	c.refuse(o, "subjectAltNames", "kubewin's API server certificate names the load balancer's address and DNS name (dns_prefix) only; remove them")
	c.refuse(o, "oauthEnabled", "kubewin does not configure OAuth")
	c.refuse(o, "customFiles", "kubewin copies no files onto the control planes")
	c.refuse(o, "cosmosEtcd", "kubewin's etcd is stacked on the control planes")
	c.ignore(o, "distro", "kubewin's Linux machines run Ubuntu LTS (or azure.masters.image_id)")
	c.ignore(o, "storageProfile", "kubewin's machines have managed disks")
	for _, key := range []string{"ipAddressCount", "agentSubnet", "singlePlacementGroup", "platformFaultDomainCount", "platformUpdateDomainCount",
		"auditDEnabled",
		"customVMTags", "sysctldConfig", "ultraSSDEnabled", "encryptionAtHost", "proximityPlacementGroupID", "osDiskCachingType", "fqdn",
		"kubernetesConfig"} {
		c.ignore(o, key, "an acs-engine control plane option kubewin does not set")
	}
	c.ignore(o, "preProvisionExtension", "acs-engine VM extensions are not installed")
	c.ignore(o, "extensions", "acs-engine VM extensions are not installed")
	c.unknown(o)
}

var dnsLabel = regexp.MustCompile(`^[a-z][a-z0-9-]{1,61}[a-z0-9]$`)

// imageID is the ARM ID of an imageReference (a managed or gallery image).
func (c *converter) imageID(o *object) string {
	var f [5]string
	for i, k := range []string{"name", "resourceGroup", "subscriptionId", "gallery", "version"} {
		v, path := o.take(k)
		f[i] = c.str(v, path)
	}
	c.unknown(o)
	name, group, sub, gallery, version := f[0], f[1], f[2], f[3], f[4]
	if name == "" || group == "" || sub == "" {
		c.warn(o.path, "not taken: without name, resourceGroup and subscriptionId it names no image by resource ID; set the image_id (a kubewin "+
			"image) yourself")
		return ""
	}
	base := fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/", sub, group)
	if gallery == "" {
		return base + "images/" + name
	}
	id := base + "galleries/" + gallery + "/images/" + name
	if version != "" && version != "latest" {
		id += "/versions/" + version
	}
	return id
}

func (c *converter) agentPool(o *object) {
	v, path := o.take("osType")
	osType := c.str(v, path)
	if osType != "" && osType != "Linux" && osType != "Windows" {
		c.reject(path, "is %q: Linux or Windows", osType)
		return
	}
	v, namePath := o.take("name")
	name := c.str(v, namePath)
	v, path = o.take("count")
	count := c.num(v, path)
	v, path = o.take("vmSize")
	size := c.str(v, path)
	v, path = o.take("osDiskSizeGB")
	disk := c.num(v, path)
	v, path = o.take("availabilityZones")
	zones := c.strings(v, path)
	if v, path := o.take("availabilityProfile"); c.str(v, path) == "AvailabilitySet" {
		c.warn(path, "AvailabilitySet: kubewin's pools are virtual machine scale sets, spread over fault domains (and zones when availabilityZones "+
			"names them)")
	}
	image := ""
	if v, path := o.take("imageReference"); v != nil {
		image = c.imageID(c.objectAt(v, path))
	}
	if osType != "Windows" {
		if c.res.Cluster.LinuxPool != nil {
			c.reject(namePath, "a second Linux agent pool (%q): kubewin's clusters have one Linux pool; merge them", name)
		}
		c.res.Cluster.LinuxPool = &Machines{Count: count, VMSize: size, ImageID: image, Zones: zones, OSDiskSizeGB: disk}
		c.ignore(o, "acceleratedNetworkingEnabled", "kubewin's Linux agents have no accelerated networking")
		c.ignore(o, "distro", "kubewin's Linux machines run Ubuntu LTS (or azure.linux_pool.image_id)")
		c.linuxOnly(o)
		c.poolCommon(o, nil)
		c.unknown(o)
		return
	}
	p := WindowsPool{Name: name, NodeCount: count, VMSize: size, ImageID: image, Zones: zones, OSDiskSizeGB: disk, Priority: "Regular"}
	if err := winname.ValidatePoolName(name); err != nil {
		c.reject(namePath, "%v", err)
	}
	p.NodeNamePrefix = winname.Shorten(name)
	for _, q := range c.res.WindowsPools {
		if q.NodeNamePrefix == p.NodeNamePrefix {
			p.NodeNamePrefix = winname.Shorten(name[:min(len(name), winname.MaxPrefix-1)]) + strconv.Itoa(len(c.res.WindowsPools))
		}
	}
	if v, path := o.take("vnetSubnetID"); v != nil {
		p.SubnetID = c.str(v, path)
	}
	if v, path := o.take("acceleratedNetworkingEnabledWindows"); v != nil {
		if b := c.boolean(v, path); b != nil {
			p.AcceleratedNetwork = *b
		}
	}
	c.ignore(o, "acceleratedNetworkingEnabled", "for Windows pools acceleratedNetworkingEnabledWindows is taken")
	if v, path := o.take("scaleSetPriority"); v != nil {
		switch pr := c.str(v, path); pr {
		case "", "Regular":
		case "Spot", "Low":
			p.Priority = "Spot"
			if pr == "Low" {
				c.warn(path, "Low priority VMs are Azure Spot VMs now")
			}
		default:
			c.reject(path, "is %q: Regular or Spot", pr)
		}
	}
	if v, path := o.take("scaleSetEvictionPolicy"); !isUnset(v) && c.str(v, path) != "Delete" {
		c.warn(path, "ignored: kubewin's Spot VMs are deleted when evicted (the next apply makes new ones)")
	}
	if v, path := o.take("spotMaxPrice"); v != nil {
		if n, ok := v.(json.Number); ok {
			f, err := n.Float64()
			if err == nil {
				p.MaxBidPrice = &f
			}
		} else {
			c.reject(path, "must be a number")
		}
	}
	if v, path := o.take("customNodeLabels"); v != nil {
		p.Labels = c.stringMap(v, path)
	}
	if v, path := o.take("customVMTags"); v != nil {
		p.Tags = c.stringMap(v, path)
	}
	if v, path := o.take("osDiskCachingType"); v != nil {
		p.OSDiskCaching = c.str(v, path)
	}
	k := c.take(o, "kubernetesConfig")
	if v, path := k.take("maxPods"); v != nil {
		p.MaxPods = c.num(v, path)
	}
	if v, path := k.take("kubeletConfig"); v != nil {
		p.KubeletExtraArgs = flagsOf(c.stringMap(v, path))
	}
	c.kubernetesConfig(k, true)
	c.unknown(k)
	c.ignore(o, "distro", "a Linux option")
	c.linuxOnly(o)
	c.poolCommon(o, &p)
	c.unknown(o)
	c.res.WindowsPools = append(c.res.WindowsPools, p)
}

// linuxOnly takes the options acs-engine applied to Linux pools only.
func (c *converter) linuxOnly(o *object) {
	for _, key := range []string{"dnsPrefix", "ports", "fqdn", "sysctldConfig", "auditDEnabled"} {
		c.ignore(o, key, "an acs-engine option for Linux agents with public endpoints or auditd, which kubewin does not set")
	}
}

// poolCommon takes the options both kinds of pool have and kubewin ignores or rejects.
func (c *converter) poolCommon(o *object, p *WindowsPool) {
	c.ignore(o, "storageProfile", "kubewin's machines have managed disks")
	c.refuse(o, "diskSizesGB", "kubewin's pools have no data disks")
	c.ignore(o, "dataDiskCachingType", "kubewin's pools have no data disks")
	c.ignore(o, "ipAddressCount", "an Azure CNI setting: pods get addresses from their node's pod CIDR")
	c.ignore(o, "role", "kubewin's agent pools have no role")
	if v, path := o.take("vmssOverProvisioningEnabled"); v != nil {
		if b := c.boolean(v, path); b != nil && *b {
			c.warn(path, "ignored: kubewin's scale sets never overprovision (an extra instance would join)")
		}
	}
	c.refuse(o, "enableVMSSNodePublicIP", "kubewin's nodes have no public addresses")
	c.ignore(o, "loadBalancerBackendAddressPoolIDs", "kubewin's pools are in no load balancer pool of yours")
	for _, key := range []string{"singlePlacementGroup", "platformFaultDomainCount", "platformUpdateDomainCount", "diskEncryptionSetID",
		"ultraSSDEnabled",
		"encryptionAtHost", "proximityPlacementGroupID", "vmssName"} {
		c.ignore(o, key, "an acs-engine scale set option kubewin does not set")
	}
	c.ignore(o, "preProvisionExtension", "acs-engine VM extensions are not installed")
	c.ignore(o, "extensions", "acs-engine VM extensions are not installed")
	if p == nil {
		c.ignore(o, "customNodeLabels", "the Linux agents' labels are kubeadm's")
		c.ignore(o, "customVMTags", "the Linux agents have the cluster's tags")
		c.ignore(o, "osDiskCachingType", "the Linux agents' OS disks are cached as the image says")
		c.ignore(o, "scaleSetPriority", "the Linux agents are regular VMs")
		c.ignore(o, "scaleSetEvictionPolicy", "the Linux agents are regular VMs")
		c.ignore(o, "spotMaxPrice", "the Linux agents are regular VMs")
		c.ignore(o, "vnetSubnetID", "the Linux agents are in the agents' subnet (masterProfile.agentVnetSubnetID)")
		k := c.take(o, "kubernetesConfig")
		c.kubernetesConfig(k, true)
		c.ignore(k, "maxPods", "the Linux agents' kubelets are kubeadm's")
		c.ignore(k, "kubeletConfig", "the Linux agents' kubelets are kubeadm's")
		c.unknown(k)
	}
}

func (c *converter) windowsProfile(o *object) {
	img := &c.res.WindowsImage
	v, path := o.take("adminUsername")
	admin := c.str(v, path)
	c.secret(o, "adminPassword", "give the Windows pools' password with kubewin_windows_node_pool's write-only azure.admin_password_wo (from an "+
		"ephemeral variable), or leave it out: the VMs then get a random password nobody knows")
	c.windowsAdmin = admin
	for _, f := range []struct {
		key string
		to  *string
	}{{"WindowsPublisher", &img.Publisher}, {"WindowsOffer", &img.Offer}, {"WindowsSku", &img.SKU}, {"imageVersion", &img.Version},
		{"WindowsImageSourceUrl", &img.SourceVHDURL}, {"windowsDockerVersion", &img.DockerVersion}, {"windowsPauseImageURL", &img.PauseImage}} {
		v, path := o.take(f.key)
		*f.to = c.str(v, path)
	}
	if v, path := o.take("imageReference"); v != nil {
		c.windowsImageID = c.imageID(c.objectAt(v, path))
	}
	if v, path := o.take("windowsRuntimes"); v != nil {
		c.windowsRuntimes(c.objectAt(v, path))
	}
	if v, path := o.take("enableAutomaticUpdates"); v != nil {
		if b := c.boolean(v, path); b != nil && *b {
			c.warn(path, "ignored: kubewin's Windows nodes never update themselves (a reboot would take the node away unannounced); replace them with a "+
				"newer image")
		}
	}
	c.refuse(o, "secrets", "kubewin installs no Key Vault certificates on the nodes")
	c.ignore(o, "alwaysPullWindowsPauseImage", "the pause image is baked into the Windows image")
	c.ignore(o, "sshEnabled", "OpenSSH on the Windows nodes is the image's (the Packer template's) business")
	c.ignore(o, "enableCSIProxy", "CSI proxy is not installed")
	c.ignore(o, "csiProxyURL", "CSI proxy is not installed")
	c.ignore(o, "enableAHUB", "Azure Hybrid Benefit is not set on kubewin's pools")
	for _, key := range []string{"provisioningScriptsPackageURL", "isCredentialAutoGenerated", "windowsSecureTLSEnabled"} {
		c.ignore(o, key, "an aks-engine Windows provisioning option kubewin does not use")
	}
	c.unknown(o)
}

// windowsRuntimes maps aks-engine's containerd runtime handlers (windowsProfile.windowsRuntimes:
// default, process or hyperv; hypervRuntimes, a list of {buildNumber}, each a handler
// runhcs-wcow-hypervisor-<build> whose sandbox is that build's pause image: aks-engine
// pkg/api/vlabs/types.go WindowsRuntimes, validate.go validateWindowsRuntimes,
// parts/k8s/windowscontainerdfunc.ps1 CreateHypervisorRuntime) onto kubewin's Hyper-V
// isolation: the image baked with hyperv_isolation, one handler runhcs-wcow-hypervisor and the
// RuntimeClass windows-hyperv its pools create. Hyper-V isolation is containerd's, as it was in
// aks-engine.
func (c *converter) windowsRuntimes(r *object) {
	d, dpath := r.take("default")
	switch rt := c.str(d, dpath); rt {
	case "", "process":
	case "hyperv":
		c.res.WindowsImage.HyperVIsolation = true
		c.warn(dpath, "is \"hyperv\": kubewin's Windows nodes run a pod without a RuntimeClass process-isolated (containerd's default "+
			"handler, runhcs-wcow-process); the image is baked with hyperv_isolation, and pods that need Hyper-V isolation set "+
			"runtimeClassName: windows-hyperv")
	default:
		c.reject(dpath, "is %q: aks-engine's windowsRuntimes.default is process or hyperv", rt)
	}
	v, hpath := r.take("hypervRuntimes")
	if !isUnset(v) {
		list, ok := v.([]any)
		if !ok {
			c.reject(hpath, "is not a list of {\"buildNumber\": ...}")
		}
		var builds []string
		for i, e := range list {
			h := c.objectAt(e, fmt.Sprintf("%s[%d]", hpath, i))
			b, bpath := h.take("buildNumber")
			builds = append(builds, c.str(b, bpath))
			c.unknown(h)
		}
		c.res.WindowsImage.HyperVIsolation = true
		c.warn(hpath, "the handlers runhcs-wcow-hypervisor-<build> for builds %s become kubewin's one Hyper-V handler, "+
			"runhcs-wcow-hypervisor: the image is baked with hyperv_isolation, and pods set runtimeClassName: windows-hyperv instead of "+
			"runhcs-wcow-hypervisor-<build>", strings.Join(builds, ", "))
	}
	c.unknown(r)
	if c.res.WindowsImage.HyperVIsolation && c.res.WindowsImage.Runtime == "docker" {
		c.reject(r.path, "asks for Hyper-V isolation, which kubewin (like aks-engine) configures for containerd only, and "+
			"orchestratorProfile.kubernetesConfig.containerRuntime is docker: set it to containerd, or remove windowsRuntimes")
	}
}

func (c *converter) linuxProfile(o *object) {
	cl := &c.res.Cluster
	v, path := o.take("adminUsername")
	cl.AdminUsername = c.str(v, path)
	sshObj := c.take(o, "ssh")
	keys, kpath := sshObj.take("publicKeys")
	list, _ := keys.([]any)
	for i, k := range list {
		ko := c.objectAt(k, fmt.Sprintf("%s[%d]", kpath, i))
		d, dpath := ko.take("keyData")
		key := strings.TrimSpace(c.str(d, dpath))
		if key == "" {
			continue
		}
		if _, _, _, _, err := ssh.ParseAuthorizedKey([]byte(key)); err != nil {
			c.reject(dpath, "is not an OpenSSH public key (\"ssh-ed25519 AAAA...\"): %v", err)
			continue
		}
		cl.SSHPublicKeys = append(cl.SSHPublicKeys, key)
		c.unknown(ko)
	}
	c.unknown(sshObj)
	c.refuse(o, "secrets", "kubewin installs no Key Vault certificates on the Linux machines")
	csd := c.take(o, "customSearchDomain")
	c.secret(csd, "realmPassword", "kubewin joins no realm")
	c.refuse(csd, "name", "kubewin sets no custom DNS search domain")
	c.refuse(csd, "realmUser", "kubewin joins no realm")
	c.unknown(csd)
	c.refuse(o, "customNodesDNS", "the Linux machines use Azure's DNS")
	for _, key := range []string{"scriptroot", "runUnattendedUpgradesOnBootstrap", "enableUnattendedUpgrades", "eth0MTU"} {
		c.ignore(o, key, "an acs-engine Linux provisioning option kubewin does not use")
	}
	c.unknown(o)
}
