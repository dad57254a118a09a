package armtest

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
)

// Instance is a virtual machine — a scale-set instance or a single VM — as its machine sees it.
type Instance struct {
	// ID is the VM's ARM ID (a scale-set instance's is its scale set's ID, /virtualMachines/ and
	// its instance ID).
	ID string
	// ScaleSetID is the ARM ID of the scale set; empty for a single VM.
	ScaleSetID string
	// InstanceID is the instance's decimal ID within the scale set ("0", "1", ...); empty for a
	// single VM.
	InstanceID string
	// ComputerName is the computer name: a scale set's computerNamePrefix and the instance ID in
	// 6 base-36 digits, or a VM's osProfile.computerName.
	ComputerName string
	// Location, VMSize and Zone are the machine's region, size and availability zone ("" when
	// it has none).
	Location, VMSize, Zone string
	// Identities are the user-assigned managed identities the machine carries (the VM's or its
	// scale set's identity.userAssignedIdentities), resource IDs in lower case: its instance
	// metadata service serves their tokens, and no other identity's.
	Identities []string
	// Linux is true when the OS profile is Linux's.
	Linux bool
	// PrivateIP is the primary IP configuration's address on the primary NIC.
	PrivateIP netip.Addr
	// CustomData is osProfile.customData, decoded from base64, of the model the instance was
	// created with (nil when none).
	CustomData []byte
	// ImageID is the image the instance was created from (for a gallery image definition, the
	// version that was the latest; for a marketplace image its URN, publisher:offer:sku:version).
	ImageID string
	// IPForwarding is enableIPForwarding of the primary NIC.
	IPForwarding bool
	// MetadataEndpoint is the base URL of the machine's instance metadata service (Azure's
	// http://169.254.169.254): GET <MetadataEndpoint>/metadata/instance?api-version=... with
	// "Metadata: true" answers its compute.name, compute.osProfile.computerName and the like.
	// Set from the first Boot on.
	MetadataEndpoint string
	// Reach reports whether Azure carries a TCP connection of the machine to an address (nil) or
	// why not (Server.Reach): the machine asks before each connection its bootstrap makes. Set
	// for Boot; nil elsewhere.
	Reach func(to netip.AddrPort) error `json:"-"`
	// HostAddress is where on this host the machine's connection to an address goes, and a
	// private address of its own listens (Server.HostAddress). Set for Boot; nil elsewhere.
	HostAddress func(to netip.AddrPort) netip.AddrPort `json:"-"`
}

// Booter runs the machines behind scale-set instances.
type Booter interface {
	// Boot starts the machine of an instance that has just been provisioned. The server calls it
	// in its own goroutine once the operation that created the instance succeeded, as a VM boots
	// after Azure reports it provisioned; ctx ends when the server closes. An error is logged.
	Boot(ctx context.Context, in Instance) error
	// Shutdown stops the machine of an instance being deleted (scale-in, deleteInstances,
	// instance delete, scale set delete) or still running when the server closes. It is called
	// once for every instance Boot was called for, after Boot returned; the deletion completes
	// when Shutdown returns.
	Shutdown(ctx context.Context, in Instance) error
	// SerialLog is the instance's serial console output, served at the URI that
	// retrieveBootDiagnosticsData returns for a Linux instance (a Windows instance's serial
	// console is SAC's: sacBanner).
	SerialLog(in Instance) []byte
	// RunCommand runs a script on a booted instance (ARM's run command: RunShellScript on
	// Linux, RunPowerShellScript on Windows) and returns what it wrote and its exit status; err
	// is for a machine that cannot run it.
	RunCommand(ctx context.Context, in Instance, script string) (stdout, stderr []byte, exit int, err error)
}

type nopBooter struct{}

func (nopBooter) Boot(context.Context, Instance) error     { return nil }
func (nopBooter) Shutdown(context.Context, Instance) error { return nil }
func (nopBooter) SerialLog(Instance) []byte                { return nil }
func (nopBooter) RunCommand(context.Context, Instance, string) ([]byte, []byte, int, error) {
	return nil, nil, 0, errors.New("the instance runs nowhere (no Booter)")
}

// RecordingBooter records Boot and Shutdown calls; its serial log names the instance. The zero
// value is ready to use.
type RecordingBooter struct {
	mu        sync.Mutex
	boots     []Instance
	shutdowns []Instance
	changed   chan struct{} // closed and replaced on every call
}

// Boot records the call.
func (b *RecordingBooter) Boot(_ context.Context, in Instance) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.boots = append(b.boots, in)
	b.signal()
	return nil
}

// Shutdown records the call.
func (b *RecordingBooter) Shutdown(_ context.Context, in Instance) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.shutdowns = append(b.shutdowns, in)
	b.signal()
	return nil
}

// RunCommand answers as a machine that has nothing to run the script with.
func (b *RecordingBooter) RunCommand(context.Context, Instance, string) ([]byte, []byte, int, error) {
	return nil, []byte("sh: not found"), 127, nil
}

// SerialLog returns a line naming the instance, its image and its custom data size.
func (b *RecordingBooter) SerialLog(in Instance) []byte {
	return []byte(fmt.Sprintf("armtest serial console: %s (instance %s of %s) booted from %s with %d bytes of custom data\n",
		in.ComputerName, in.InstanceID, in.ScaleSetID, in.ImageID, len(in.CustomData)))
}

// signal wakes waiters; b.mu is held.
func (b *RecordingBooter) signal() {
	if b.changed != nil {
		close(b.changed)
	}
	b.changed = make(chan struct{})
}

// Boots returns the instances booted so far, in call order.
func (b *RecordingBooter) Boots() []Instance {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Instance(nil), b.boots...)
}

// Shutdowns returns the instances shut down so far, in call order.
func (b *RecordingBooter) Shutdowns() []Instance {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Instance(nil), b.shutdowns...)
}

// WaitBoots waits until at least n instances were booted and returns them.
func (b *RecordingBooter) WaitBoots(ctx context.Context, n int) ([]Instance, error) {
	for {
		b.mu.Lock()
		if len(b.boots) >= n {
			out := append([]Instance(nil), b.boots...)
			b.mu.Unlock()
			return out, nil
		}
		if b.changed == nil {
			b.changed = make(chan struct{})
		}
		changed, got := b.changed, len(b.boots)
		b.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("%d instances booted, waiting for %d: %w", got, n, ctx.Err())
		}
	}
}
