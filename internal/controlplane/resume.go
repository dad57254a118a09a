package controlplane

import (
	"context"
	"fmt"
	"io"
	"time"
)

// Resume starts again a control plane stopped in dir (after Stop, a reboot or a crash), on the
// same ports and with the same data. A control plane that is fully running is left alone.
func Resume(ctx context.Context, dir string, progress io.Writer) (*ControlPlane, error) {
	cp, err := Load(dir)
	if err != nil {
		return nil, err
	}
	if progress != nil {
		cp.Config.Progress = progress
	}
	all := true
	for _, up := range cp.Running() {
		all = all && up
	}
	if all {
		return cp, nil
	}
	// Restart every component, in order, so that each finds its dependencies up.
	if err := cp.Stop(ctx, 10*time.Second); err != nil {
		return cp, err
	}
	began := time.Now()
	for _, s := range []struct {
		name string
		f    func() error
	}{
		{"etcd ready", func() error { return cp.startEtcd(ctx) }},
		{"kube-apiserver ready", func() error { return cp.startAPIServer(ctx) }},
		{"kube-controller-manager and kube-scheduler started", cp.startControllers},
		{"controllers working", func() error { return cp.waitControllers(ctx) }},
	} {
		t := time.Now()
		if err := s.f(); err != nil {
			_ = cp.Stop(context.Background(), 5*time.Second)
			return cp, fmt.Errorf("resume control plane in %s: %s: %w\n%s", dir, s.name, err, cp.LogTails(20))
		}
		_, _ = fmt.Fprintf(cp.Config.Progress, "[control-plane] %s (%s)\n", s.name, time.Since(t).Round(time.Millisecond))
	}
	_, _ = fmt.Fprintf(cp.Config.Progress, "[control-plane] %s resumed at %s in %s\n", cp.Config.ClusterName, cp.Endpoint(),
		time.Since(began).Round(time.Millisecond))
	return cp, cp.save()
}
