package windows

import (
	"errors"
	"time"

	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/svc"
	"golang.org/x/sys/windows/svc/mgr"
)

// scmAPI passes the requests to the Service Control Manager through x/sys/windows/svc/mgr.
type scmAPI struct{}

func withService(name string, f func(*mgr.Service) error) error {
	m, err := mgr.Connect()
	if err != nil {
		return err
	}
	defer func() { _ = m.Disconnect() }() // freeing the handle cannot change the operation's result
	s, err := m.OpenService(name)
	if errors.Is(err, windows.ERROR_SERVICE_DOES_NOT_EXIST) {
		return errors.Join(ErrNotFound, err)
	}
	if err != nil {
		return err
	}
	defer func() { _ = s.Close() }() // freeing the handle cannot change the operation's result
	return f(s)
}

func mgrStartType(t StartType) uint32 {
	if t == StartAutomatic {
		return mgr.StartAutomatic
	}
	return mgr.StartManual
}

func (scmAPI) Query(name string) (c ServiceConfig, state ServiceState, err error) {
	err = withService(name, func(s *mgr.Service) error {
		cfg, err := s.Config()
		if err != nil {
			return err
		}
		st, err := s.Query()
		if err != nil {
			return err
		}
		c = ServiceConfig{BinaryPathName: cfg.BinaryPathName, StartType: StartManual, DisplayName: cfg.DisplayName, Description: cfg.Description,
			Dependencies: cfg.Dependencies}
		if cfg.StartType == mgr.StartAutomatic {
			c.StartType = StartAutomatic
		}
		switch st.State {
		case svc.Running:
			state = Running
		case svc.Stopped:
			state = Stopped
		default:
			state = Pending
		}
		return nil
	})
	return c, state, err
}

func (scmAPI) Create(name string, c ServiceConfig) error {
	m, err := mgr.Connect()
	if err != nil {
		return err
	}
	defer func() { _ = m.Disconnect() }() // freeing the handle cannot change the operation's result
	// mgr.CreateService quotes exe and args itself; the command line is already quoted, so it
	// is passed as a whole as the service's binary path (CreateService takes the command line).
	h, err := windows.CreateService(m.Handle, windows.StringToUTF16Ptr(name), windows.StringToUTF16Ptr(c.DisplayName),
		windows.SERVICE_ALL_ACCESS, windows.SERVICE_WIN32_OWN_PROCESS, mgrStartType(c.StartType), windows.SERVICE_ERROR_NORMAL,
		windows.StringToUTF16Ptr(c.BinaryPathName), nil, nil, &dependencyList(c.Dependencies)[0], nil, nil)
	if err != nil {
		return err
	}
	s := &mgr.Service{Name: name, Handle: h}
	defer func() { _ = s.Close() }() // freeing the handle cannot change the operation's result
	cfg, err := s.Config()
	if err != nil {
		return err
	}
	cfg.Description = c.Description
	return s.UpdateConfig(cfg)
}

func (scmAPI) Update(name string, c ServiceConfig) error {
	return withService(name, func(s *mgr.Service) error {
		cfg, err := s.Config()
		if err != nil {
			return err
		}
		cfg.BinaryPathName, cfg.StartType, cfg.DisplayName, cfg.Description = c.BinaryPathName, mgrStartType(c.StartType), c.DisplayName, c.Description
		// mgr.UpdateConfig passes no list at all for an empty one ("no change": x/sys
		// windows/svc/mgr config.go toStringBlock), so the dependencies are set here, an empty
		// list removing them (ChangeServiceConfigW: lpDependencies NULL leaves them unchanged).
		cfg.Dependencies = nil
		if err := s.UpdateConfig(cfg); err != nil {
			return err
		}
		const noChange = windows.SERVICE_NO_CHANGE
		return windows.ChangeServiceConfig(s.Handle, noChange, noChange, noChange, nil, nil, nil, &dependencyList(c.Dependencies)[0], nil, nil, nil)
	})
}

// QueryRecovery reads a service's failure actions and their flag (QueryServiceConfig2W with
// SERVICE_CONFIG_FAILURE_ACTIONS and SERVICE_CONFIG_FAILURE_ACTIONS_FLAG).
func (scmAPI) QueryRecovery(name string) (Recovery, error) {
	var r Recovery
	err := withService(name, func(s *mgr.Service) error {
		actions, err := s.RecoveryActions()
		if err != nil {
			return err
		}
		for _, a := range actions {
			r.Actions = append(r.Actions, RecoveryAction{Restart: a.Type == mgr.ServiceRestart, Delay: a.Delay})
		}
		reset, err := s.ResetPeriod()
		if err != nil {
			return err
		}
		r.ResetPeriod = time.Duration(reset) * time.Second
		r.OnNonCrashFailures, err = s.RecoveryActionsOnNonCrashFailures()
		return err
	})
	return r, err
}

func (scmAPI) SetRecovery(name string, r Recovery) error {
	return withService(name, func(s *mgr.Service) error {
		actions := make([]mgr.RecoveryAction, len(r.Actions))
		for i, a := range r.Actions {
			actions[i] = mgr.RecoveryAction{Type: mgr.NoAction, Delay: a.Delay}
			if a.Restart {
				actions[i].Type = mgr.ServiceRestart
			}
		}
		if err := s.SetRecoveryActions(actions, uint32(r.ResetPeriod/time.Second)); err != nil {
			return err
		}
		return s.SetRecoveryActionsOnNonCrashFailures(r.OnNonCrashFailures)
	})
}

func (scmAPI) Start(name string) error {
	return withService(name, func(s *mgr.Service) error {
		if err := s.Start(); err != nil && !errors.Is(err, windows.ERROR_SERVICE_ALREADY_RUNNING) {
			return err
		}
		return nil
	})
}

func (scmAPI) Stop(name string) error {
	return withService(name, func(s *mgr.Service) error {
		if _, err := s.Control(svc.Stop); err != nil && !errors.Is(err, windows.ERROR_SERVICE_NOT_ACTIVE) {
			return err
		}
		return nil
	})
}

func (scmAPI) Delete(name string) error {
	return withService(name, func(s *mgr.Service) error { return s.Delete() })
}
