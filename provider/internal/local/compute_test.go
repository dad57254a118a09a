package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/nodestatus"
	"github.com/kubewin/kubewin/internal/sim/simmachine"
)

// Add has at most joinsAtOnce machines joining at once: the next machine boots when an earlier
// one's join report says the join is over. It names the machines before any boots, so that the
// pool prepares their report objects before their joins write to them.
func TestAddBoundsJoinsAtOnce(t *testing.T) {
	defer func(n int) { joinsAtOnce = n }(joinsAtOnce)
	joinsAtOnce = 2
	bin, dir := t.TempDir(), t.TempDir()
	events := filepath.Join(dir, "events")
	done, err := nodestatus.SerialLine(&nodestatus.Report{Node: "n", State: nodestatus.StateDone})
	if err != nil {
		t.Fatal(err)
	}
	// A machine's nodeboot (`nodeboot --platform sim --root ROOT run`) that joins for a while,
	// reports that it is done on the serial console, and keeps running.
	script := fmt.Sprintf("#!/bin/sh\nroot=$4\necho start >> %[1]q\nsleep 0.2\necho end >> %[1]q\nmkdir -p \"$root/sim\"\n"+
		"printf '%%s\\n' %[2]q >> \"$root/sim/serial.log\"\nexec sleep 60\n", events, strings.TrimSpace(string(done)))
	if err := os.WriteFile(filepath.Join(bin, "nodeboot"), []byte(script), 0o755); err != nil {
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
	b, err := New(filepath.Join(dir, "state"), []string{bin})
	if err != nil {
		t.Fatal(err)
	}
	c := &Compute{Backend: b, Pool: "p", Prefix: "win", ImageDir: image, AnyCluster: true}
	ctx := context.Background()
	var named []string
	names, err := c.Add(ctx, 5, []byte(`{}`), func(names []string) error {
		if _, err := os.Stat(events); !os.IsNotExist(err) {
			t.Errorf("a machine booted before Add named its machines (%s: %v)", events, err)
		}
		named = names
		return nil
	})
	t.Cleanup(func() { _ = c.Delete(ctx, names) })
	if err != nil || len(names) != 5 {
		t.Fatalf("add: %v %v", names, err)
	}
	if !slices.Equal(named, names) {
		t.Errorf("Add named %v, created %v", named, names)
	}
	// At most two were joining at any time (the last three have begun once Add returns: wait
	// until their nodeboot says so).
	var data []byte
	for deadline := time.Now().Add(10 * time.Second); strings.Count(string(data), "start") < 5 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		if data, err = os.ReadFile(events); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	joining, most, starts := 0, 0, 0
	for _, e := range strings.Fields(string(data)) {
		if e == "start" {
			joining++
			starts++
		} else {
			joining--
		}
		most = max(most, joining)
	}
	if starts != 5 || most != 2 {
		t.Errorf("%d machines started, at most %d joining at once (events %q), want 5 and 2", starts, most, strings.Fields(string(data)))
	}
}
