package windows

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/kubewin/kubewin/nodeboot/internal/platform"
	"github.com/kubewin/kubewin/nodeboot/internal/platform/windows/hcnjson"
)

type network struct{ p *Platform }

// metadataEndpoints are the addresses of the cloud's instance services that the host must keep
// reaching after HNS takes its adapter over: the instance metadata service (Azure IMDS, GCE
// metadata server: 169.254.169.254) and Azure's WireServer (168.63.129.16, which the Azure
// guest agent and DHCP renewals need).
var metadataEndpoints = []netip.Prefix{netip.MustParsePrefix("169.254.169.254/32"), netip.MustParsePrefix("168.63.129.16/32")}

// Ensure makes the node's network exist on every boot, in upstream's order (kubernetes
// cluster/gce/windows/k8s-node-setup.psm1 Add_InitialHnsNetwork and
// Configure-HostNetworkingService; flannel-io/flannel pkg/backend/vxlan/device_windows.go):
//  1. the throwaway External network, which brings the vSwitch and the management vNIC up once
//     and keeps them across pod network changes;
//  2. the pod network, kept when it matches the spec and re-created when it does not (HNS state
//     survives reboots, sometimes stale: microsoft/SDN issue 177, hcsshim issue 850);
//  3. on l2bridge, the host endpoint at the pod CIDR's second address, attached to the host,
//     with forwarding on (endpoints do not survive reboots);
//  4. the routes to the metadata endpoints, which creating a network removes (hcsshim issue
//     299), on the adapter and its management vNIC.
func (n network) Ensure(ctx context.Context, spec platform.NetworkSpec) (platform.NetworkInfo, error) {
	p := n.p
	created := false
	if _, made, err := p.ensureNetwork(ctx, bootstrapRequest(spec), bootstrapMatches(spec)); err != nil {
		return platform.NetworkInfo{}, fmt.Errorf("bootstrap network %s: %w", spec.Bootstrap.Name, err)
	} else if made {
		created = true
	}
	pod, made, err := p.ensureNetwork(ctx, podRequest(spec), podMatches(spec))
	if err != nil {
		return platform.NetworkInfo{}, fmt.Errorf("network %s: %w", spec.Name, err)
	}
	created = created || made
	var info platform.NetworkInfo
	switch spec.Type {
	case platform.L2Bridge:
		if err := p.ensureHostEndpoint(ctx, pod, spec); err != nil {
			return platform.NetworkInfo{}, err
		}
	case platform.Overlay:
		// Local traffic between the host and its pods (flannel device_windows.go adds the
		// HostRoute policy to every network it creates or finds without one).
		if !hasPolicy(pod, hcnjson.HostRoute) {
			if err := p.b.HNS.AddNetworkPolicy(pod.Id, hcnjson.PolicyNetworkRequest{Policies: []hcnjson.NetworkPolicy{{Type: hcnjson.HostRoute,
				Settings: json.RawMessage("{}")}}}); err != nil {
				return platform.NetworkInfo{}, fmt.Errorf("add the HostRoute policy to %s (it needs Windows build 18321 or newer): %w", spec.Name, err)
			}
		}
		if info.VTEPMAC, err = drMAC(pod); err != nil {
			return platform.NetworkInfo{}, fmt.Errorf("network %s: %w", spec.Name, err)
		}
	}
	adapters := []string{managementAdapter(spec.Adapter), spec.Adapter}
	if err := p.ensureMetadataRoutes(ctx, adapters); err != nil {
		return platform.NetworkInfo{}, err
	}
	if created && p.MetadataRecheck > 0 {
		go func() {
			select {
			case <-ctx.Done():
			case <-time.After(p.MetadataRecheck):
				_ = p.ensureMetadataRoutes(context.WithoutCancel(ctx), adapters)
			}
		}()
	}
	return info, nil
}

