//go:build !windows

package cmd

import "context"

// serve runs f until SIGINT or SIGTERM.
func serve(f func(context.Context) error) error {
	ctx, stop := signalContext()
	defer stop()
	return f(ctx)
}
