package windows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"time"

	"github.com/Microsoft/hcsshim"
	"github.com/Microsoft/hcsshim/hcn"

	"github.com/kubewin/kubewin/nodeboot/internal/platform"
)

type network struct{}

// Ensure creates the throwaway External network first (it brings up the vSwitch and the
// management vNIC, blipping connectivity once), restores the metadata route HNS removes, then
// makes the pod network exist as specified: a network of the same name but another type or
// subnet (left over across reboots) is deleted and re-created.
func (network) Ensure(ctx context.Context, spec platform.NetworkSpec) error {
	if _, err := hcn.GetNetworkByName(spec.Bootstrap.Name); err != nil {
		if _, err := retry(ctx, func() (*hcn.HostComputeNetwork, error) { return bootstrapNetwork(spec).Create() }); err != nil {
			return fmt.Errorf("create the %s bootstrap network: %w", spec.Bootstrap.Name, err)
		}
		restoreMetadataRoute()
	}
	if existing, err := hcn.GetNetworkByName(spec.Name); err == nil {
		if matches(existing, spec) {
			return ensureHostEndpoint(ctx, existing, spec)
		}
		if err := existing.Delete(); err != nil {
			return fmt.Errorf("delete stale network %s: %w", spec.Name, err)
		}
	}
	created, err := retry(ctx, func() (*hcn.HostComputeNetwork, error) { return podNetwork(spec).Create() })
	if err != nil {
		return fmt.Errorf("create network %s: %w", spec.Name, err)
	}
	restoreMetadataRoute()
	return ensureHostEndpoint(ctx, created, spec)
}

func (network) Delete(_ context.Context, name string) error {
	n, err := hcn.GetNetworkByName(name)
	if err != nil {
		var notFound hcn.NetworkNotFoundError
		if errors.As(err, &notFound) {
			return nil
		}
		return err
	}
	return n.Delete()
}

func networkType(t platform.NetworkType) hcn.NetworkType {
	if t == platform.Overlay {
		return hcn.Overlay
	}
	return hcn.L2Bridge
}

func adapterPolicy(adapter string) hcn.NetworkPolicy {
	b, _ := json.Marshal(hcn.NetAdapterNameNetworkPolicySetting{NetworkAdapterName: adapter})
	return hcn.NetworkPolicy{Type: hcn.NetAdapterName, Settings: b}
}

func vsidPolicy(vsid int32) json.RawMessage {
	settings, _ := json.Marshal(hcn.VsidPolicySetting{IsolationId: uint32(vsid)})
	b, _ := json.Marshal(hcn.SubnetPolicy{Type: hcn.VSID, Settings: settings})
	return b
}

func subnet(prefix, gateway string, vsid int32) hcn.Subnet {
	s := hcn.Subnet{IpAddressPrefix: prefix, Routes: []hcn.Route{{NextHop: gateway, DestinationPrefix: "0.0.0.0/0"}}}
	if vsid != 0 {
		s.Policies = []json.RawMessage{vsidPolicy(vsid)}
	}
	return s
}

func bootstrapNetwork(spec platform.NetworkSpec) *hcn.HostComputeNetwork {
	return &hcn.HostComputeNetwork{
		Name: spec.Bootstrap.Name, Type: networkType(spec.Type),
		Ipams:         []hcn.Ipam{{Type: "Static", Subnets: []hcn.Subnet{subnet(spec.Bootstrap.Subnet.String(), spec.Bootstrap.Gateway.String(), spec.Bootstrap.VSID)}}},
		Policies:      []hcn.NetworkPolicy{adapterPolicy(spec.Adapter)},
		SchemaVersion: hcn.SchemaVersion{Major: 2, Minor: 0},
	}
}

func podNetwork(spec platform.NetworkSpec) *hcn.HostComputeNetwork {
	return &hcn.HostComputeNetwork{
		Name: spec.Name, Type: networkType(spec.Type),
		Ipams:         []hcn.Ipam{{Type: "Static", Subnets: []hcn.Subnet{subnet(spec.Subnet.String(), spec.Gateway.String(), spec.VNI)}}},
		Policies:      []hcn.NetworkPolicy{adapterPolicy(spec.Adapter)},
		SchemaVersion: hcn.SchemaVersion{Major: 2, Minor: 0},
	}
}

func matches(n *hcn.HostComputeNetwork, spec platform.NetworkSpec) bool {
	if n.Type != networkType(spec.Type) || len(n.Ipams) == 0 || len(n.Ipams[0].Subnets) == 0 {
		return false
	}
	return n.Ipams[0].Subnets[0].IpAddressPrefix == spec.Subnet.String()
}

// ensureHostEndpoint gives an l2bridge network its host vNIC (the pods' gateway) in the host
// compartment, with forwarding on.
func ensureHostEndpoint(ctx context.Context, n *hcn.HostComputeNetwork, spec platform.NetworkSpec) error {
	if spec.Type != platform.L2Bridge {
		return nil
	}
	name := spec.Name + "_ep"
	if _, err := hcsshim.GetHNSEndpointByName(name); err == nil {
		return nil
	}
	ep := &hcsshim.HNSEndpoint{Name: name, IPAddress: net.ParseIP(spec.HostEndpoint.String()), VirtualNetwork: n.Id}
	created, err := ep.Create()
	if err != nil {
		return fmt.Errorf("create host endpoint %s: %w", name, err)
	}
	if err := created.HostAttach(1); err != nil {
		return fmt.Errorf("attach host endpoint %s: %w", name, err)
	}
	out, err := exec.CommandContext(ctx, "netsh", "interface", "ipv4", "set", "interface", "vEthernet ("+name+")", "forwarding=enabled").CombinedOutput()
	if err != nil {
		return fmt.Errorf("enable forwarding on vEthernet (%s): %v: %s", name, err, out)
	}
	return nil
}

// restoreMetadataRoute re-adds the route to the instance metadata service that creating an
// HNS network removes (hcsshim issue 299); it may vanish with a delay, so it is added again
// after a pause.
func restoreMetadataRoute() {
	add := func() {
		_ = exec.Command("route", "/p", "add", "169.254.169.254", "mask", "255.255.255.255", "0.0.0.0").Run()
	}
	add()
	go func() { time.Sleep(45 * time.Second); add() }()
}

// retry retries HNS calls, which fail transiently while the vSwitch settles.
func retry(ctx context.Context, f func() (*hcn.HostComputeNetwork, error)) (*hcn.HostComputeNetwork, error) {
	var err error
	for i := 0; i < 5; i++ {
		var n *hcn.HostComputeNetwork
		if n, err = f(); err == nil {
			return n, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Duration(i+1) * 2 * time.Second):
		}
	}
	return nil, err
}
