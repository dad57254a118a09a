package windows

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/windows"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/nodeboot/internal/platform"
)

// Platform is the Windows machine nodeboot runs on.
type Platform struct{}

var _ platform.Platform = (*Platform)(nil)

// New returns the platform.
func New() *Platform { return &Platform{} }

func (*Platform) ComputerName() (string, error) { return os.Hostname() }

func (*Platform) Path(win string) string { return win }

func (p *Platform) WriteFile(win string, data []byte) error { return write(win, data, false) }

func (p *Platform) WriteSecret(win string, data []byte) error { return write(win, data, true) }

// ownerOnly grants full control to SYSTEM and Administrators only, without inheritance.
const ownerOnly = "D:P(A;;FA;;;SY)(A;;FA;;;BA)"

func write(path string, data []byte, secret bool) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	if secret {
		if err := restrict(tmp); err != nil {
			os.Remove(tmp)
			return fmt.Errorf("restrict access to %s: %w", path, err)
		}
	}
	return os.Rename(tmp, path)
}

func restrict(path string) error {
	sd, err := windows.SecurityDescriptorFromString(ownerOnly)
	if err != nil {
		return err
	}
	dacl, _, err := sd.DACL()
	if err != nil {
		return err
	}
	return windows.SetNamedSecurityInfo(path, windows.SE_FILE_OBJECT,
		windows.DACL_SECURITY_INFORMATION|windows.PROTECTED_DACL_SECURITY_INFORMATION, nil, nil, dacl, nil)
}

func (*Platform) OSBuild() (uint32, error) { return windows.RtlGetVersion().BuildNumber, nil }

// CheckRuntime checks that the runtime's named pipe exists.
func (*Platform) CheckRuntime(_ context.Context, name v1alpha1.RuntimeName, endpoint string) error {
	pipe := strings.ReplaceAll(strings.TrimPrefix(endpoint, "npipe:"), "/", `\`)
	pipe = `\\.\pipe\` + pipe[strings.LastIndex(pipe, `\`)+1:]
	if _, err := os.Stat(pipe); err != nil {
		return fmt.Errorf("%s does not answer on %s: is its service running? (%w)", name, pipe, err)
	}
	return nil
}

// CheckPorts checks that the kubelet's port is free.
func (*Platform) CheckPorts() error {
	l, err := net.Listen("tcp", ":10250")
	if err != nil {
		return fmt.Errorf("port 10250 (kubelet): %w", err)
	}
	return l.Close()
}

// Address finds the adapter, or the management vNIC HNS puts in front of it once a vSwitch exists.
func (*Platform) Address(adapter string) (netip.Addr, netip.Prefix, error) {
	var errs []error
	for _, name := range []string{"vEthernet (" + adapter + ")", adapter} {
		ifc, err := net.InterfaceByName(name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			return netip.Addr{}, netip.Prefix{}, err
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
				ip, _ := netip.AddrFromSlice(n.IP.To4())
				ones, _ := n.Mask.Size()
				return ip, netip.PrefixFrom(ip, ones).Masked(), nil
			}
		}
		errs = append(errs, fmt.Errorf("adapter %q has no IPv4 address", name))
	}
	return netip.Addr{}, netip.Prefix{}, errors.Join(errs...)
}

func (*Platform) Network() platform.Network   { return network{} }
func (*Platform) Services() platform.Services { return services{} }
func (*Platform) Routes() platform.Routes     { return routes{} }