// Check finds what Ensure would repair, with queries only: the bootstrap and pod networks by
// name (one HNS query each; on overlay, the pod network's HostRoute policy), on l2bridge the
// host endpoint by name and the host interface list for its vNIC, and the routes to the
// metadata endpoints in the forwarding table, which another network's creation removes without
// touching this node's (hcsshim issue 299: Docker's nat network, another CNI). It reads no
// firewall (PowerShell).
func (n network) Check(_ context.Context, spec platform.NetworkSpec) (platform.Drift, error) {
	d, err := n.checkNetworks(spec)
	if err != nil || d.Network != "" {
		return d, err
	}
	missing, err := n.p.missingMetadataRoutes([]string{managementAdapter(spec.Adapter), spec.Adapter})
	if err != nil && !d.None() {
		// What was found is repaired with the routes: the failed read does not hold it up.
		return d, nil
	}
	d.Host = append(d.Host, missing...)
	return d, err
}

func (n network) checkNetworks(spec platform.NetworkSpec) (platform.Drift, error) {
	hns := n.p.b.HNS
	var d platform.Drift
	existing, err := hns.NetworkByName(spec.Bootstrap.Name)
	switch {
	case errors.Is(err, ErrNotFound):
		d.Host = append(d.Host, "HNS network "+spec.Bootstrap.Name+" is missing")
	case err != nil:
		return d, err
	case !bootstrapMatches(spec)(existing):
		d.Host = append(d.Host, "HNS network "+spec.Bootstrap.Name+" is not as specified")
	}
	pod, err := hns.NetworkByName(spec.Name)
	switch {
	case errors.Is(err, ErrNotFound):
		d.Network = "HNS network " + spec.Name + " is missing"
		return d, nil
	case err != nil:
		return d, err
	case !podMatches(spec)(pod):
		d.Network = "HNS network " + spec.Name + " is not as specified"
		return d, nil
	}
	if spec.Type == platform.Overlay {
		if !hasPolicy(pod, hcnjson.HostRoute) {
			d.Host = append(d.Host, "HNS network "+spec.Name+" has no HostRoute policy")
		}
		return d, nil
	}
	name := hostEndpointName(spec.Name)
	ep, err := hns.EndpointByName(name)
	switch {
	case errors.Is(err, ErrNotFound):
		d.Host = append(d.Host, "host endpoint "+name+" is missing")
		return d, nil
	case err != nil:
		return d, err
	case ep.HostComputeNetwork != pod.Id || len(ep.IpConfigurations) == 0 || ep.IpConfigurations[0].IpAddress != spec.HostEndpoint.String():
		d.Host = append(d.Host, "host endpoint "+name+" is not on "+spec.Name+" at "+spec.HostEndpoint.String())
		return d, nil
	}
	vnic, err := n.p.interfaceWith(spec.HostEndpoint)
	if err != nil {
		return d, err
	}
	if vnic == "" {
		d.Host = append(d.Host, fmt.Sprintf("no host interface holds %s: host endpoint %s is not attached", spec.HostEndpoint, name))
	}
	return d, nil
}

// ensureNetwork keeps the network named in req when it matches, and otherwise deletes it and
// creates req, then waits until HNS reports its management address and the host has the
// interface that holds it. It reports whether it created the network.
func (p *Platform) ensureNetwork(ctx context.Context, req *hcnjson.HostComputeNetwork,
	matches func(*hcnjson.HostComputeNetwork) bool) (*hcnjson.HostComputeNetwork, bool, error) {
	existing, err := p.b.HNS.NetworkByName(req.Name)
	switch {
	case err == nil && matches(existing):
		return existing, false, nil
	case err == nil:
		if err := p.deleteNetwork(existing); err != nil {
			return nil, false, fmt.Errorf("delete the stale network: %w", err)
		}
	case !errors.Is(err, ErrNotFound):
		return nil, false, err
	}
	var made *hcnjson.HostComputeNetwork
	// Creating the first network of an adapter builds the vSwitch, and HNS calls fail while it
	// settles: retry a few times.
	if err := retry(ctx, 5, 2*time.Second, func() (err error) {
		made, err = p.b.HNS.CreateNetwork(req)
		return err
	}); err != nil {
		return nil, false, fmt.Errorf("create: %w", err)
	}
	ready, err := p.waitHostNetwork(ctx, made)
	if err != nil {
		return nil, false, err
	}
	return ready, true, nil
}

