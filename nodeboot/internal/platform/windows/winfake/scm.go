package winfake

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/nodecmd"
	"github.com/kubewin/kubewin/internal/sim/simmachine"
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
			//nolint:staticcheck,revive // ST1005: Windows' own message, verbatim
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

func (s scm) QueryRecovery(name string) (windows.Recovery, error) {
	var r windows.Recovery
	err := s.m.do(Op{Backend: "scm", Call: "QueryRecovery", Target: name}, false, func(st *State) (bool, error) {
		svc, ok := st.Services[name]
		if !ok {
			return false, errNotFound("service " + name)
		}
		if svc.Recovery != nil {
			r = *svc.Recovery
		}
		return false, nil
	})
	return r, err
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

// programExists reports whether a program is on the machine: a file under its root, or one of
// the programs the machine simulates itself, which have no file (Windows' own svchost.exe and
// the container runtime it ships, at the paths its release unpacks to).
func (m *Machine) programExists(win string) bool {
	own := []string{`C:\Windows\system32\svchost.exe`}
	switch m.cfg.Runtime {
	case v1alpha1.RuntimeContainerd:
		own = append(own, nodecmd.DefaultPaths().ContainerdBinDir+`\containerd.exe`)
	case v1alpha1.RuntimeDocker:
		own = append(own, nodecmd.DefaultPaths().DockerBinDir+`\dockerd.exe`)
	}
	if slices.ContainsFunc(own, func(p string) bool { return strings.EqualFold(p, win) }) {
		return true
	}
	fi, err := os.Stat(simmachine.Path(m.cfg.Root, win))
	return err == nil && fi.Mode().IsRegular()
}

// startLocked starts a service and, first, the services it depends on, as the SCM does.
func (m *Machine) startLocked(st *State, name string, started *[]string) error {
	svc, ok := st.Services[name]
	if !ok {
		//nolint:staticcheck,revive // ST1005: Windows' own message, verbatim
		return fmt.Errorf("The dependency service or group failed to start: service %s does not exist", name)
	}
	if svc.State == windows.Running {
		return nil
	}
	// StartService fails with ERROR_SERVICE_DISABLED on a disabled service
	// (https://learn.microsoft.com/en-us/windows/win32/api/winsvc/nf-winsvc-startservicew).
	if svc.Config.StartType == windows.StartDisabled {
		//nolint:staticcheck,revive // ST1005: Windows' own message, verbatim
		return fmt.Errorf("The service cannot be started, either because it is disabled or because it has no enabled devices associated with it: %s", name)
	}
	for _, dep := range svc.Config.Dependencies {
		if err := m.startLocked(st, dep, started); err != nil {
			return err
		}
	}
	// CreateService takes any command line; StartService then runs its program, and fails when
	// the file is not there: "The service binary file could not be found"
	// (https://learn.microsoft.com/en-us/windows/win32/api/winsvc/nf-winsvc-startservicew), error 2
	// ERROR_FILE_NOT_FOUND, "The system cannot find the file specified", or 3 ERROR_PATH_NOT_FOUND
	// ([MS-SCMR] 3.1.4.32 RStartServiceW,
	// https://learn.microsoft.com/en-us/openspecs/windows_protocols/ms-scmr/d9be95a2-cf01-4bdc-b30f-6fe4b37ada16).
	argv := append(windows.SplitCommandLine(svc.Config.BinaryPathName), "")
	if !m.programExists(argv[0]) {
		//nolint:staticcheck,revive // ST1005: Windows' own message, verbatim
		return fmt.Errorf(`The system cannot find the file specified: service %s runs "%s"`, name, argv[0])
	}
	svc.State = windows.Running
	m.serviceEvent(st, name, eventStateEntry, "entered the running state")
	*started = append(*started, name)
	if m.OnStart != nil {
		onStart, args := m.OnStart, argv[:len(argv)-1]
		m.hooks = append(m.hooks, func() {
			if err := onStart(name, args); err != nil {
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
			//nolint:staticcheck,revive // ST1005: Windows' own message, verbatim
			return false, errors.New("The service has not been started.")
		}
		for other, o := range st.Services {
			if o.State != windows.Stopped && slices.Contains(o.Config.Dependencies, name) {
				//nolint:staticcheck,revive // ST1005: Windows' own message, verbatim
				return false, fmt.Errorf("A stop control has been sent to a service that other running services are dependent on: %s depends on %s", other, name)
			}
		}
		svc.State, svc.PID = windows.Stopped, 0
		s.m.serviceEvent(st, name, eventStateEntry, "entered the stopped state")
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
		//nolint:staticcheck,revive // ST1005: Windows' own message, verbatim
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

// Failure is how a service's program failed.
type Failure int

const (
	// Crash: the service process ended without reporting SERVICE_STOPPED.
	Crash Failure = iota
	// ErrorStop: the service reported SERVICE_STOPPED with a non-zero exit code, as
	// svc.Handler.Execute returning a non-zero exit code does (x/sys/windows/svc).
	ErrorStop
)

func (f Failure) String() string {
	if f == ErrorStop {
		return "stopped-with-error"
	}
	return "crashed"
}

// Failed records that a running service's program failed, and queues its recovery the way the
// SCM does: "the failure actions are queued only if the service terminates without reporting
// a status of SERVICE_STOPPED", and also on a stop with a non-zero exit code when the failure
// actions flag is set ([MS-SCMR] 2.2.41 SERVICE_FAILURE_ACTIONS_FLAG) and was when the system
// last started (NonCrashFailuresActive). The Nth failure within
// the reset period runs the Nth action, the last one past the end ([MS-SCMR] 2.2.40
// SERVICE_FAILURE_ACTIONSW); a restart runs once its delay has passed on the machine's clock.
func (m *Machine) Failed(name string, how Failure) {
	_ = m.do(Op{Backend: "scm", Call: how.String(), Target: name}, true, func(st *State) (bool, error) {
		svc, ok := st.Services[name]
		if !ok || svc.State == windows.Stopped {
			return false, nil
		}
		svc.State, svc.PID = windows.Stopped, 0
		m.serviceEvent(st, name, eventTerminated, "terminated unexpectedly")
		r := svc.Recovery
		if r == nil || len(r.Actions) == 0 || (how == ErrorStop && !svc.NonCrashFailuresActive) {
			return true, nil
		}
		now := m.now()
		if svc.Failures > 0 && now.Sub(svc.LastFailure) > r.ResetPeriod {
			svc.Failures = 0
		}
		svc.Failures++
		svc.LastFailure = now
		if a := r.Actions[min(svc.Failures, len(r.Actions))-1]; a.Restart {
			svc.RestartAt = now.Add(a.Delay)
		}
		return true, nil
	})
}

func (m *Machine) now() time.Time {
	if m.cfg.Now != nil {
		return m.cfg.Now()
	}
	return time.Now()
}

// recover starts the stopped services whose queued restart is due, and records it.
func (m *Machine) recover(st *State) bool {
	recovered := false
	for _, name := range sortedKeys(st.Services) {
		svc := st.Services[name]
		if svc.RestartAt.IsZero() || m.now().Before(svc.RestartAt) {
			continue
		}
		svc.RestartAt = time.Time{}
		recovered = true
		op := Op{Backend: "scm", Call: "recovery-restart", Target: name, Changed: true}
		if svc.State == windows.Stopped {
			var started []string
			if err := m.startLocked(st, name, &started); err != nil {
				op.Err = err.Error()
			}
		}
		m.log = append(m.log, op)
	}
	return recovered
}

// Exited records that a service's process ended on its own, with err: the service is stopped.
func (m *Machine) Exited(name string, err error) {
	_ = m.do(Op{Backend: "scm", Call: "exited", Target: name, Body: err.Error()}, true, func(st *State) (bool, error) {
		svc, ok := st.Services[name]
		if !ok || svc.State == windows.Stopped {
			return false, nil
		}
		svc.State, svc.PID = windows.Stopped, 0
		m.serviceEvent(st, name, eventTerminated, "terminated unexpectedly")
		return true, nil
	})
}
