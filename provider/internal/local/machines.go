package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/atomicfile"
	"github.com/kubewin/kubewin/internal/nodestatus"
	"github.com/kubewin/kubewin/internal/proc"
	"github.com/kubewin/kubewin/internal/sim/simmachine"
)

// Machine is a simulated Windows machine of a pool: a system drive directory and the nodeboot
// process that runs it.
type Machine struct {
	Name    string     `json:"name"`
	Address netip.Addr `json:"address"`
	PID     int        `json:"pid"`
}

// MachineSubnet holds the machines' addresses: loopback addresses, never dialed, that stand for
// the machines' NICs.
var MachineSubnet = netip.MustParsePrefix("127.64.0.0/10")

func (b *Backend) poolDir(pool string) string { return filepath.Join(b.StateDir, "pools", pool) }

func (b *Backend) machineDir(pool, name string) string {
	return filepath.Join(b.poolDir(pool), "machines", name)
}

const machineFile = "machine.json"

// CreateMachine provisions a machine from an image directory with its NodeConfig and starts
// its nodeboot, which joins it and keeps it running after the caller exits.
func (b *Backend) CreateMachine(pool, name, imageDir string, nodeConfig []byte) (Machine, error) {
	nodeboot, err := b.Binary("nodeboot")
	if err != nil {
		return Machine{}, err
	}
	addr, err := b.allocateAddress(pool + "/" + name)
	if err != nil {
		return Machine{}, err
	}
	dir := b.machineDir(pool, name)
	m := simmachine.Machine{Root: filepath.Join(dir, "drive"), ComputerName: name, Adapter: v1alpha1.DefaultInterfaceName, Address: addr,
		Subnet: MachineSubnet}
	pid, err := simmachine.Boot(m, imageDir, nodeConfig, nodeboot, filepath.Join(dir, "nodeboot.log"))
	if err != nil {
		return Machine{}, fmt.Errorf("machine %s: %w", name, err)
	}
	machine := Machine{Name: name, Address: addr, PID: pid}
	data, _ := json.Marshal(machine)
	return machine, atomicfile.Write(filepath.Join(dir, machineFile), data, 0o600)
}