// waitHostNetwork waits for a new network's management address and for the host interface
// that holds it, as flannel does before using a network it created. HNS reports the address of
// an Overlay network as its ProviderAddress policy (pkg/backend/vxlan/device_windows.go: 5 s
// for the address, getManagementIP), and that of an L2Bridge network as the v1 network's
// ManagementIP only (pkg/backend/hostgw/hostgw_windows.go: 30 s for the address); flannel
// waits 25 s and 5 s for the interface, nodeboot 45 s.
func (p *Platform) waitHostNetwork(ctx context.Context, n *hcnjson.HostComputeNetwork) (*hcnjson.HostComputeNetwork, error) {
	var mgmt netip.Addr
	wait := 5 * time.Second
	if n.Type == hcnjson.L2Bridge {
		wait = 30 * time.Second
	}
	err := p.waitFor(ctx, wait, "HNS reports no management address for network "+n.Name, func() (bool, error) {
		got, err := p.b.HNS.NetworkByID(n.Id)
		if err != nil {
			return false, err
		}
		n = got
		if n.Type != hcnjson.L2Bridge {
			mgmt = providerAddress(got)
			return mgmt.IsValid(), nil
		}
		ip, err := p.b.HNS.ManagementIP(n.Id)
		if err != nil {
			return false, err
		}
		mgmt, _ = netip.ParseAddr(ip)
		return mgmt.IsValid(), nil
	})
	if err != nil {
		return nil, err
	}
	err = p.waitFor(ctx, 45*time.Second, fmt.Sprintf("no host interface holds %s, the management address of network %s", mgmt, n.Name), func() (bool,
		error) {
		name, err := p.interfaceWith(mgmt)
		return name != "", err
	})
	return n, err
}

// interfaceWith is the name of the host interface that holds addr, or "" when none does.
func (p *Platform) interfaceWith(addr netip.Addr) (string, error) {
	ifs, err := p.b.System.Interfaces()
	if err != nil {
		return "", err
	}
	for _, ifc := range ifs {
		for _, a := range ifc.Addrs {
			if a.Addr() == addr {
				return ifc.Name, nil
			}
		}
	}
	return "", nil
}

// deleteNetwork deletes a network after the endpoints on it (a network with endpoints left
// cannot be deleted).
func (p *Platform) deleteNetwork(n *hcnjson.HostComputeNetwork) error {
	eps, err := p.b.HNS.EndpointsOfNetwork(n.Id)
	if err != nil {
		return err
	}
	for _, ep := range eps {
		if err := p.b.HNS.DeleteEndpoint(ep.Id); err != nil && !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("delete endpoint %s: %w", ep.Name, err)
		}
	}
	if err := p.b.HNS.DeleteNetwork(n.Id); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	return nil
}

func (n network) Delete(_ context.Context, name string) error {
	existing, err := n.p.b.HNS.NetworkByName(name)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return n.p.deleteNetwork(existing)
}

// RemovePodState removes the endpoints of the network other than its host endpoint, and every
// load balancer, as Windows node setups do before the node's services start: aks-engine's
// windowsnodereset.ps1, at every boot, removes the pod network with its endpoints and the
// persisted policy lists (Get-HnsPolicyList | Remove-HnsPolicyList: HNS's v1 name for the load
// balancers), and microsoft/SDN Kubernetes/windows/start-kubeproxy.ps1 the policy lists before
// kube-proxy starts, which programs its own again on its first sync.
func (n network) RemovePodState(_ context.Context, name string) error {
	hns := n.p.b.HNS
	// The load balancers first: they name the endpoints they balance to.
	lbs, err := hns.LoadBalancers()
	if err != nil {
		return err
	}
	for _, lb := range lbs {
		if err := hns.DeleteLoadBalancer(lb.Id); err != nil && !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("delete load balancer %s: %w", lb.Id, err)
		}
	}
	nw, err := hns.NetworkByName(name)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	eps, err := hns.EndpointsOfNetwork(nw.Id)
	if err != nil {
		return err
	}
	for _, ep := range eps {
		if ep.Name == hostEndpointName(name) {
			continue
		}
		if err := hns.DeleteEndpoint(ep.Id); err != nil && !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("delete endpoint %s: %w", ep.Name, err)
		}
	}
	return nil
}

