package windows

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/nodeboot/internal/platform"
)

// Platform is a Windows machine, reached through its backends.
type Platform struct {
	b Backends
	// Poll is how often a wait (for a service state, for a network's host interface) checks.
	Poll time.Duration
	// MetadataRecheck is how long after creating an HNS network the routes to the metadata
	// endpoints are checked once more: HNS may remove them with a delay (hcsshim issue 299;
	// kubernetes cluster/gce/windows/k8s-node-setup.psm1 waits 45 s before re-adding them).
	// Zero checks only right away.
	MetadataRecheck time.Duration
	// Metadata is the base URL of the instance metadata service, empty when the machine has none.
	Metadata string
	// Dial opens the node's connections to the cluster; nil: the operating system's.
	Dial platform.DialFunc
}

var (
	_ platform.Platform = (*Platform)(nil)
	_ platform.Host     = (*Platform)(nil)
)

// New returns the platform of the machine behind b.
func New(b Backends) *Platform {
	return &Platform{b: b, Poll: 250 * time.Millisecond, MetadataRecheck: 45 * time.Second}
}

func (p *Platform) ComputerName() (string, error) { return p.b.System.ComputerName() }

func (p *Platform) ImageState() (string, error) { return p.b.System.ImageState() }

func (p *Platform) MetadataEndpoint() string { return p.Metadata }

func (p *Platform) Dialer() platform.DialFunc { return p.Dial }

func (p *Platform) Path(win string) string { return p.b.Files.Path(win) }

func (p *Platform) WriteFile(win string, data []byte) error { return p.b.Files.Write(win, data, "") }

// OwnerOnly is the security descriptor of secrets: full control for SYSTEM and the
// Administrators, nobody else, not inherited (P: protected DACL).
const OwnerOnly = "D:P(A;;FA;;;SY)(A;;FA;;;BA)"

// WriteSecret creates the file with the owner-only DACL, so that it never exists with the
// permissions it would inherit from its directory.
func (p *Platform) WriteSecret(win string, data []byte) error {
	return p.b.Files.Write(win, data, OwnerOnly)
}

func (p *Platform) RemoveFile(win string) error { return p.b.Files.Remove(win) }

func (p *Platform) RemoveAll(win string) error { return p.b.Files.RemoveAll(win) }

func (p *Platform) Symlink(win, target string) error { return p.b.Files.Symlink(win, target) }

func (p *Platform) OSBuild() (uint32, error) { return p.b.System.OSBuild() }

func (p *Platform) Memory() (uint64, error) { return p.b.System.Memory() }

// dockerEnginePipe is Docker Engine's API pipe (\\.\pipe\docker_engine).
const dockerEnginePipe = "docker_engine"

// CheckRuntime checks that the runtime answers on its named pipe: containerd on its CRI
// endpoint; Docker Engine on its own pipe, since its CRI endpoint is cri-dockerd's, which
// nodeboot starts later.
func (p *Platform) CheckRuntime(_ context.Context, name v1alpha1.RuntimeName, endpoint string) error {
	pipe := strings.ReplaceAll(strings.TrimPrefix(endpoint, "npipe:"), `\`, "/")
	pipe = pipe[strings.LastIndex(pipe, "/")+1:]
	if name == v1alpha1.RuntimeDocker {
		pipe = dockerEnginePipe
	}
	if pipe == "" {
		return fmt.Errorf("endpoint %q names no pipe", endpoint)
	}
	if !p.b.System.PipeExists(pipe) {
		return fmt.Errorf("%s does not answer on \\\\.\\pipe\\%s: is its service running?", name, pipe)
	}
	return nil
}

// kubeletPort is the kubelet's serving port.
const kubeletPort = 10250

// CheckPorts checks that the kubelet's port is free.
func (p *Platform) CheckPorts() error {
	if err := p.b.System.PortFree(kubeletPort); err != nil {
		return fmt.Errorf("port %d (kubelet): %w", kubeletPort, err)
	}
	return nil
}

// managementAdapter is the host vNIC HNS puts in front of an adapter once a vSwitch is bound
// to it; the adapter's address moves there.
func managementAdapter(adapter string) string { return "vEthernet (" + adapter + ")" }

// Address finds the adapter's IPv4 address, on the management vNIC when there is one.
func (p *Platform) Address(adapter string) (netip.Addr, netip.Prefix, error) {
	ifs, err := p.b.System.Interfaces()
	if err != nil {
		return netip.Addr{}, netip.Prefix{}, err
	}
	var errs []error
	for _, name := range []string{managementAdapter(adapter), adapter} {
		found := false
		for _, ifc := range ifs {
			if ifc.Name != name {
				continue
			}
			found = true
			for _, a := range ifc.Addrs {
				if a.Addr().Is4() {
					return a.Addr(), a.Masked(), nil
				}
			}
		}
		if found {
			errs = append(errs, fmt.Errorf("adapter %q has no IPv4 address", name))
		} else {
			errs = append(errs, fmt.Errorf("no adapter named %q", name))
		}
	}
	return netip.Addr{}, netip.Prefix{}, errors.Join(errs...)
}

// LookupHost asks the DNS server at server only, over UDP (TCP when the answer is truncated),
// with Go's resolver, which Windows uses when PreferGo is set since Go 1.19 (package net's
// documentation: "On Windows, in Go 1.18.x and earlier, the resolver always used C library
// functions"), so that the host's own resolver configuration does not answer for the cluster
// DNS.
func (p *Platform) LookupHost(ctx context.Context, server netip.AddrPort, host string) ([]netip.Addr, error) {
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, server.String())
	}}
	return r.LookupNetIP(ctx, "ip4", host)
}

func (p *Platform) Network() platform.Network   { return network{p} }
func (p *Platform) Services() platform.Services { return services{p} }
func (p *Platform) Routes() platform.Routes     { return routes{p} }

// waitFor polls cond until it reports done, ctx ends or timeout passes; cond's last error is
// returned on timeout.
func (p *Platform) waitFor(ctx context.Context, timeout time.Duration, what string, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		done, err := cond()
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = ctx.Err()
			}
			return fmt.Errorf("%s: %w", what, err)
		case <-time.After(p.Poll):
		}
	}
}
