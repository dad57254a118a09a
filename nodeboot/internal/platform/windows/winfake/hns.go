package winfake

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/kubewin/kubewin/nodeboot/internal/platform/windows"
	"github.com/kubewin/kubewin/nodeboot/internal/platform/windows/hcnjson"
)

type hns struct{ m *Machine }

var _ windows.HNS = hns{}

func clone[T any](v T) T {
	var out T
	b, _ := json.Marshal(v)
	_ = json.Unmarshal(b, &out)
	return out
}

func findNetwork(st *State, match func(*hcnjson.HostComputeNetwork) bool) *hcnjson.HostComputeNetwork {
	for i := range st.Networks {
		if match(&st.Networks[i]) {
			return &st.Networks[i]
		}
	}
	return nil
}

func (h hns) NetworkByName(name string) (*hcnjson.HostComputeNetwork, error) {
	var out *hcnjson.HostComputeNetwork
	err := h.m.do(Op{Backend: "hns", Call: "NetworkByName", Target: name}, true, func(st *State) (bool, error) {
		n := findNetwork(st, func(n *hcnjson.HostComputeNetwork) bool { return n.Name == name })
		if n == nil {
			return false, errNotFound("network " + name)
		}
		c := clone(*n)
		out = &c
		return false, nil
	})
	return out, err
}

func (h hns) Networks() ([]hcnjson.HostComputeNetwork, error) {
	var out []hcnjson.HostComputeNetwork
	err := h.m.do(Op{Backend: "hns", Call: "Networks"}, true, func(st *State) (bool, error) {
		out = clone(st.Networks)
		return false, nil
	})
	return out, err
}

func (h hns) NetworkByID(id string) (*hcnjson.HostComputeNetwork, error) {
	var out *hcnjson.HostComputeNetwork
	err := h.m.do(Op{Backend: "hns", Call: "NetworkByID", Target: id}, true, func(st *State) (bool, error) {
		n := findNetwork(st, func(n *hcnjson.HostComputeNetwork) bool { return n.Id == id })
		if n == nil {
			return false, errNotFound("network " + id)
		}
		c := clone(*n)
		out = &c
		return false, nil
	})
	return out, err
}

// checkSubnets is hcn's validation of a network's subnets (hcn/hcnnetwork.go Create).
func checkSubnets(n *hcnjson.HostComputeNetwork) error {
	for _, ipam := range n.Ipams {
		for _, s := range ipam.Subnets {
			if s.IpAddressPrefix == "" {
				continue
			}
			if _, err := netip.ParsePrefix(s.IpAddressPrefix); err != nil {
				return fmt.Errorf("subnet %q: %w", s.IpAddressPrefix, err)
			}
			gw := false
			for _, r := range s.Routes {
				if r.NextHop == "" {
					return errors.New("network create error, subnet has address prefix but no gateway specified")
				}
				gw = gw || r.DestinationPrefix == "0.0.0.0/0"
			}
			if !gw {
				return errors.New("network create error, no default gateway")
			}
		}
	}
	return nil
}

func (h hns) CreateNetwork(req *hcnjson.HostComputeNetwork) (*hcnjson.HostComputeNetwork, error) {
	var out *hcnjson.HostComputeNetwork
	err := h.m.do(Op{Backend: "hns", Call: "CreateNetwork", Target: req.Name, Body: toJSON(req)}, true, func(st *State) (bool, error) {
		if req.Type != hcnjson.L2Bridge && req.Type != hcnjson.Overlay {
			return false, fmt.Errorf("network type %q is not simulated", req.Type)
		}
		if findNetwork(st, func(n *hcnjson.HostComputeNetwork) bool { return n.Name == req.Name }) != nil {
			return false, errors.New("hnsCall failed in Win32: A network with this name already exists. (0x803b0010)")
		}
		if err := checkSubnets(req); err != nil {
			return false, err
		}
		adapter := networkAdapter(req, h.m.cfg.Adapter)
		if err := h.m.vSwitchUp(st, adapter); err != nil {
			return false, err
		}
		n := clone(*req)
		n.Id = h.m.nextID(st)
		// HNS reports the management address of an overlay network as its ProviderAddress
		// policy, which flannel reads for Overlay only (pkg/backend/vxlan/device_windows.go
		// getManagementIP); for L2Bridge, flannel reads the v1 network's ManagementIP
		// (pkg/backend/hostgw/hostgw_windows.go), which ManagementIP answers.
		mgmt := adapterByName(st, "vEthernet ("+adapter+")")
		if len(mgmt.Addrs) > 0 && n.Type == hcnjson.Overlay {
			n.Policies = append(n.Policies, hcnjson.NetworkPolicy{Type: hcnjson.ProviderAddress,
				Settings: json.RawMessage(toJSON(hcnjson.ProviderAddressEndpointPolicySetting{ProviderAddress: mgmt.Addrs[0].Addr().String()}))})
		}
		if n.Type == hcnjson.Overlay {
			d := digest(h.m.cfg.ComputerName)
			mac := fmt.Sprintf("00-15-5D-%02X-%02X-%02X", d[0], d[1], d[2])
			n.Policies = append(n.Policies, hcnjson.NetworkPolicy{Type: hcnjson.DrMacAddress,
				Settings: json.RawMessage(toJSON(hcnjson.DrMacAddressNetworkPolicySetting{Address: mac}))})
		}
		st.Networks = append(st.Networks, n)
		c := clone(n)
		out = &c
		return true, nil
	})
	return out, err
}