// bootstrapVSID and the External network follow microsoft/SDN
// Kubernetes/windows/helper.psm1 CreateExternalNetwork: an L2Bridge for l2bridge modes, an
// Overlay with VSID 9999 for overlay, on 192.168.255.0/30 with gateway .1
// (kubernetes cluster/gce/windows/k8s-node-setup.psm1 Add_InitialHnsNetwork likewise).
func bootstrapRequest(spec platform.NetworkSpec) *hcnjson.HostComputeNetwork {
	return &hcnjson.HostComputeNetwork{
		Name:     spec.Bootstrap.Name,
		Type:     networkType(spec.Type),
		Policies: []hcnjson.NetworkPolicy{adapterPolicy(spec.Adapter)},
		Ipams: []hcnjson.Ipam{{Type: "Static", Subnets: []hcnjson.Subnet{subnet(spec.Bootstrap.Subnet, spec.Bootstrap.Gateway,
			spec.Bootstrap.VSID)}}},
		SchemaVersion: hcnjson.V2,
	}
}

// podRequest is the pod network: the pod CIDR with its first address as the gateway (flannel
// pkg/backend/hostgw/hostgw_windows.go and pkg/backend/vxlan/device_windows.go; GCE
// Get_Gateway_From_CIDR). An overlay network also carries its VNI as the subnet's VSID and is
// non-persistent, as flannel creates it, so that every boot starts from a fresh one.
func podRequest(spec platform.NetworkSpec) *hcnjson.HostComputeNetwork {
	n := &hcnjson.HostComputeNetwork{
		Name:          spec.Name,
		Type:          networkType(spec.Type),
		Policies:      []hcnjson.NetworkPolicy{adapterPolicy(spec.Adapter)},
		Ipams:         []hcnjson.Ipam{{Type: "Static", Subnets: []hcnjson.Subnet{subnet(spec.Subnet, spec.Gateway, spec.VNI)}}},
		SchemaVersion: hcnjson.V2,
	}
	if spec.Type == platform.Overlay {
		n.Flags = hcnjson.EnableNonPersistent
	}
	return n
}

func networkType(t platform.NetworkType) hcnjson.NetworkType {
	if t == platform.Overlay {
		return hcnjson.Overlay
	}
	return hcnjson.L2Bridge
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only plain structs are marshalled here
	}
	return b
}

func adapterPolicy(adapter string) hcnjson.NetworkPolicy {
	return hcnjson.NetworkPolicy{Type: hcnjson.NetAdapterName,
		Settings: mustJSON(hcnjson.NetAdapterNameNetworkPolicySetting{NetworkAdapterName: adapter})}
}

// subnet is a static subnet with its default route through gateway (HNS refuses a subnet
// without one: "subnet has address prefix but no gateway specified"), and the VSID policy
// when vsid is set.
func subnet(prefix netip.Prefix, gateway netip.Addr, vsid int32) hcnjson.Subnet {
	s := hcnjson.Subnet{IpAddressPrefix: prefix.String(), Routes: []hcnjson.Route{{NextHop: gateway.String(), DestinationPrefix: "0.0.0.0/0"}}}
	if vsid != 0 {
		s.Policies = []json.RawMessage{mustJSON(hcnjson.SubnetPolicy{Type: hcnjson.VSID,
			Settings: mustJSON(hcnjson.VsidPolicySetting{IsolationId: uint32(vsid)})})}
	}
	return s
}

// sameSubnet reports whether an existing network has exactly the type, subnet, gateway and VSID
// of a request, and its adapter when HNS reports one.
func sameSubnet(existing, want *hcnjson.HostComputeNetwork) bool {
	if existing.Type != want.Type || len(existing.Ipams) == 0 || len(existing.Ipams[0].Subnets) == 0 {
		return false
	}
	got, w := existing.Ipams[0].Subnets[0], want.Ipams[0].Subnets[0]
	if got.IpAddressPrefix != w.IpAddressPrefix || gatewayOf(got) != gatewayOf(w) || vsidOf(got) != vsidOf(w) {
		return false
	}
	if a, ok := adapterOf(existing); ok && a != mustAdapter(want) {
		return false
	}
	return true
}

func bootstrapMatches(spec platform.NetworkSpec) func(*hcnjson.HostComputeNetwork) bool {
	want := bootstrapRequest(spec)
	return func(n *hcnjson.HostComputeNetwork) bool { return sameSubnet(n, want) }
}

