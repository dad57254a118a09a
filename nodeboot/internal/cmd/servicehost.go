package cmd

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/kubewin/kubewin/nodeboot/internal/logfile"
)

// newServiceHost hosts a program that cannot run as a Windows service itself (cri-dockerd has
// no service mode): nodeboot answers the Service Control Manager and runs the program, its
// output appended to a log file that rotates as the node's other logs do, until the service is
// stopped, when it ends the program.
func newServiceHost() *cobra.Command {
	var logFile string
	c := &cobra.Command{
		Use:   "service-host --log-file FILE -- PROGRAM [ARG...]",
		Short: "Run a program without a Windows service mode as a service (the node's cri-dockerd)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return serve(func(ctx context.Context) error { return host(ctx, logFile, logfile.Default, args[0], args[1:]) })
		},
	}
	c.Flags().StringVar(&logFile, "log-file", "", "file the program's output is appended to")
	_ = c.MarkFlagRequired("log-file")
	return c
}

// host runs the program until it exits (an error, so that the service manager's recovery
// actions restart it) or ctx ends (the service stops; the program is killed).
func host(ctx context.Context, logFile string, rotation logfile.Policy, program string, args []string) error {
	if err := os.MkdirAll(filepath.Dir(logFile), 0o755); err != nil {
		return err
	}
	log, err := logfile.Open(logFile, rotation)
	if err != nil {
		return err
	}
	defer func() { _ = log.Close() }() // the program's exit, not its log, is what the service manager acts on
	cmd := exec.CommandContext(ctx, program, args...)
	cmd.Stdout, cmd.Stderr = log, log
	err = cmd.Run()
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", program, err)
	}
	return fmt.Errorf("%s exited", program)
}
