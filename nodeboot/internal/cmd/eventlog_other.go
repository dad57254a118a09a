//go:build !windows

package cmd

import "io"

// withEventLog is only relevant on Windows, where progress also goes to the Event Log.
func withEventLog(w io.Writer) io.Writer { return w }

// installEventSource is only relevant on Windows.
func installEventSource() error { return nil }
