package windows

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"unsafe"

	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/registry"
)

// system answers from the running Windows.
type system struct{}

func (system) ComputerName() (string, error) { return os.Hostname() }

// ImageState reads the REG_SZ value ImageState of HKLM\SOFTWARE\Microsoft\Windows\CurrentVersion\Setup\State
// (https://learn.microsoft.com/en-us/windows-hardware/manufacture/desktop/windows-setup-states).
func (system) ImageState() (string, error) {
	k, err := registry.OpenKey(registry.LOCAL_MACHINE, `SOFTWARE\Microsoft\Windows\CurrentVersion\Setup\State`, registry.QUERY_VALUE)
	if err != nil {
		return "", err
	}
	defer func() { _ = k.Close() }() // freeing the handle cannot change the value read
	v, _, err := k.GetStringValue("ImageState")
	return v, err
}

func (system) OSBuild() (uint32, error) { return windows.RtlGetVersion().BuildNumber, nil }

// memoryStatusEx is MEMORYSTATUSEX, whose dwLength must be set to its size before the call
// (https://learn.microsoft.com/en-us/windows/win32/api/sysinfoapi/ns-sysinfoapi-memorystatusex).
type memoryStatusEx struct {
	length, memoryLoad                        uint32
	totalPhys, availPhys, totalPageFile       uint64
	availPageFile, totalVirtual, availVirtual uint64
	availExtendedVirtual                      uint64
}

var procGlobalMemoryStatusEx = windows.NewLazySystemDLL("kernel32.dll").NewProc("GlobalMemoryStatusEx")

// Memory is ullTotalPhys of GlobalMemoryStatusEx
// (https://learn.microsoft.com/en-us/windows/win32/api/sysinfoapi/nf-sysinfoapi-globalmemorystatusex).
func (system) Memory() (uint64, error) {
	st := memoryStatusEx{length: uint32(unsafe.Sizeof(memoryStatusEx{}))}
	if r, _, err := procGlobalMemoryStatusEx.Call(uintptr(unsafe.Pointer(&st))); r == 0 {
		return 0, fmt.Errorf("GlobalMemoryStatusEx: %w", err)
	}
	return st.totalPhys, nil
}

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

// IPv4Routes reads the IPv4 forwarding table with GetIpForwardTable2
// (https://learn.microsoft.com/en-us/windows/win32/api/netioapi/nf-netioapi-getipforwardtable2),
// which the caller frees with FreeMibTable. An IPv4 SOCKADDR_INET is a sockaddr_in.
func (system) IPv4Routes() ([]ActiveRoute, error) {
	var t *windows.MibIpForwardTable2
	if err := windows.GetIpForwardTable2(windows.AF_INET, &t); err != nil {
		return nil, fmt.Errorf("GetIpForwardTable2: %w", err)
	}
	defer windows.FreeMibTable(unsafe.Pointer(t))
	rows := t.Rows()
	out := make([]ActiveRoute, 0, len(rows))
	for i := range rows {
		r := &rows[i]
		dst := (*windows.RawSockaddrInet4)(unsafe.Pointer(&r.DestinationPrefix.Prefix))
		hop := (*windows.RawSockaddrInet4)(unsafe.Pointer(&r.NextHop))
		out = append(out, ActiveRoute{
			Destination:    netip.PrefixFrom(netip.AddrFrom4(dst.Addr), int(r.DestinationPrefix.PrefixLength)),
			NextHop:        netip.AddrFrom4(hop.Addr),
			InterfaceIndex: int(r.InterfaceIndex),
		})
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
