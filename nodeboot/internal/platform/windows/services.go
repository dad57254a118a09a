package windows

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/kubewin/kubewin/nodeboot/internal/logfile"
	"github.com/kubewin/kubewin/nodeboot/internal/platform"
)

type services struct{ p *Platform }

// restartAlways restarts a failed node service after 10 s, however often it fails: with one
// action, every failure runs it ([MS-SCMR] 2.2.40: past the last action "the service controller
// repeats the last action"). Kubernetes' own Windows node setup does the same
// (cluster/gce/windows/k8s-node-setup.psm1: sc.exe failure kubelet reset= 0
// actions= restart/10000). A stop with an error counts as a failure too: nodeboot's service
// handler and service-host report one when serve fails or the hosted program exits, and
// without the failure actions flag the SCM runs the actions only on a crash ([MS-SCMR] 2.2.41
// SERVICE_FAILURE_ACTIONS_FLAG; x/sys/windows/svc/mgr SetRecoveryActionsOnNonCrashFailures).
var restartAlways = Recovery{Actions: []RecoveryAction{{Restart: true, Delay: 10 * time.Second}}, OnNonCrashFailures: true}

// Log rotation of the services kube-log-runner runs, by the node's policy (logfile.Default: a
// new file every 100 MB, files older than a week removed), flushed every 5 s so that the log is
// readable while the service runs (k8s.io/component-base logs/kube-log-runner, flags
// -log-file-size, -log-file-age and -flush-interval, since Kubernetes 1.32).
var (
	logFileSize      = strconv.FormatInt(logfile.Default.MaxSize>>20, 10) + "M"
	logFileAge       = strconv.Itoa(int(logfile.Default.MaxAge.Hours())) + "h"
	logFlushInterval = "5s"
)

// runCommand is the program and arguments the SCM starts for spec. Services with a log file
// run under kube-log-runner, which writes their output to it: the node components lost their
// log file flags in Kubernetes 1.26, and a Windows service's output goes nowhere. A program
// started with --windows-service (the kubelet, kube-proxy) connects to the SCM itself from
// under kube-log-runner: its service handler calls svc.Run without checking its parent
// (kubernetes pkg/windows/service/service.go initService); Kubernetes' Windows node setup runs
// both so (cluster/gce/windows/k8s-node-setup.psm1: kube-log-runner.exe -log-file=...
// kubelet.exe with --windows-service=true). containerd and dockerd do check that the SCM
// started them (svc.IsWindowsService: the parent must be services.exe) and run as consoles
// otherwise: they are never wrapped (SelfRegistering).
func runCommand(spec platform.ServiceSpec) (string, []string) {
	if spec.LogFile == "" || spec.LogRunner == "" {
		return spec.Executable, spec.Args
	}
	return spec.LogRunner, append([]string{
		"-log-file=" + spec.LogFile, "-log-file-size=" + logFileSize, "-log-file-age=" + logFileAge,
		"-flush-interval=" + logFlushInterval, spec.Executable,
	}, spec.Args...)
}

func startType(m platform.StartMode) StartType {
	if m == platform.StartAtBoot {
		return StartAutomatic
	}
	return StartManual
}

// serviceConfig is the SCM configuration of spec.
func serviceConfig(spec platform.ServiceSpec) ServiceConfig {
	exe, args := runCommand(spec)
	return ServiceConfig{
		BinaryPathName: CommandLine(exe, args), StartType: startType(spec.Start),
		DisplayName: spec.DisplayName, Description: spec.Description, Dependencies: spec.Dependencies,
	}
}

func sameConfig(a, b ServiceConfig) bool {
	return a.BinaryPathName == b.BinaryPathName && a.StartType == b.StartType && a.DisplayName == b.DisplayName &&
		a.Description == b.Description && slices.Equal(a.Dependencies, b.Dependencies)
}

