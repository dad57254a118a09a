package windows

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/svc"
	"golang.org/x/sys/windows/svc/mgr"

	"github.com/kubewin/kubewin/nodeboot/internal/platform"
)

type services struct{}

// recovery restarts a failed node service after 10 s, three times a day at most in a row.
var recovery = []mgr.RecoveryAction{
	{Type: mgr.ServiceRestart, Delay: 10 * time.Second},
	{Type: mgr.ServiceRestart, Delay: 10 * time.Second},
	{Type: mgr.ServiceRestart, Delay: 30 * time.Second},
}

func (services) Ensure(_ context.Context, spec platform.ServiceSpec) error {
	m, err := mgr.Connect()
	if err != nil {
		return err
	}
	defer m.Disconnect()
	exe, args := spec.Command()
	s, err := m.OpenService(spec.Name)
	if err != nil {
		s, err = m.CreateService(spec.Name, exe, mgr.Config{
			StartType: mgr.StartAutomatic, DisplayName: spec.DisplayName, Description: spec.Description,
			Dependencies: spec.Dependencies,
		}, args...)
		if err != nil {
			return err
		}
	} else {
		cfg, err := s.Config()
		if err != nil {
			s.Close()
			return err
		}
		cfg.BinaryPathName = commandLine(exe, args)
		cfg.Dependencies, cfg.StartType, cfg.DisplayName, cfg.Description = spec.Dependencies, mgr.StartAutomatic, spec.DisplayName, spec.Description
		if err := s.UpdateConfig(cfg); err != nil {
			s.Close()
			return err
		}
	}
	defer s.Close()
	return s.SetRecoveryActions(recovery, uint32((24 * time.Hour).Seconds()))
}

func commandLine(exe string, args []string) string {
	parts := []string{windows.EscapeArg(exe)}
	for _, a := range args {
		parts = append(parts, windows.EscapeArg(a))
	}
	return strings.Join(parts, " ")
}

func (services) Start(ctx context.Context, name string) error {
	return withService(name, func(s *mgr.Service) error {
		if st, err := s.Query(); err == nil && st.State == svc.Running {
			return nil
		}
		if err := s.Start(); err != nil && !errors.Is(err, windows.ERROR_SERVICE_ALREADY_RUNNING) {
			return err
		}
		return waitState(ctx, s, svc.Running)
	})
}

func (services) Stop(ctx context.Context, name string) error {
	return withService(name, func(s *mgr.Service) error {
		if _, err := s.Control(svc.Stop); err != nil && !errors.Is(err, windows.ERROR_SERVICE_NOT_ACTIVE) {
			return err
		}
		return waitState(ctx, s, svc.Stopped)
	})
}

func (services) Delete(ctx context.Context, name string) error {
	err := withService(name, func(s *mgr.Service) error {
		if _, err := s.Control(svc.Stop); err == nil {
			_ = waitState(ctx, s, svc.Stopped)
		}
		return s.Delete()
	})
	if errors.Is(err, windows.ERROR_SERVICE_DOES_NOT_EXIST) {
		return nil
	}
	return err
}

func withService(name string, f func(*mgr.Service) error) error {
	m, err := mgr.Connect()
	if err != nil {
		return err
	}
	defer m.Disconnect()
	s, err := m.OpenService(name)
	if err != nil {
		return err
	}
	defer s.Close()
	return f(s)
}

func waitState(ctx context.Context, s *mgr.Service, want svc.State) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		st, err := s.Query()
		if err != nil {
			return err
		}
		if st.State == want {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("service %s is in state %d, not %d, after a minute", s.Name, st.State, want)
		case <-time.After(250 * time.Millisecond):
		}
	}
}
