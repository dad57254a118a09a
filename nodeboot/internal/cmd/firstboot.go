package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/kubewin/kubewin/nodeboot/internal/imds"
	"github.com/kubewin/kubewin/nodeboot/internal/platform"
)

// The first boot: the service manager starts nodeboot while Windows setup may still run, before
// the provisioner has written the custom data and while the computer has a temporary name.
var (
	// firstBootTimeout bounds the wait for setup and for the custom data.
	firstBootTimeout = 30 * time.Minute
	// firstBootPoll is how often the wait looks again.
	firstBootPoll = time.Second
	// metadataTimeout bounds the retries of the instance metadata service's transient answers:
	// during a VM's first boot IMDS may answer 410 for up to 70 s (the IMDS docs' error table).
	metadataTimeout = 90 * time.Second
	// metadataUnreachable is how often a machine whose instance metadata service does not
	// answer at all (one not on Azure) is asked before it is named after its computer name.
	metadataUnreachable = 3
)

// waitFirstBoot waits, logging each step, until Windows setup is complete and the NodeConfig
// file exists.
func waitFirstBoot(ctx context.Context, p platform.Platform, out io.Writer, config string) error {
	ctx, cancel := context.WithTimeout(ctx, firstBootTimeout)
	defer cancel()
	logged := ""
	say := func(s string) {
		if s != logged {
			_, _ = fmt.Fprintln(out, "[first-boot] "+s)
			logged = s
		}
	}
	for {
		state, err := p.ImageState()
		_, statErr := os.Stat(p.Path(config))
		switch {
		case err != nil:
			say(fmt.Sprintf("waiting for Windows setup: cannot read its state: %v", err))
		case state != platform.ImageStateComplete:
			say("waiting for Windows setup to complete (ImageState " + state + ")")
		case errors.Is(statErr, fs.ErrNotExist):
			say("Windows setup is complete; waiting for the NodeConfig at " + config)
		case statErr != nil:
			return fmt.Errorf("the NodeConfig at %s: %w", config, statErr)
		default:
			if logged != "" {
				say("Windows setup is complete and the NodeConfig is there")
			}
			return nil
		}
		select {
		case <-time.After(firstBootPoll):
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("gave up after %s %s: check the machine's Windows setup and its custom data", firstBootTimeout,
					strings.TrimPrefix(logged, "Windows setup is complete; "))
			}
			return ctx.Err()
		}
	}
}

// nodeName is the name of a node whose NodeConfig names none: the computer name Azure gave the
// machine (IMDS compute.osProfile.computerName), or, on a machine without instance metadata,
// its computer name, lower-cased.
func nodeName(ctx context.Context, p platform.Platform, out io.Writer) (string, error) {
	if endpoint := p.MetadataEndpoint(); endpoint != "" {
		name, err := metadataName(ctx, imds.Client{Endpoint: endpoint})
		if err == nil {
			return strings.ToLower(name), nil
		}
		var status *imds.StatusError
		if errors.As(err, &status) || ctx.Err() != nil {
			return "", fmt.Errorf("name the node: %w", err)
		}
		_, _ = fmt.Fprintf(out, "[first-boot] the instance metadata service did not answer (%v): the node is named after the computer\n", err)
	}
	h, err := p.ComputerName()
	if err != nil {
		return "", err
	}
	return strings.ToLower(h), nil
}

// metadataName asks IMDS for the computer name, repeating its transient answers for up to
// metadataTimeout and a failure to reach it metadataUnreachable times.
func metadataName(ctx context.Context, c imds.Client) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, metadataTimeout)
	defer cancel()
	unreachable := 0
	for {
		in, err := c.Instance(ctx)
		var status *imds.StatusError
		switch {
		case err == nil && in.Compute.OSProfile.ComputerName == "":
			return "", errors.New("the instance metadata has no compute.osProfile.computerName")
		case err == nil:
			return in.Compute.OSProfile.ComputerName, nil
		case errors.As(err, &status) && !status.Transient():
			return "", err
		case !errors.As(err, &status):
			if unreachable++; unreachable >= metadataUnreachable {
				return "", err
			}
		}
		select {
		case <-time.After(firstBootPoll):
		case <-ctx.Done():
			return "", fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		}
	}
}
