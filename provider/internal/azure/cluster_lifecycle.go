package azure

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/terraform-plugin-log/tflog"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"

	"github.com/kubewin/kubewin/internal/bootstraptoken"
	"github.com/kubewin/kubewin/internal/capin"
	"github.com/kubewin/kubewin/internal/drain"
	"github.com/kubewin/kubewin/internal/ipam"
	"github.com/kubewin/kubewin/internal/kubeadmboot"
	"github.com/kubewin/kubewin/internal/routetable"
	"github.com/kubewin/kubewin/provider/internal/azureccm"
	"github.com/kubewin/kubewin/provider/internal/pool"
)

// ClusterState is what the provider keeps of a cluster: nothing secret.
type ClusterState struct {
	// Endpoint is the API server, host:port; FQDN the DNS name of a public endpoint.
	Endpoint, FQDN string
	// CACert is the cluster CA certificate (PEM) and CAHash its pin.
	CACert []byte
	CAHash string
}

// joinTokenTTL is the lifetime of the tokens machines join with; kubewin deletes them once the
// machines joined.
const joinTokenTTL = 2 * time.Hour

// kubeadmCluster is the cluster as kubeadm sees it, with the API server's endpoint (host:port)
// and the DNS name of a public one. Behind an internal load balancer the machines reach the API
// servers at EndpointName (kubeadmboot.Cluster.EndpointAddress: a control plane, a backend of
// that load balancer, cannot reach its frontend), and the API server's certificate names both
// that name and the frontend's address, which the provider and the Windows nodes use.
//
// With the cloud provider, every kubelet runs with --cloud-provider=external and the control
// planes get its configuration, which names the identity (read from ARM: it exists by then).
// With AgentRegistry, the agents' kubelets get the ACR credential provider, for the kubelet
// identity's client ID (read from ARM, so that one that does not exist fails here).
func (c *Cluster) kubeadmCluster(ctx context.Context, endpoint, fqdn string) (kubeadmboot.Cluster, error) {
	k := kubeadmboot.Cluster{
		Name: c.Spec.Name, KubernetesVersion: c.Spec.KubernetesVersion, Endpoint: endpoint,
		PodSubnet: c.Spec.PodCIDR, ServiceSubnet: c.Spec.ServiceCIDR, NodeCIDRMaskSize: c.Spec.NodeCIDRMaskSize,
	}
	if fqdn != "" {
		k.CertSANs = []string{fqdn}
	}
	if host, port, err := net.SplitHostPort(endpoint); err == nil && !c.Spec.Network.PublicAPIServer {
		k.Endpoint, k.EndpointAddress = net.JoinHostPort(c.EndpointName(), port), host
		k.CertSANs = []string{c.EndpointName(), host}
	}
	if r := c.Spec.AgentRegistry; r != nil {
		creds, err := c.Client.RegistryCredentials(ctx, r.IdentityID)
		if err != nil {
			return k, fmt.Errorf("the Linux agents' kubelet identity: %w", err)
		}
		k.Registry = &kubeadmboot.Registry{Credentials: *creds, ProviderURL: ACRCredentialProviderURL(r.ProviderVersion)}
	}
	if c.Spec.CloudProvider == nil {
		return k, nil
	}
	ids, err := c.readIdentity(ctx)
	if err != nil {
		return k, err
	}
	nsg, err := c.agentNSG(ctx)
	if err != nil {
		return k, err
	}
	k.ExternalCloudProvider = true
	k.CloudConfig, err = c.cloudConfigFile(ids, nsg)
	return k, err
}

// EndpointName is the name the machines of a cluster with an internal API server reach the API
// servers at (their /etc/hosts maps it): under .internal, which the ICANN Board reserved from
// delegation for private use on 29 July 2024
// (https://www.icann.org/en/public-comment/proceeding/proposed-top-level-domain-string-for-private-use-24-01-2024).
func (c *Cluster) EndpointName() string { return "apiserver." + c.Spec.Name + ".kubewin.internal" }