// ManagementIP is the address of the management vNIC of the network's adapter, which HNS's
// v1 API reports for a network of any type.
func (h hns) ManagementIP(networkID string) (string, error) {
	var ip string
	err := h.m.do(Op{Backend: "hns", Call: "ManagementIP", Target: networkID}, true, func(st *State) (bool, error) {
		n := findNetwork(st, func(n *hcnjson.HostComputeNetwork) bool { return n.Id == networkID })
		if n == nil {
			return false, errNotFound("network " + networkID)
		}
		if mgmt := adapterByName(st, "vEthernet ("+networkAdapter(n, h.m.cfg.Adapter)+")"); mgmt != nil && len(mgmt.Addrs) > 0 {
			ip = mgmt.Addrs[0].Addr().String()
		}
		return false, nil
	})
	return ip, err
}

func (h hns) DeleteNetwork(id string) error {
	return h.m.do(Op{Backend: "hns", Call: "DeleteNetwork", Target: id}, true, func(st *State) (bool, error) {
		n := findNetwork(st, func(n *hcnjson.HostComputeNetwork) bool { return n.Id == id })
		if n == nil {
			return false, errNotFound("network " + id)
		}
		if slices.ContainsFunc(st.Endpoints, func(ep Endpoint) bool { return ep.HostComputeNetwork == id }) {
			return false, fmt.Errorf("network %s has endpoints: delete them first", n.Name)
		}
		adapter := networkAdapter(n, h.m.cfg.Adapter)
		st.Networks = slices.DeleteFunc(st.Networks, func(x hcnjson.HostComputeNetwork) bool { return x.Id == id })
		if !h.m.adapterInUse(st, adapter) {
			h.m.vSwitchDown(st, adapter)
		}
		return true, nil
	})
}

func samePolicy(a, b hcnjson.NetworkPolicy) bool {
	if a.Type != b.Type {
		return false
	}
	var x, y any
	if json.Unmarshal(a.Settings, &x) != nil || json.Unmarshal(b.Settings, &y) != nil {
		return string(a.Settings) == string(b.Settings)
	}
	return toJSON(x) == toJSON(y)
}

func remoteSubnetPrefix(p hcnjson.NetworkPolicy) string {
	var s hcnjson.RemoteSubnetRoutePolicySetting
	if p.Type != hcnjson.RemoteSubnetRoute || json.Unmarshal(p.Settings, &s) != nil {
		return ""
	}
	return s.DestinationPrefix
}

// echoMACs is a network policy as HNS holds and reports it: HNS keeps a MAC address as its six
// bytes and prints it in Windows' form, upper-case hexadecimal pairs joined by dashes, whatever
// form it was given (flannel sends net.HardwareAddr's "0e:2a:..."; hcsshim's own test sends
// "00-12-34-56-78-9a", hcn/hcnutils_test.go HcnCreateTestRemoteSubnetRoute; HNS answers MACs as
// "00-15-5D-F2-0F-FF", e.g. Get-HnsNetwork's MacPools in projectcalico/calico#8465).
func echoMACs(p hcnjson.NetworkPolicy) hcnjson.NetworkPolicy {
	var s hcnjson.RemoteSubnetRoutePolicySetting
	if p.Type != hcnjson.RemoteSubnetRoute || json.Unmarshal(p.Settings, &s) != nil {
		return p
	}
	mac, err := net.ParseMAC(s.DistributedRouterMacAddress)
	if err != nil {
		return p
	}
	s.DistributedRouterMacAddress = strings.ToUpper(strings.ReplaceAll(mac.String(), ":", "-"))
	return hcnjson.NetworkPolicy{Type: p.Type, Settings: json.RawMessage(toJSON(s))}
}

