package cmd

import (
	"bytes"
	"io"
	"strings"
	"sync"

	"golang.org/x/sys/windows/svc/eventlog"
)

// eventSource is nodeboot's source in the Application event log.
const eventSource = "nodeboot"

// withEventLog copies every progress line into the Windows Application event log, as an error
// when it reports a failure, so that a node's join can be followed without a console.
func withEventLog(w io.Writer) io.Writer {
	l, err := eventlog.Open(eventSource)
	if err != nil {
		return w // the source is registered at bake; without it the console is enough
	}
	return io.MultiWriter(w, &eventWriter{log: l})
}

type eventWriter struct {
	mu   sync.Mutex
	log  *eventlog.Log
	line bytes.Buffer
}

func (e *eventWriter) Write(p []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.line.Write(p)
	for {
		line, err := e.line.ReadString('\n')
		if err != nil {
			e.line.WriteString(line) // incomplete: keep for the next write
			return len(p), nil
		}
		line = strings.TrimSpace(line)
		if strings.Contains(line, "] failed") || strings.HasPrefix(line, "Error:") {
			_ = e.log.Error(1, line)
		} else {
			_ = e.log.Info(1, line)
		}
	}
}

// installEventSource registers nodeboot's event source (at bake).
func installEventSource() error {
	err := eventlog.InstallAsEventCreate(eventSource, eventlog.Error|eventlog.Warning|eventlog.Info)
	if err != nil && !strings.Contains(err.Error(), "registry key already exists") {
		return err
	}
	return nil
}