func podMatches(spec platform.NetworkSpec) func(*hcnjson.HostComputeNetwork) bool {
	want := podRequest(spec)
	return func(n *hcnjson.HostComputeNetwork) bool {
		return sameSubnet(n, want) && n.Flags&hcnjson.EnableNonPersistent == want.Flags&hcnjson.EnableNonPersistent
	}
}

func gatewayOf(s hcnjson.Subnet) string {
	for _, r := range s.Routes {
		if r.DestinationPrefix == "0.0.0.0/0" {
			return r.NextHop
		}
	}
	return ""
}

func vsidOf(s hcnjson.Subnet) uint32 {
	for _, raw := range s.Policies {
		var sp hcnjson.SubnetPolicy
		var v hcnjson.VsidPolicySetting
		if json.Unmarshal(raw, &sp) == nil && sp.Type == hcnjson.VSID && json.Unmarshal(sp.Settings, &v) == nil {
			return v.IsolationId
		}
	}
	return 0
}

func adapterOf(n *hcnjson.HostComputeNetwork) (string, bool) {
	for _, pol := range n.Policies {
		var s hcnjson.NetAdapterNameNetworkPolicySetting
		if pol.Type == hcnjson.NetAdapterName && json.Unmarshal(pol.Settings, &s) == nil {
			return s.NetworkAdapterName, true
		}
	}
	return "", false
}

func mustAdapter(n *hcnjson.HostComputeNetwork) string { a, _ := adapterOf(n); return a }

func hasPolicy(n *hcnjson.HostComputeNetwork, t hcnjson.NetworkPolicyType) bool {
	return slices.ContainsFunc(n.Policies, func(p hcnjson.NetworkPolicy) bool { return p.Type == t })
}

// providerAddress is an overlay network's management address, which HNS reports as a
// ProviderAddress policy (flannel pkg/backend/vxlan/device_windows.go getManagementIP).
func providerAddress(n *hcnjson.HostComputeNetwork) netip.Addr {
	for _, pol := range n.Policies {
		var s hcnjson.ProviderAddressEndpointPolicySetting
		if pol.Type == hcnjson.ProviderAddress && json.Unmarshal(pol.Settings, &s) == nil {
			if a, err := netip.ParseAddr(s.ProviderAddress); err == nil {
				return a
			}
		}
	}
	return netip.Addr{}
}

// drMAC is an overlay network's distributed router MAC, which HNS reports as a DrMacAddress
// policy, in the form flannel publishes as the node's VtepMAC (flannel
// pkg/backend/vxlan/vxlan_windows.go: net.ParseMAC, then net.HardwareAddr.String).
func drMAC(n *hcnjson.HostComputeNetwork) (string, error) {
	for _, pol := range n.Policies {
		var s hcnjson.DrMacAddressNetworkPolicySetting
		if pol.Type == hcnjson.DrMacAddress && json.Unmarshal(pol.Settings, &s) == nil {
			mac, err := net.ParseMAC(s.Address)
			if err != nil {
				return "", fmt.Errorf("DR MAC %q: %w", s.Address, err)
			}
			return mac.String(), nil
		}
	}
	return "", errors.New("HNS reports no distributed router MAC (DrMacAddress policy)")
}

// hostEndpointName is the l2bridge network's host endpoint, <network>_ep as flannel names it
// (pkg/backend/hostgw/hostgw_windows.go).
func hostEndpointName(network string) string { return network + "_ep" }

// hostEndpointRequest is the host endpoint: the pods' gateway at the pod CIDR's second address
// (GCE Get_Endpoint_Gateway_From_CIDR; flannel host-gw "a 1.2 endpoint"), created through hcn
// with gateway 0.0.0.0 so that the host gets no second default route through it (GCE
// k8s-node-setup.psm1: New-HnsEndpoint -Gateway "0.0.0.0"; Microsoft windows-container-networking
// test/utilities CreateGatewayEp: IpConfigurations without prefix, route 0.0.0.0/0 via 0.0.0.0).
func hostEndpointRequest(spec platform.NetworkSpec, networkID string) *hcnjson.HostComputeEndpoint {
	return &hcnjson.HostComputeEndpoint{
		Name:               hostEndpointName(spec.Name),
		HostComputeNetwork: networkID,
		IpConfigurations:   []hcnjson.IpConfig{{IpAddress: spec.HostEndpoint.String()}},
		Routes:             []hcnjson.Route{{NextHop: "0.0.0.0", DestinationPrefix: "0.0.0.0/0"}},
		SchemaVersion:      hcnjson.V2,
	}
}