func (h hns) AddNetworkPolicy(networkID string, req hcnjson.PolicyNetworkRequest) error {
	return h.m.do(Op{Backend: "hns", Call: "AddNetworkPolicy", Target: networkID, Body: toJSON(req)}, true, func(st *State) (bool, error) {
		n := findNetwork(st, func(n *hcnjson.HostComputeNetwork) bool { return n.Id == networkID })
		if n == nil {
			return false, errNotFound("network " + networkID)
		}
		for _, p := range req.Policies {
			for _, have := range n.Policies {
				if samePolicy(have, p) || (p.Type == hcnjson.HostRoute && have.Type == hcnjson.HostRoute) ||
					(remoteSubnetPrefix(p) != "" && remoteSubnetPrefix(p) == remoteSubnetPrefix(have)) {
					return false, fmt.Errorf("network %s already has a %s policy like %s", n.Name, p.Type, p.Settings)
				}
			}
			n.Policies = append(n.Policies, echoMACs(p))
		}
		return true, nil
	})
}

func (h hns) RemoveNetworkPolicy(networkID string, req hcnjson.PolicyNetworkRequest) error {
	return h.m.do(Op{Backend: "hns", Call: "RemoveNetworkPolicy", Target: networkID, Body: toJSON(req)}, true, func(st *State) (bool, error) {
		n := findNetwork(st, func(n *hcnjson.HostComputeNetwork) bool { return n.Id == networkID })
		if n == nil {
			return false, errNotFound("network " + networkID)
		}
		for _, p := range req.Policies {
			i := slices.IndexFunc(n.Policies, func(have hcnjson.NetworkPolicy) bool { return samePolicy(have, p) })
			if i < 0 {
				return false, fmt.Errorf("network %s has no %s policy like %s", n.Name, p.Type, p.Settings)
			}
			n.Policies = slices.Delete(n.Policies, i, i+1)
		}
		return true, nil
	})
}

func (h hns) EndpointsOfNetwork(networkID string) ([]hcnjson.HostComputeEndpoint, error) {
	var out []hcnjson.HostComputeEndpoint
	err := h.m.do(Op{Backend: "hns", Call: "EndpointsOfNetwork", Target: networkID}, true, func(st *State) (bool, error) {
		for _, ep := range st.Endpoints {
			if ep.HostComputeNetwork == networkID {
				out = append(out, clone(ep.HostComputeEndpoint))
			}
		}
		return false, nil
	})
	return out, err
}

func (h hns) EndpointByName(name string) (*hcnjson.HostComputeEndpoint, error) {
	var out *hcnjson.HostComputeEndpoint
	err := h.m.do(Op{Backend: "hns", Call: "EndpointByName", Target: name}, true, func(st *State) (bool, error) {
		for _, ep := range st.Endpoints {
			if ep.Name == name {
				c := clone(ep.HostComputeEndpoint)
				out = &c
				return false, nil
			}
		}
		return false, errNotFound("endpoint " + name)
	})
	return out, err
}

func (h hns) CreateEndpoint(req *hcnjson.HostComputeEndpoint) (*hcnjson.HostComputeEndpoint, error) {
	var out *hcnjson.HostComputeEndpoint
	err := h.m.do(Op{Backend: "hns", Call: "CreateEndpoint", Target: req.Name, Body: toJSON(req)}, true, func(st *State) (bool, error) {
		if req.HostComputeNamespace != "" {
			return false, errors.New("endpoint create error, endpoint json HostComputeNamespace is read only and should not be set")
		}
		n := findNetwork(st, func(n *hcnjson.HostComputeNetwork) bool { return n.Id == req.HostComputeNetwork })
		if n == nil {
			return false, errNotFound("network " + req.HostComputeNetwork)
		}
		if slices.ContainsFunc(st.Endpoints, func(ep Endpoint) bool { return ep.Name == req.Name }) {
			return false, fmt.Errorf("an endpoint named %s already exists", req.Name)
		}
		prefix, _ := netip.ParsePrefix(n.Ipams[0].Subnets[0].IpAddressPrefix)
		for _, ipc := range req.IpConfigurations {
			if a, err := netip.ParseAddr(ipc.IpAddress); err != nil || !prefix.Contains(a) {
				return false, fmt.Errorf("endpoint address %q is not in the network's subnet %s", ipc.IpAddress, prefix)
			}
		}
		ep := Endpoint{HostComputeEndpoint: clone(*req)}
		ep.Id = h.m.nextID(st)
		st.Endpoints = append(st.Endpoints, ep)
		c := clone(ep.HostComputeEndpoint)
		out = &c
		return true, nil
	})
	return out, err
}

