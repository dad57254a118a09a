package winfake

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/kubewin/kubewin/nodeboot/internal/platform/windows"
)

type scm struct{ m *Machine }

var _ windows.SCM = scm{}

func (s scm) Query(name string) (windows.ServiceConfig, windows.ServiceState, error) {
	var cfg windows.ServiceConfig
	var state windows.ServiceState
	err := s.m.do(Op{Backend: "scm", Call: "Query", Target: name}, true, func(st *State) (bool, error) {
		svc, ok := st.Services[name]
		if !ok {
			return false, errNotFound("service " + name)
		}
		cfg, state = clone(svc.Config), svc.State
		return false, nil
	})
	return cfg, state, err
}

func (s scm) Create(name string, c windows.ServiceConfig) error {
	return s.m.do(Op{Backend: "scm", Call: "Create", Target: name, Body: toJSON(c)}, true, func(st *State) (bool, error) {
		if _, ok := st.Services[name]; ok {
			return false, fmt.Errorf("The specified service already exists: %s", name)
		}
		st.Services[name] = &Service{Config: clone(c), State: windows.Stopped}
		return true, nil
	})
}

func (s scm) Update(name string, c windows.ServiceConfig) error {
	return s.m.do(Op{Backend: "scm", Call: "Update", Target: name, Body: toJSON(c)}, true, func(st *State) (bool, error) {
		svc, ok := st.Services[name]
		if !ok {
			return false, errNotFound("service " + name)
		}
		svc.Config = clone(c)
		return true, nil
	})
}

func (s scm) SetRecovery(name string, r windows.Recovery) error {
	return s.m.do(Op{Backend: "scm", Call: "SetRecovery", Target: name, Body: toJSON(r)}, true, func(st *State) (bool, error) {
		svc, ok := st.Services[name]
		if !ok {
			return false, errNotFound("service " + name)
		}
		changed := svc.Recovery == nil || toJSON(*svc.Recovery) != toJSON(r)
		rc := r
		svc.Recovery = &rc
		return changed, nil
	})
}

// startLocked starts a service and, first, the services it depends on, as the SCM does.
func (m *Machine) startLocked(st *State, name string, started *[]string) error {
	svc, ok := st.Services[name]
	if !ok {
		return fmt.Errorf("The dependency service or group failed to start: service %s does not exist", name)
	}
	if svc.State == windows.Running {
		return nil
	}
	for _, dep := range svc.Config.Dependencies {
		if err := m.startLocked(st, dep, started); err != nil {
			return err
		}
	}
	svc.State = windows.Running
	*started = append(*started, name)
	if m.OnStart != nil {
		argv := windows.SplitCommandLine(svc.Config.BinaryPathName)
		onStart := m.OnStart
		m.hooks = append(m.hooks, func() {
			if err := onStart(name, argv); err != nil {
				m.Exited(name, err)
			}
		})
	}
	return nil
}

func (s scm) Start(name string) error {
	var started []string
	return s.m.do(Op{Backend: "scm", Call: "Start", Target: name}, true, func(st *State) (bool, error) {
		if _, ok := st.Services[name]; !ok {
			return false, errNotFound("service " + name)
		}
		err := s.m.startLocked(st, name, &started)
		return len(started) > 0, err
	})
}

func (s scm) Stop(name string) error {
	return s.m.do(Op{Backend: "scm", Call: "Stop", Target: name}, true, func(st *State) (bool, error) {
		svc, ok := st.Services[name]
		if !ok {
			return false, errNotFound("service " + name)
		}
		if svc.State == windows.Stopped {
			return false, errors.New("The service has not been started.")
		}
		for other, o := range st.Services {
			if o.State != windows.Stopped && slices.Contains(o.Config.Dependencies, name) {
				return false, fmt.Errorf("A stop control has been sent to a service that other running services are dependent on: %s depends on %s", other, name)
			}
		}
		svc.State, svc.PID = windows.Stopped, 0
		if s.m.OnStop != nil {
			s.m.hooks = append(s.m.hooks, func() { s.m.OnStop(name) })
		}
		return true, nil
	})
}

func (s scm) Delete(name string) error {
	return s.m.do(Op{Backend: "scm", Call: "Delete", Target: name}, true, func(st *State) (bool, error) {
		svc, ok := st.Services[name]
		if !ok {
			return false, errNotFound("service " + name)
		}
		if svc.State != windows.Stopped {
			return false, fmt.Errorf("service %s runs: the simulated machine deletes stopped services only", name)
		}
		delete(st.Services, name)
		return true, nil
	})
}

// registerService is what containerd.exe and dockerd.exe --register-service do: create the
// service to start at boot with their own path, --run-service and the other arguments, and
// restart it 15 s after its first two failures within a day
// (containerd cmd/containerd/command/service_windows.go; moby cmd/dockerd/service_windows.go).
func registerService(st *State, name, display, description, exe string, args []string) error {
	if _, ok := st.Services[name]; ok {
		return fmt.Errorf("The specified service already exists: %s", name)
	}
	var passed []string
	for _, a := range args {
		if a != "--register-service" && a != "--unregister-service" {
			passed = append(passed, a)
		}
	}
	st.Services[name] = &Service{
		State: windows.Stopped,
		Config: windows.ServiceConfig{
			BinaryPathName: windows.CommandLine(exe, append([]string{"--run-service"}, passed...)),
			StartType:      windows.StartAutomatic, DisplayName: display, Description: description,
		},
		Recovery: &windows.Recovery{
			Actions:     []windows.RecoveryAction{{Restart: true, Delay: 15 * time.Second}, {Restart: true, Delay: 15 * time.Second}, {}},
			ResetPeriod: 24 * time.Hour,
		},
	}
	return nil
}

// Exited records that a service's process ended on its own, with err: the service is stopped.
func (m *Machine) Exited(name string, err error) {
	_ = m.do(Op{Backend: "scm", Call: "exited", Target: name, Body: err.Error()}, true, func(st *State) (bool, error) {
		svc, ok := st.Services[name]
		if !ok || svc.State == windows.Stopped {
			return false, nil
		}
		svc.State, svc.PID = windows.Stopped, 0
		return true, nil
	})
}
