package windows

import (
	"net"
	"net/netip"
	"os"
	"strconv"

	"golang.org/x/sys/windows"
)

// system answers from the running Windows.
type system struct{}

func (system) ComputerName() (string, error) { return os.Hostname() }

func (system) OSBuild() (uint32, error) { return windows.RtlGetVersion().BuildNumber, nil }

func (system) Interfaces() ([]Interface, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	out := make([]Interface, 0, len(ifs))
	for _, ifc := range ifs {
		addrs, err := ifc.Addrs()
		if err != nil {
			return nil, err
		}
		i := Interface{Name: ifc.Name, Index: ifc.Index}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
				ip, _ := netip.AddrFromSlice(n.IP.To4())
				ones, _ := n.Mask.Size()
				i.Addrs = append(i.Addrs, netip.PrefixFrom(ip, ones))
			}
		}
		out = append(out, i)
	}
	return out, nil
}

func (system) PipeExists(name string) bool {
	_, err := os.Stat(`\\.\pipe\` + name)
	return err == nil
}

func (system) PortFree(port int) error {
	l, err := net.Listen("tcp", ":"+strconv.Itoa(port))
	if err != nil {
		return err
	}
	return l.Close()
}