// ensureHostEndpoint keeps the host endpoint when it is on this network with the right address
// and re-creates it otherwise, attaches it to the host (again: attaching an attached endpoint
// is harmless, flannel host-gw does it on every start) and turns forwarding on for it and the
// management vNIC (flannel host-gw step 7; GCE: netsh ... forwarding=enabled).
func (p *Platform) ensureHostEndpoint(ctx context.Context, pod *hcnjson.HostComputeNetwork, spec platform.NetworkSpec) error {
	name := hostEndpointName(spec.Name)
	want := hostEndpointRequest(spec, pod.Id)
	ep, err := p.b.HNS.EndpointByName(name)
	switch {
	case err == nil && ep.HostComputeNetwork == pod.Id && len(ep.IpConfigurations) > 0 &&
		ep.IpConfigurations[0].IpAddress == want.IpConfigurations[0].IpAddress:
	case err == nil:
		if err := p.b.HNS.DeleteEndpoint(ep.Id); err != nil && !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("delete the stale host endpoint %s: %w", name, err)
		}
		ep = nil
	case errors.Is(err, ErrNotFound):
		ep = nil
	default:
		return err
	}
	if ep == nil {
		if ep, err = p.b.HNS.CreateEndpoint(want); err != nil {
			return fmt.Errorf("create the host endpoint %s: %w", name, err)
		}
	}
	if err := retry(ctx, 10, 500*time.Millisecond, func() error {
		if err := p.b.HNS.AttachHost(ep.Id); err != nil && !errors.Is(err, ErrAlreadyAttached) {
			return err
		}
		return nil
	}); err != nil {
		return fmt.Errorf("attach the host endpoint %s to the host: %w", name, err)
	}
	// HNS creates the endpoint's host vNIC after HostAttach returns: find it by the endpoint's
	// address, as flannel does (pkg/backend/hostgw/hostgw_windows.go step 7,
	// ip.GetInterfaceByIP), waiting for it as flannel waits for the management vNIC.
	var vnic string
	if err := p.waitFor(ctx, 45*time.Second, fmt.Sprintf("no host interface holds %s, the address of the host endpoint %s", spec.HostEndpoint, name),
		func() (bool, error) {
			var err error
			vnic, err = p.interfaceWith(spec.HostEndpoint)
			return vnic != "", err
		}); err != nil {
		return err
	}
	s := forwardingScript([]string{vnic, managementAdapter(spec.Adapter)})
	if _, err := p.b.Shell.Run(ctx, s); err != nil {
		return fmt.Errorf("enable forwarding: %w", err)
	}
	return nil
}

// missingMetadataRoutes lists the routes to the metadata endpoints that ensureMetadataRoutes
// would add: on each of the adapters that exists and holds an address (a vSwitch's physical
// adapter holds none, and New-NetRoute fails on it), a route to each endpoint through it.
func (p *Platform) missingMetadataRoutes(adapters []string) ([]string, error) {
	ifs, err := p.b.System.Interfaces()
	if err != nil {
		return nil, err
	}
	rs, err := p.b.System.IPv4Routes()
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, name := range adapters {
		i := slices.IndexFunc(ifs, func(ifc Interface) bool { return ifc.Name == name })
		if i < 0 || len(ifs[i].Addrs) == 0 {
			continue
		}
		for _, dst := range metadataEndpoints {
			if !slices.ContainsFunc(rs, func(r ActiveRoute) bool { return r.Destination == dst && r.InterfaceIndex == ifs[i].Index }) {
				missing = append(missing, fmt.Sprintf("no route to %s on %s (a metadata endpoint)", dst, name))
			}
		}
	}
	return missing, nil
}

func (p *Platform) ensureMetadataRoutes(ctx context.Context, adapters []string) error {
	if _, err := p.b.Shell.Run(ctx, metadataRoutesScript(adapters, metadataEndpoints)); err != nil {
		return fmt.Errorf("restore the routes to the metadata endpoints: %w", err)
	}
	return nil
}

