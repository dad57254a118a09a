// Package simboot boots the ARM test server's machines as simulated machines with the custom data
// each was given: Windows instances as simulated Windows machines (package simmachine) running
// nodeboot, so that a Windows pool created through the test server really joins a control plane;
// Linux machines whose custom data is kubewin's cloud-init as simulated Linux machines (package
// simlinux) on which kubeadm makes a cluster's control plane and workers (see linux.go). Test and
// demo infrastructure, like the server itself.
package simboot

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/kubeadmboot"
	"github.com/kubewin/kubewin/internal/nodecmd"
	"github.com/kubewin/kubewin/internal/proc"
	"github.com/kubewin/kubewin/internal/sim/simmachine"
	"github.com/kubewin/kubewin/internal/testkit/armtest"
)

// Booter runs instances as simulated machines under Dir.
type Booter struct {
	// Dir holds a directory per instance.
	Dir string
	// Nodeboot is the nodeboot binary for this host.
	Nodeboot string
	// KubeBin holds kubeadm, kubectl and the control plane's programs, for Linux machines.
	KubeBin string
	// SetupTime is how long a Windows machine's setup runs once it boots (DefaultSetupTime when
	// zero). Its nodeboot service starts at once; the custom data file appears halfway through,
	// and the final computer name (until then a temporary WIN-... name) when setup completes.
	SetupTime time.Duration

	mu     sync.Mutex
	fault  func(in armtest.Instance, m *simmachine.Machine)
	images map[string]string // image ID (lower case) → image directory
	pids   map[string]int    // machine directory → nodeboot's PID
	linux  map[string]*linuxMachine
	// netURL serves the Windows machines' networks, nets[path] each (network.go).
	netURL string
	nets   map[string]armtest.Instance
	asked  []Connection
}

var _ armtest.Booter = (*Booter)(nil)

// AddImage says which kubewin-local image directory an image ID stands for.
func (b *Booter) AddImage(id, dir string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.images == nil {
		b.images = map[string]string{}
	}
	b.images[strings.ToLower(id)] = dir
}

// SetFault has f change each Windows instance's machine before it boots (a test's faulty
// machine), until SetFault(nil).
func (b *Booter) SetFault(f func(in armtest.Instance, m *simmachine.Machine)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fault = f
}

// machineDir is the instance's own directory. Computer names are unique within a scale set
// only: two scale sets (of two resource groups, say) may both name their first instance
// win000000, and each is a machine of its own, so the directory is named by the instance's
// resource ID too.
func (b *Booter) machineDir(in armtest.Instance) string {
	return filepath.Join(b.Dir, instanceName(in))
}

// instanceName names an instance's directory and network: its computer name and a hash of its
// resource ID.
func instanceName(in armtest.Instance) string {
	sum := sha256.Sum256([]byte(strings.ToLower(in.ID)))
	return strings.ToLower(in.ComputerName) + "-" + hex.EncodeToString(sum[:4])
}

// DefaultSetupTime is how long a simulated Windows machine's setup runs when Booter.SetupTime is
// zero.
const DefaultSetupTime = 2 * time.Second

// Boot provisions the instance's machine from its image and starts its nodeboot, while the
// machine's Windows setup runs: the custom data file is written halfway through setup, as Azure
// writes C:\AzureData\CustomData.bin during setup's specialize pass, and Boot returns once it is.
// The machine's address is the instance's private IP on its /24, as Azure's NIC has it; its
// instance metadata service is the test server's.
func (b *Booter) Boot(ctx context.Context, in armtest.Instance) error {
	if in.Linux {
		doc, err := kubeadmboot.Parse(in.CustomData)
		if err != nil {
			return fmt.Errorf("instance %s: a simulated Linux machine boots from kubewin's cloud-init only: %w", in.ComputerName, err)
		}
		return b.bootLinux(ctx, in, doc)
	}
	b.mu.Lock()
	image, ok := b.images[strings.ToLower(in.ImageID)]
	b.mu.Unlock()
	if !ok {
		return fmt.Errorf("instance %s: image %s has no image directory (Booter.AddImage)", in.ComputerName, in.ImageID)
	}
	dir := b.machineDir(in)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	setup := b.SetupTime
	if setup == 0 {
		setup = DefaultSetupTime
	}
	m := simmachine.Machine{
		Root: filepath.Join(dir, "drive"), ComputerName: strings.ToLower(in.ComputerName),
		Adapter: v1alpha1.DefaultInterfaceName, Address: in.PrivateIP, Subnet: netip.PrefixFrom(in.PrivateIP, 24).Masked(),
		SetupCompleteAt: time.Now().Add(setup), MetadataEndpoint: in.MetadataEndpoint,
	}
	network, err := b.network(in)
	if err != nil {
		return fmt.Errorf("instance %s: %w", in.ComputerName, err)
	}
	m.Network = network
	b.mu.Lock()
	fault := b.fault
	b.mu.Unlock()
	if fault != nil {
		fault(in, &m)
	}
	pid, err := simmachine.Boot(m, image, nil, b.Nodeboot, filepath.Join(dir, "nodeboot.log"))
	if err != nil {
		return fmt.Errorf("instance %s: %w", in.ComputerName, err)
	}
	b.mu.Lock()
	if b.pids == nil {
		b.pids = map[string]int{}
	}
	b.pids[dir] = pid
	b.mu.Unlock()
	if in.CustomData == nil {
		return nil
	}
	select {
	case <-time.After(setup / 2):
	case <-ctx.Done():
		return ctx.Err()
	}
	return simmachine.WriteCustomData(m.Root, in.CustomData)
}