// Create makes the cluster — network, load balancer, control planes one after the first, Linux
// agents — and returns once the agents are Ready nodes with their routes. What it made before an
// error stays, for Delete.
func (c *Cluster) Create(ctx context.Context) (*ClusterState, error) {
	if c.VNetID() == "" {
		if err := c.checkOutbound(ctx); err != nil {
			return nil, err
		}
		if c.Spec.CloudProvider != nil {
			if _, err := c.agentNSG(ctx); err != nil {
				return nil, err
			}
		}
	}
	subnet, err := c.masterSubnet(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.ensureAll(ctx, c.network(ctx, subnet)); err != nil {
		return nil, err
	}
	if c.Spec.CloudProvider != nil {
		if err := c.ensureAll(ctx, c.identity(ctx, c.identityRoles())); err != nil {
			return nil, fmt.Errorf("the Azure cloud provider's identity %s and its roles: %w. Assigning roles needs "+
				"Microsoft.Authorization/roleAssignments/write on resource group %s (Owner, User Access Administrator or Role Based Access "+
				"Control Administrator; Contributor is not enough) for the provider's credentials; or set azure.cloud_provider = "+
				"{ enabled = false }", c.IdentityID(), err, c.Spec.ResourceGroup)
		}
	}
	var host, fqdn string
	if c.Spec.Network.PublicAPIServer {
		host, fqdn, err = c.publicAddress(ctx)
	} else {
		var a netip.Addr
		a, err = frontendAddress(subnet)
		host = a.String()
	}
	if err != nil {
		return nil, err
	}
	endpoint := net.JoinHostPort(host, strconv.Itoa(kubeadmboot.APIServerPort))
	cluster, err := c.kubeadmCluster(ctx, endpoint, fqdn)
	if err != nil {
		return nil, err
	}

	token, err := bootstraputil.GenerateBootstrapToken()
	if err != nil {
		return nil, err
	}
	certKey := randomHex(32)
	first, err := controlPlaneAddress(subnet, 0)
	if err != nil {
		return nil, err
	}
	if err := c.createControlPlane(ctx, subnet, cluster, 0, kubeadmboot.Machine{Role: kubeadmboot.RoleInit, Token: token, TokenTTL: joinTokenTTL,
		CertificateKey: certKey}); err != nil {
		return nil, err
	}
	ca, err := c.waitBoot(ctx, 0)
	if err != nil {
		return nil, err
	}
	pin, err := capin.HashPEM(ca)
	if err != nil {
		return nil, fmt.Errorf("the CA certificate %s reported: %w", c.masterName(0), err)
	}
	state := &ClusterState{Endpoint: endpoint, FQDN: fqdn, CACert: ca, CAHash: pin}
	var others []int
	for i := 1; i < c.Spec.ControlPlanes.Count; i++ {
		others = append(others, i)
	}
	if err := c.createControlPlanes(ctx, subnet, cluster, others, kubeadmboot.Machine{Role: kubeadmboot.RoleControlPlane,
		Token: token, CertificateKey: certKey, CAHash: pin, JoinAddress: first.String()}); err != nil {
		return state, err
	}
	access, err := c.Access(ctx, endpoint, c.Spec.ControlPlanes.Count)
	if err != nil {
		return state, err
	}
	client, err := kubernetes.NewForConfig(access.REST())
	if err != nil {
		return state, err
	}
	if err := c.ApplyCloudProvider(ctx, client, state); err != nil {
		return state, err
	}
	if err := c.scaleAgents(ctx, client, cluster, pin, token, c.Spec.Agents.Count); err != nil {
		return state, err
	}
	// The machines joined: the token of the first control plane goes.
	return state, bootstraptoken.Delete(ctx, client, token)
}

// createControlPlanes creates the control planes of the given indexes (NICs and VMs, in parallel)
// and waits for each to report its bootstrap done. One that fails does not stop the others: Azure
// goes on creating a VM whose client stopped waiting, and it would boot unwatched, after the
// caller has deleted the join token it boots with.
func (c *Cluster) createControlPlanes(ctx context.Context, subnet netip.Prefix, cluster kubeadmboot.Cluster, indexes []int,
	m kubeadmboot.Machine) error {
	errs := make([]error, len(indexes))
	var wg sync.WaitGroup
	for n, i := range indexes {
		wg.Go(func() { errs[n] = c.createControlPlane(ctx, subnet, cluster, i, m) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// createControlPlane creates control plane i (its NIC and VM) and, but for the first, waits for
// it to report its bootstrap done.
func (c *Cluster) createControlPlane(ctx context.Context, subnet netip.Prefix, cluster kubeadmboot.Cluster, i int, m kubeadmboot.Machine) error {
	addr, err := controlPlaneAddress(subnet, i)
	if err != nil {
		return err
	}
	if err := c.ensure(ctx, c.controlPlaneNIC(i, addr)); err != nil {
		return err
	}
	m.AdvertiseAddress = addr.String()
	userData, err := kubeadmboot.UserData(cluster, m)
	if err != nil {
		return err
	}
	if err := c.ensure(ctx, c.controlPlaneVM(i, userData)); err != nil {
		return err
	}
	if i > 0 {
		_, err = c.waitBoot(ctx, i)
	}
	return err
}

// AddControlPlanes makes the control planes of the given indexes (new ones, or ones that were lost
// or left Failed, whose VM goes first) in a running cluster: a running control plane uploads the
// shared certificates again under a fresh certificate key (kubeadm deletes an upload after two
// hours), and the new ones join with it and a fresh token, at their static addresses (a lost
// one's etcd member, at the same address, is taken over by kubeadm).
func (c *Cluster) AddControlPlanes(ctx context.Context, access *Access, state *ClusterState, indexes []int) error {
	client, err := kubernetes.NewForConfig(access.REST())
	if err != nil {
		return err
	}
	certKey := randomHex(32)
	script := kubeadmboot.UploadCertificatesScript(certKey)
	uploaded := -1 // the control plane that uploaded them: the new ones join through it
	var errs []error
	for i := range maxControlPlanes {
		if slices.Contains(indexes, i) {
			continue
		}
		if _, err := c.RunScript(ctx, i, script); err != nil {
			errs = append(errs, err)
			continue
		}
		uploaded = i
		break
	}
	if uploaded < 0 {
		return fmt.Errorf("no control plane uploaded the certificates for the new ones: %w", errors.Join(errs...))
	}
	token, err := bootstraptoken.Create(ctx, client, "kubewin-control-planes", joinTokenTTL)
	if err != nil {
		return err
	}
	defer func() { _ = bootstraptoken.Delete(context.WithoutCancel(ctx), client, token) }()
	subnet, err := c.masterSubnet(ctx)
	if err != nil {
		return err
	}
	via, err := controlPlaneAddress(subnet, uploaded)
	if err != nil {
		return err
	}
	cluster, err := c.kubeadmCluster(ctx, state.Endpoint, state.FQDN)
	if err != nil {
		return err
	}
	m := kubeadmboot.Machine{Role: kubeadmboot.RoleControlPlane, Token: token, CertificateKey: certKey, CAHash: state.CAHash, JoinAddress: via.String()}
	// A VM Compute left Failed is in the way of the new one (ControlPlaneProvisioned).
	for _, i := range indexes {
		if err := c.remove(ctx, c.controlPlaneVM(i, nil)); err != nil {
			return err
		}
	}
	if err := c.createControlPlanes(ctx, subnet, cluster, indexes, m); err != nil {
		return err
	}
	return c.setControlPlaneCount(ctx, max(slices.Max(indexes)+1, c.Spec.ControlPlanes.Count))
}

// ScaleAgents brings the Linux agents to want.
func (c *Cluster) ScaleAgents(ctx context.Context, access *Access, state *ClusterState, want int) error {
	client, err := kubernetes.NewForConfig(access.REST())
	if err != nil {
		return err
	}
	cluster, err := c.kubeadmCluster(ctx, state.Endpoint, state.FQDN)
	if err != nil {
		return err
	}
	return c.scaleAgents(ctx, client, cluster, state.CAHash, "", want)
}

// scaleAgents brings the Linux agents to want: more join with token (a fresh one when empty)
// in one write of the scale set, and become Ready nodes with routes; fewer are drained, deleted in
// one call, and their nodes and routes removed.
func (c *Cluster) scaleAgents(ctx context.Context, client kubernetes.Interface, cluster kubeadmboot.Cluster, pin, token string, want int) error {
	table, err := c.Client.OpenRouteTable(c.RouteTableID())
	if err != nil {
		return err
	}
	machines, err := c.agents().List(ctx)
	if err != nil {
		return err
	}
	have := len(machines)
	switch {
	case want > have:
		if token == "" {
			if token, err = bootstraptoken.Create(ctx, client, "kubewin-linux-agents", joinTokenTTL); err != nil {
				return err
			}
			defer func() { _ = bootstraptoken.Delete(context.WithoutCancel(ctx), client, token) }()
		}
		userData, err := kubeadmboot.UserData(cluster, kubeadmboot.Machine{Role: kubeadmboot.RoleWorker, Token: token, CAHash: pin})
		if err != nil {
			return err
		}
		if err := c.setAgents(ctx, want, userData); err != nil {
			return err
		}
	case want < have:
		names := make([]string, 0, have)
		for _, m := range machines {
			names = append(names, m.Name)
		}
		slices.Sort(names)
		gone := names[want:] // newest first out
		for _, n := range gone {
			if err := drain.Node(ctx, client, n, drain.Options{Timeout: 5 * time.Minute, IgnoreDaemonSets: true}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
		if err := c.agents().Delete(ctx, gone); err != nil {
			return err
		}
		for _, n := range gone {
			if err := client.CoreV1().Nodes().Delete(ctx, n, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			if c.keepsAgentRoutes() {
				if err := table.Delete(ctx, n); err != nil {
					return err
				}
			}
		}
		return nil
	}
	machines, err = c.agents().List(ctx)
	if err != nil {
		return err
	}
	nodes, err := c.waitAgentsReady(ctx, client, machines)
	if err != nil {
		return err
	}
	if !c.keepsAgentRoutes() {
		return nil
	}
	for _, n := range nodes {
		if err := table.Put(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

// keepsAgentRoutes reports whether kubewin writes the Linux agents' routes: not when the cloud
// provider's route controller keeps every node's, which would leave two writers on one table.
func (c *Cluster) keepsAgentRoutes() bool {
	return c.Spec.CloudProvider == nil || !c.Spec.CloudProvider.Routes
}

// agentTimeout bounds the wait for agents to become Ready nodes.
const agentTimeout = 20 * time.Minute

// waitAgentsReady waits until every agent is a Ready node with a pod CIDR and returns their
// routes; an agent whose bootstrap reports a failure on its serial console fails it at once.
func (c *Cluster) waitAgentsReady(ctx context.Context, client kubernetes.Interface, machines []pool.Machine) ([]routetable.Route, error) {
	ctx, cancel := context.WithTimeout(ctx, agentTimeout)
	defer cancel()
	agents := c.agents()
	for round := 1; ; round++ {
		var routes []routetable.Route
		var waiting []string
		for _, m := range machines {
			n, err := client.CoreV1().Nodes().Get(ctx, m.Name, metav1.GetOptions{})
			r, ok := agentRoute(n, err)
			if !ok {
				waiting = append(waiting, m.Name)
				continue
			}
			routes = append(routes, r)
		}
		if len(waiting) == 0 {
			return routes, nil
		}
		if round%5 == 0 {
			for _, name := range waiting {
				if log := agents.serialLog(ctx, name); kubeadmboot.ReadSerial(log).Failed {
					//nolint:staticcheck // ST1005: the message starts with a proper noun.
					return nil, fmt.Errorf("Linux agent %s failed to join; the end of its serial console:\n%s", name, tailLines(log, 25))
				}
			}
		}
		tflog.Debug(ctx, "waiting for Linux agents", map[string]any{"nodes": waiting})
		select {
		case <-ctx.Done():
			var logs strings.Builder
			for _, name := range waiting {
				fmt.Fprintf(&logs, "\n--- %s:\n%s", name, tailLines(agents.serialLog(context.WithoutCancel(ctx), name), 15))
			}
			//nolint:staticcheck // ST1005: the message starts with a proper noun.
			return nil, fmt.Errorf("Linux agents %v are not Ready nodes with a pod CIDR (initialized by the Azure cloud provider, when it runs) "+
				"after %s: %w; the end of their serial consoles:%s", waiting,
				agentTimeout, ctx.Err(), logs.String())
		case <-time.After(time.Second):
		}
	}
}

// agentRoute is a Ready node's route: its pod CIDR to its internal address. A node the cloud
// provider has not initialized yet (its uninitialized taint, which keeps workloads off it) does
// not count: its addresses are not the cloud's yet.
func agentRoute(n *corev1.Node, err error) (routetable.Route, bool) {
	if err != nil || slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == azureccm.UninitializedTaint }) {
		return routetable.Route{}, false
	}
	ready := false
	for _, cond := range n.Status.Conditions {
		ready = ready || (cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue)
	}
	cidr, err := ipam.ParsePrefix(n.Spec.PodCIDR)
	if !ready || err != nil {
		return routetable.Route{}, false
	}
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			if ip, err := netip.ParseAddr(a.Address); err == nil {
				return routetable.Route{Name: n.Name, Destination: cidr, NextHop: ip}, true
			}
		}
	}
	return routetable.Route{}, false
}

// Observed is what exists of a cluster.
type Observed struct {
	// Exists is false once its load balancer is gone.
	Exists bool
	// ControlPlanes counts the control planes' VMs; Agents the scale set's capacity.
	ControlPlanes, Agents int
}

// Observe reads what exists of the cluster.
func (c *Cluster) Observe(ctx context.Context) (Observed, error) {
	var o Observed
	lb, err := c.Client.network.NewLoadBalancersClient().Get(ctx, c.Spec.ResourceGroup, c.lbName(), nil)
	if notFound(err) {
		return o, nil
	}
	if err != nil {
		return o, fmt.Errorf("read %s: %w", c.ID(), err)
	}
	if err := c.ours(c.ID(), lb.Tags); err != nil {
		return o, err
	}
	o.Exists = true
	for i := range maxControlPlanes {
		ok, err := c.ControlPlaneProvisioned(ctx, i)
		if err != nil {
			return o, err
		}
		if ok {
			o.ControlPlanes++
		}
	}
	o.Agents, err = c.agentCount(ctx)
	return o, err
}

// maxMasters is the most control planes a cluster has.
const maxControlPlanes = 5

// Delete removes everything the cluster made, and nothing else: agents, control planes (their
// disks with them), network interfaces, the load balancer and its address, the virtual network,
// the NAT gateway and its address, the route table (with its routes), the security groups; with
// the cloud provider (which cannot be turned on or off in place), its identity and role
// assignments, and what it made for LoadBalancer Services (cluster_services.go), which is not
// the cluster's own.
func (c *Cluster) Delete(ctx context.Context) error {
	if err := c.remove(ctx, c.agentScaleSet(0, nil)); err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	for i := range maxControlPlanes {
		g.Go(func() error { return c.remove(gctx, c.controlPlaneVM(i, nil)) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for i := range maxControlPlanes {
		if err := c.remove(ctx, c.controlPlaneNIC(i, netip.Addr{})); err != nil {
			return err
		}
	}
	if c.Spec.CloudProvider != nil {
		if err := c.removeAll(ctx, c.identity(ctx, append(slices.Clone(CloudProviderRoles), StorageAccountContributor))); err != nil {
			return err
		}
		if err := c.removeServiceLoadBalancers(ctx); err != nil {
			return err
		}
	}
	if err := c.removeAll(ctx, c.network(ctx, netip.Prefix{})); err != nil {
		return err
	}
	if c.Spec.CloudProvider != nil {
		return c.removeServicePublicIPs(ctx)
	}
	return nil
}
