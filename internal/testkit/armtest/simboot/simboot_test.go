package simboot

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/sim/simmachine"
	"github.com/kubewin/kubewin/internal/testkit/armtest"
)

// Computer names are unique within a scale set only: scale sets of two resource groups may both
// name their first instance win000000 ({computer-name-prefix}{base-36-instance-id},
// https://learn.microsoft.com/azure/virtual-machine-scale-sets/virtual-machine-scale-sets-instance-ids).
// Each is a machine of its own: booting one does not replace the other, and deleting one leaves
// the other running.
func TestSameComputerNameTwoScaleSets(t *testing.T) {
	dir := t.TempDir()
	// A machine's nodeboot (`nodeboot --platform sim --root ROOT run`) that writes its serial
	// console and keeps running.
	nodeboot := filepath.Join(dir, "nodeboot")
	script := "#!/bin/sh\nroot=$4\nmkdir -p \"$root/sim\"\necho \"booted $root\" >> \"$root/sim/serial.log\"\nexec sleep 600\n"
	if err := os.WriteFile(nodeboot, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	image := filepath.Join(dir, "image")
	if err := simmachine.WriteImage(image, v1alpha1.ImageManifest{
		APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindImageManifest, WindowsBuild: v1alpha1.WindowsServer2022,
		KubernetesVersion: "v1.36.2", Runtime: v1alpha1.RuntimeInfo{Name: v1alpha1.RuntimeContainerd, Version: "2.1.4"},
		PauseImage:      v1alpha1.PauseImage{Reference: "registry.k8s.io/pause:3.10", Digest: "sha256:" + strings.Repeat("1", 64)},
		NodebootVersion: "test",
	}, map[string][]byte{"k/kubelet.exe": []byte("kubelet")}); err != nil {
		t.Fatal(err)
	}
	const imageID = "/subscriptions/s/resourceGroups/images/providers/Microsoft.Compute/images/ws2022"
	b := &Booter{Dir: filepath.Join(dir, "instances"), Nodeboot: nodeboot, SetupTime: 20 * time.Millisecond}
	b.AddImage(imageID, image)
	instance := func(group, ip string) armtest.Instance {
		scaleSet := "/subscriptions/s/resourceGroups/" + group + "/providers/Microsoft.Compute/virtualMachineScaleSets/win"
		return armtest.Instance{ID: scaleSet + "/virtualMachines/0", ScaleSetID: scaleSet, InstanceID: "0", ComputerName: "win000000",
			ImageID: imageID, PrivateIP: netip.MustParseAddr(ip), Reach: func(netip.AddrPort) error { return nil }}
	}
	a, c := instance("one", "10.1.0.4"), instance("two", "10.2.0.4")
	ctx := context.Background()
	for _, in := range []armtest.Instance{a, c} {
		if err := b.Boot(ctx, in); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Shutdown(ctx, in) })
	}
	serial := func(in armtest.Instance) string {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if s := string(b.SerialLog(in)); s != "" {
				return s
			}
		}
		return ""
	}
	if sa, sc := serial(a), serial(c); sa == "" || sa == sc {
		t.Fatalf("the instances' serial consoles: %q and %q, want one each", sa, sc)
	}
	if err := b.Shutdown(ctx, a); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	pid := b.pids[b.machineDir(c)]
	b.mu.Unlock()
	if pid == 0 || serial(c) == "" {
		t.Errorf("deleting %s of one scale set stopped or removed the other's (pid %d)", a.ComputerName, pid)
	}
	if _, err := os.Stat(filepath.Join(b.machineDir(c), "drive")); err != nil {
		t.Errorf("the other scale set's machine: %v", err)
	}
}