// Machines lists a pool's machines, by name.
func (b *Backend) Machines(pool string) ([]Machine, error) {
	entries, err := os.ReadDir(filepath.Join(b.poolDir(pool), "machines"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Machine
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(b.machineDir(pool, e.Name()), machineFile))
		if err != nil {
			continue // provisioning was interrupted before the machine started
		}
		var m Machine
		if err := json.Unmarshal(data, &m); err != nil {
			return nil, fmt.Errorf("machine %s of pool %s: %w", e.Name(), pool, err)
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b Machine) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Running reports whether the machine's nodeboot runs.
func (m Machine) Running() bool { return m.PID > 0 && proc.Alive(m.PID) }

// DeleteMachine stops a machine's nodeboot and removes the machine.
func (b *Backend) DeleteMachine(ctx context.Context, pool string, m Machine) error {
	if err := proc.Stop(ctx, m.PID, 10*time.Second); err != nil {
		return fmt.Errorf("stop machine %s: %w", m.Name, err)
	}
	b.releaseAddress(pool + "/" + m.Name)
	return os.RemoveAll(b.machineDir(pool, m.Name))
}

// DeletePool removes what is left of a pool's directory.
func (b *Backend) DeletePool(pool string) error { return os.RemoveAll(b.poolDir(pool)) }

// JoinReport is the last join report the machine's nodeboot wrote to its serial console, which
// also holds the failures that happen before the cluster is trusted (and so never reach it).
func (b *Backend) JoinReport(pool, name string) (*nodestatus.Report, error) {
	log, err := os.ReadFile(filepath.Join(b.machineDir(pool, name), "drive", "sim", "serial.log"))
	if err != nil {
		return nil, err
	}
	if r := nodestatus.LastSerialReport(log); r != nil {
		return r, nil
	}
	return nil, fmt.Errorf("machine %s has written no join report yet", name)
}

// waitJoin waits until the machine's join is over — its last report says Done or Failed — or its
// nodeboot stopped, or ctx ends.
func (b *Backend) waitJoin(ctx context.Context, pool string, m Machine) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if r, err := b.JoinReport(pool, m.Name); (err == nil && r.State != nodestatus.StateRunning) || !m.Running() {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// LogTail returns the end of a machine's nodeboot log.
func (b *Backend) LogTail(pool, name string, lines int) string {
	data, err := os.ReadFile(filepath.Join(b.machineDir(pool, name), "nodeboot.log"))
	if err != nil {
		return ""
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}

// reserveIndices reserves n machine indices of a pool, never used before by it: like a scale
// set's instance IDs, a removed machine's name is not given to a new one.
func (b *Backend) reserveIndices(pool string, n int) (int, error) {
	addressLock.Lock()
	defer addressLock.Unlock()
	path := filepath.Join(b.poolDir(pool), "next-index")
	next := 0
	if data, err := os.ReadFile(path); err == nil {
		if next, err = strconv.Atoi(strings.TrimSpace(string(data))); err != nil {
			return 0, fmt.Errorf("pool %s: %s is corrupt: %w", pool, path, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return 0, err
	}
	if err := os.MkdirAll(b.poolDir(pool), 0o755); err != nil {
		return 0, err
	}
	return next, atomicfile.Write(path, []byte(strconv.Itoa(next+n)), 0o644)
}

var addressLock sync.Mutex

// allocateAddress gives a machine a unique address of MachineSubnet, recorded in the state dir.
func (b *Backend) allocateAddress(owner string) (netip.Addr, error) {
	addressLock.Lock()
	defer addressLock.Unlock()
	table, err := b.addresses()
	if err != nil {
		return netip.Addr{}, err
	}
	used := map[netip.Addr]bool{}
	for o, a := range table {
		if o == owner {
			return a, nil
		}
		used[a] = true
	}
	a := MachineSubnet.Addr().Next()
	for used[a] {
		a = a.Next()
	}
	if !MachineSubnet.Contains(a) {
		return netip.Addr{}, fmt.Errorf("no free machine address left in %s", MachineSubnet)
	}
	table[owner] = a
	return a, b.saveAddresses(table)
}

func (b *Backend) releaseAddress(owner string) {
	addressLock.Lock()
	defer addressLock.Unlock()
	if table, err := b.addresses(); err == nil {
		delete(table, owner)
		_ = b.saveAddresses(table)
	}
}

func (b *Backend) addresses() (map[string]netip.Addr, error) {
	table := map[string]netip.Addr{}
	data, err := os.ReadFile(filepath.Join(b.StateDir, "addresses.json"))
	if errors.Is(err, os.ErrNotExist) {
		return table, nil
	}
	if err != nil {
		return nil, err
	}
	return table, json.Unmarshal(data, &table)
}

func (b *Backend) saveAddresses(table map[string]netip.Addr) error {
	data, err := json.MarshalIndent(table, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(b.StateDir, 0o755); err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(b.StateDir, "addresses.json"), data, 0o644)
}

// Diagnose runs `nodeboot diagnose` on a machine, as its own nodeboot would run it: from the
// machine's directory, the bundle on standard output and its summary and report on standard
// error (text).
func (b *Backend) Diagnose(ctx context.Context, pool, name string) (text string, bundle []byte, err error) {
	nodeboot, err := b.Binary("nodeboot")
	if err != nil {
		return "", nil, err
	}
	dir := b.machineDir(pool, name)
	cmd := exec.CommandContext(ctx, nodeboot, "--platform", "sim", "--root", filepath.Join(dir, "drive"), "diagnose", "--output", "-")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr, cmd.Dir = &stdout, &stderr, dir
	if err := cmd.Run(); err != nil {
		return "", nil, fmt.Errorf("nodeboot diagnose on machine %s: %w: %s", name, err, strings.TrimSpace(stderr.String()))
	}
	return stderr.String(), stdout.Bytes(), nil
}