func (h hns) DeleteEndpoint(id string) error {
	return h.m.do(Op{Backend: "hns", Call: "DeleteEndpoint", Target: id}, true, func(st *State) (bool, error) {
		i := slices.IndexFunc(st.Endpoints, func(ep Endpoint) bool { return ep.Id == id })
		if i < 0 {
			return false, errNotFound("endpoint " + id)
		}
		removeAdapter(st, "vEthernet ("+st.Endpoints[i].Name+")")
		st.Endpoints = slices.Delete(st.Endpoints, i, i+1)
		return true, nil
	})
}

func (h hns) LoadBalancers() ([]hcnjson.HostComputeLoadBalancer, error) {
	var out []hcnjson.HostComputeLoadBalancer
	err := h.m.do(Op{Backend: "hns", Call: "LoadBalancers"}, true, func(st *State) (bool, error) {
		out = clone(st.LoadBalancers)
		return false, nil
	})
	return out, err
}

func (h hns) DeleteLoadBalancer(id string) error {
	return h.m.do(Op{Backend: "hns", Call: "DeleteLoadBalancer", Target: id}, true, func(st *State) (bool, error) {
		i := slices.IndexFunc(st.LoadBalancers, func(lb hcnjson.HostComputeLoadBalancer) bool { return lb.Id == id })
		if i < 0 {
			return false, errNotFound("load balancer " + id)
		}
		st.LoadBalancers = slices.Delete(st.LoadBalancers, i, i+1)
		return true, nil
	})
}

// AttachHost attaches the endpoint to the host: its vNIC "vEthernet (<name>)" appears, with the
// endpoint's address on the network's prefix, HostVNICDelay later (hostVNICs).
func (h hns) AttachHost(id string) error {
	return h.m.do(Op{Backend: "hns", Call: "AttachHost", Target: id}, true, func(st *State) (bool, error) {
		i := slices.IndexFunc(st.Endpoints, func(ep Endpoint) bool { return ep.Id == id })
		if i < 0 {
			return false, errNotFound("endpoint " + id)
		}
		ep := &st.Endpoints[i]
		if ep.Attached {
			//nolint:staticcheck,revive // ST1005: Windows' own message, verbatim
			return false, fmt.Errorf("This endpoint is already attached to the switch.: %w", windows.ErrAlreadyAttached)
		}
		delay := h.m.cfg.HostVNICDelay
		if delay == 0 {
			delay = 100 * time.Millisecond
		}
		ep.Attached, ep.VNICAt = true, h.m.now().Add(delay)
		return true, nil
	})
}

// hostVNICs adds the host vNICs of the attached endpoints whose time has come.
func (m *Machine) hostVNICs(st *State) bool {
	added := false
	for i := range st.Endpoints {
		ep := &st.Endpoints[i]
		if ep.VNICAt.IsZero() || m.now().Before(ep.VNICAt) {
			continue
		}
		ep.VNICAt = time.Time{}
		n := findNetwork(st, func(n *hcnjson.HostComputeNetwork) bool { return n.Id == ep.HostComputeNetwork })
		prefix, _ := netip.ParsePrefix(n.Ipams[0].Subnets[0].IpAddressPrefix)
		var addrs []netip.Prefix
		for _, ipc := range ep.IpConfigurations {
			a, _ := netip.ParseAddr(ipc.IpAddress)
			addrs = append(addrs, netip.PrefixFrom(a, prefix.Bits()))
		}
		addAdapter(st, "vEthernet ("+ep.Name+")", addrs)
		added = true
	}
	return added
}