// Shutdown stops the instance's nodeboot and removes its machine.
func (b *Booter) Shutdown(ctx context.Context, in armtest.Instance) error {
	if in.Linux {
		return b.shutdownLinux(ctx, in)
	}
	dir := b.machineDir(in)
	b.mu.Lock()
	pid := b.pids[dir]
	delete(b.pids, dir)
	delete(b.nets, networkPath(in))
	b.mu.Unlock()
	if pid > 0 {
		if err := proc.Stop(ctx, pid, 10*time.Second); err != nil {
			return fmt.Errorf("stop instance %s: %w", in.ComputerName, err)
		}
	}
	return os.RemoveAll(dir)
}

// SerialLog is what the machine's nodeboot wrote to its serial console: what boot diagnostics
// show of a Windows VM.
func (b *Booter) SerialLog(in armtest.Instance) []byte {
	if in.Linux {
		return b.linuxSerial(in)
	}
	serial, _ := os.ReadFile(filepath.Join(b.machineDir(in), "drive", "sim", "serial.log"))
	return serial
}

// RunCommand runs a script on a Linux machine, and on a Windows machine a PowerShell script
// that runs nodeboot.exe (runWindows).
func (b *Booter) RunCommand(ctx context.Context, in armtest.Instance, script string) ([]byte, []byte, int, error) {
	if !in.Linux {
		return b.runWindows(ctx, in, script)
	}
	return b.runLinux(ctx, in, script)
}

// nodebootLine is a PowerShell line that runs nodeboot.exe with verbatim-string arguments, as
// powershell.Quote writes them: & 'C:\k\nodeboot.exe' 'arg' ...
var nodebootLine = regexp.MustCompile(`^& '((?:[^']|'')*)'((?: '(?:[^']|'')*')*)$`)

var quotedArg = regexp.MustCompile(`'((?:[^']|'')*)'`)

// runWindows runs a PowerShell script made of nodeboot.exe lines and "exit $LASTEXITCODE" as
// the simulated machine's nodeboot; a simulated Windows machine runs nothing else, and a
// script with anything else fails as a line PowerShell could not run would.
func (b *Booter) runWindows(ctx context.Context, in armtest.Instance, script string) ([]byte, []byte, int, error) {
	var stdout, stderr bytes.Buffer
	exit := 0
	exe := nodecmd.DefaultPaths().BinDir + `\nodeboot.exe`
	for _, line := range strings.Split(strings.TrimSpace(script), "\n") {
		line = strings.TrimSpace(line)
		m := nodebootLine.FindStringSubmatch(line)
		switch {
		case line == "exit $LASTEXITCODE":
			return stdout.Bytes(), stderr.Bytes(), exit, nil
		case m == nil || !strings.EqualFold(strings.ReplaceAll(m[1], "''", "'"), exe):
			return nil, nil, 0, fmt.Errorf("instance %s: the simulated Windows machine runs only %s, not %q", in.ComputerName, exe, line)
		}
		args := []string{"--platform", "sim", "--root", filepath.Join(b.machineDir(in), "drive")}
		for _, a := range quotedArg.FindAllStringSubmatch(m[2], -1) {
			args = append(args, strings.ReplaceAll(a[1], "''", "'"))
		}
		cmd := exec.CommandContext(ctx, b.Nodeboot, args...)
		cmd.Stdout, cmd.Stderr, cmd.Dir = &stdout, &stderr, b.machineDir(in)
		err := cmd.Run()
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			exit = ee.ExitCode()
		case err != nil:
			return nil, nil, 0, fmt.Errorf("instance %s: %w", in.ComputerName, err)
		default:
			exit = 0
		}
	}
	return stdout.Bytes(), stderr.Bytes(), exit, nil
}

// Running lists the PIDs of the machines' nodeboot processes, for clean-up checks.
func (b *Booter) Running() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []int
	for _, pid := range b.pids {
		if proc.Alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}