// Ensure creates the service, or updates its configuration and its recovery where they differ;
// a service that matches is left alone. The recovery is compared on its own: a service created
// by an older nodeboot may have the same configuration without the failure actions flag.
func (s services) Ensure(ctx context.Context, spec platform.ServiceSpec) error {
	if spec.SelfRegistering {
		return s.ensureSelfRegistered(ctx, spec)
	}
	scm := s.p.b.SCM
	want := serviceConfig(spec)
	have, _, err := scm.Query(spec.Name)
	switch {
	case errors.Is(err, ErrNotFound):
		err = scm.Create(spec.Name, want)
	case err != nil:
		return err
	case !sameConfig(have, want):
		err = scm.Update(spec.Name, want)
	}
	if err != nil {
		return err
	}
	if r, err := scm.QueryRecovery(spec.Name); err != nil || sameRecovery(r, restartAlways) {
		return err
	}
	return scm.SetRecovery(spec.Name, restartAlways)
}

func sameRecovery(a, b Recovery) bool {
	return slices.Equal(a.Actions, b.Actions) && a.ResetPeriod == b.ResetPeriod && a.OnNonCrashFailures == b.OnNonCrashFailures
}

// registeredCommand is the command line containerd and dockerd register themselves with:
// their own path, --run-service, then the arguments given to --register-service
// (containerd cmd/containerd/command/service_windows.go registerService; moby
// cmd/dockerd/service_windows.go registerService).
func registeredCommand(spec platform.ServiceSpec) string {
	return CommandLine(spec.Executable, append([]string{"--run-service"}, spec.Args...))
}

// ensureSelfRegistered registers a runtime the way its project documents, with its own
// --register-service (sig-windows-tools hostprocess/Install-Containerd.ps1; GCE
// k8s-node-setup.psm1 Start_Containerd: containerd.exe --register-service --log-file ...),
// which sets the service up to start at boot with its own recovery actions. A registration
// with other arguments is removed first.
func (s services) ensureSelfRegistered(ctx context.Context, spec platform.ServiceSpec) error {
	scm := s.p.b.SCM
	have, _, err := scm.Query(spec.Name)
	switch {
	case err == nil && have.BinaryPathName == registeredCommand(spec):
		return nil
	case err == nil:
		if err := s.Delete(ctx, spec.Name); err != nil {
			return err
		}
	case !errors.Is(err, ErrNotFound):
		return err
	}
	if _, err := s.p.b.Shell.Run(ctx, programScript(spec.Executable, append([]string{"--register-service"}, spec.Args...))); err != nil {
		return fmt.Errorf("%s --register-service: %w", spec.Executable, err)
	}
	return nil
}

// Start starts the service unless it runs, and waits until it does.
func (s services) Start(ctx context.Context, name string) error {
	scm := s.p.b.SCM
	_, state, err := scm.Query(name)
	if err != nil {
		return err
	}
	if state == Running {
		return nil
	}
	if state == Stopped {
		if err := scm.Start(name); err != nil {
			return err
		}
	}
	return s.p.waitFor(ctx, time.Minute, "service "+name+" did not start within a minute", func() (bool, error) {
		_, state, err := scm.Query(name)
		return err == nil && state == Running, err
	})
}

// Stop stops the service unless it is stopped or missing, and waits until it is.
func (s services) Stop(ctx context.Context, name string) error {
	scm := s.p.b.SCM
	_, state, err := scm.Query(name)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if state == Stopped {
		return nil
	}
	if state == Running {
		if err := scm.Stop(name); err != nil {
			return err
		}
	}
	return s.p.waitFor(ctx, time.Minute, "service "+name+" did not stop within a minute", func() (bool, error) {
		_, state, err := scm.Query(name)
		return errors.Is(err, ErrNotFound) || state == Stopped, nil
	})
}

func (s services) Running(_ context.Context, name string) (bool, error) {
	_, state, err := s.p.b.SCM.Query(name)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil && state != Stopped, err
}

// Delete stops and deletes the service, and waits until the SCM has removed it (a service
// marked for deletion cannot be created again).
func (s services) Delete(ctx context.Context, name string) error {
	if err := s.Stop(ctx, name); err != nil {
		return err
	}
	scm := s.p.b.SCM
	if err := scm.Delete(name); err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		return err
	}
	return s.p.waitFor(ctx, time.Minute, "service "+name+" is still registered a minute after its deletion", func() (bool, error) {
		_, _, err := scm.Query(name)
		return errors.Is(err, ErrNotFound), nil
	})
}