// remoteSubnetPolicy is a peer's pod CIDR on the overlay, as flannel programs it
// (pkg/backend/vxlan/vxlan_network_windows.go handleSubnetEvents).
func remoteSubnetPolicy(rs platform.RemoteSubnet) hcnjson.NetworkPolicy {
	return hcnjson.NetworkPolicy{Type: hcnjson.RemoteSubnetRoute, Settings: mustJSON(remoteSubnetSetting(rs))}
}

func remoteSubnetSetting(rs platform.RemoteSubnet) hcnjson.RemoteSubnetRoutePolicySetting {
	return hcnjson.RemoteSubnetRoutePolicySetting{
		DestinationPrefix: rs.Destination.String(), IsolationId: uint16(rs.VNI),
		ProviderAddress: rs.ProviderAddress.String(), DistributedRouterMacAddress: rs.VTEPMAC,
	}
}

// ReplaceRemoteSubnets removes the network's remote subnet routes that are not wanted (with
// the settings HNS holds, as flannel removes them) and adds the missing ones. A route is a
// peer's DestinationPrefix, as flannel identifies it (pkg/backend/vxlan/vxlan_network_windows.go
// handleSubnetEvents replaces the policy with the same DestinationPrefix); one held with the
// wanted provider address, VNI and MAC stays. MACs are compared as addresses: HNS reports them
// in its own form ("0E-2A-..."), not the one they were sent in.
func (n network) ReplaceRemoteSubnets(_ context.Context, name string, subnets []platform.RemoteSubnet) (bool, error) {
	hns := n.p.b.HNS
	nw, err := hns.NetworkByName(name)
	if err != nil {
		return false, fmt.Errorf("network %s: %w", name, err)
	}
	changed := false
	kept := map[string]bool{}
	for _, pol := range nw.Policies {
		var s hcnjson.RemoteSubnetRoutePolicySetting
		if pol.Type != hcnjson.RemoteSubnetRoute || json.Unmarshal(pol.Settings, &s) != nil {
			continue
		}
		if slices.ContainsFunc(subnets, func(rs platform.RemoteSubnet) bool { return sameRemoteSubnet(remoteSubnetSetting(rs), s) }) &&
			!kept[s.DestinationPrefix] {
			kept[s.DestinationPrefix] = true
			continue
		}
		req := hcnjson.PolicyNetworkRequest{Policies: []hcnjson.NetworkPolicy{{Type: hcnjson.RemoteSubnetRoute, Settings: pol.Settings}}}
		if err := hns.RemoveNetworkPolicy(nw.Id, req); err != nil {
			return changed, fmt.Errorf("remove the remote subnet %s: %w", s.DestinationPrefix, err)
		}
		changed = true
	}
	for _, rs := range subnets {
		if kept[rs.Destination.String()] {
			continue
		}
		req := hcnjson.PolicyNetworkRequest{Policies: []hcnjson.NetworkPolicy{remoteSubnetPolicy(rs)}}
		if err := hns.AddNetworkPolicy(nw.Id, req); err != nil {
			return changed, fmt.Errorf("add the remote subnet %s: %w", rs.Destination, err)
		}
		changed = true
	}
	return changed, nil
}

// sameRemoteSubnet says whether HNS's route have is the route want: the same destination,
// provider address and VNI, and the same MAC address whatever its form.
func sameRemoteSubnet(want, have hcnjson.RemoteSubnetRoutePolicySetting) bool {
	if want.DestinationPrefix != have.DestinationPrefix || want.ProviderAddress != have.ProviderAddress || want.IsolationId != have.IsolationId {
		return false
	}
	w, err1 := net.ParseMAC(want.DistributedRouterMacAddress)
	h, err2 := net.ParseMAC(have.DistributedRouterMacAddress)
	return err1 == nil && err2 == nil && bytes.Equal(w, h)
}

// retry runs f up to attempts times, waiting delay, 2×delay, ... in between.
func retry(ctx context.Context, attempts int, delay time.Duration, f func() error) error {
	var err error
	for i := 0; i < attempts; i++ {
		if err = f(); err == nil {
			return nil
		}
		if i == attempts-1 {
			break
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(time.Duration(i+1) * delay):
		}
	}
	return err
}
