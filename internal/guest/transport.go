package guest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
)

// Command is a command line for a guest.
type Command struct {
	// What names the command in errors ("nodeboot bake").
	What string
	Line string
	// Elevated marks a command that changes the machine: a transport logged in as a user who
	// is not elevated runs it elevated (the Packer provisioner's elevated_user).
	Elevated bool
	// Stdin is the command's standard input, or nil.
	Stdin io.Reader
}

// Transport reaches a guest: a Packer communicator, an SSH or a WinRM connection.
type Transport interface {
	// Run runs a command and returns its exit status; the error is for a command that could
	// not be run or whose status is unknown (the connection broke).
	Run(ctx context.Context, c Command, stdout, stderr io.Writer) (int, error)
	// Upload writes size bytes from src to a node path, creating nothing else.
	Upload(ctx context.Context, dst string, src io.Reader, size int64) error
	// Download writes a node file to dst.
	Download(ctx context.Context, src string, dst io.Writer) error
}

// ExitError is a command that exited with a status that is not 0.
type ExitError struct {
	What   string
	Status int
	// Output is the end of the command's output (standard output and error, interleaved).
	Output string
}

func (e *ExitError) Error() string {
	msg := fmt.Sprintf("%s failed on the guest with exit status %d", e.What, e.Status)
	if e.Output != "" {
		msg += "; its last output:\n" + e.Output
	}
	return msg
}

// tailLines is how many lines of a command's output an ExitError keeps.
const tailLines = 20

// Run runs c, its output written to out (when not nil), and returns an *ExitError when it
// exits with a status that is not 0 or one of ok; it returns the status.
func Run(ctx context.Context, t Transport, c Command, out io.Writer, ok ...int) (int, error) {
	tail := &tailWriter{}
	w := io.Writer(tail)
	if out != nil {
		w = io.MultiWriter(tail, out)
	}
	sw := &syncWriter{w: w}
	status, err := t.Run(ctx, c, sw, sw)
	if err != nil {
		return status, fmt.Errorf("%s: %w", c.What, err)
	}
	if status == 0 {
		return 0, nil
	}
	for _, s := range ok {
		if status == s {
			return status, nil
		}
	}
	return status, &ExitError{What: c.What, Status: status, Output: tail.String()}
}

// Output runs c and returns its trimmed standard output; its standard error goes into the
// error of a failed command only.
func Output(ctx context.Context, t Transport, c Command) (string, error) {
	var stdout bytes.Buffer
	tail := &tailWriter{}
	status, err := t.Run(ctx, c, &stdout, tail)
	if err != nil {
		return "", fmt.Errorf("%s: %w", c.What, err)
	}
	if status != 0 {
		out := strings.TrimSpace(tail.String() + "\n" + lastLines(stdout.String(), tailLines))
		return "", &ExitError{What: c.What, Status: status, Output: out}
	}
	return strings.TrimSpace(stdout.String()), nil
}

// syncWriter serializes writes from a command's two streams.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// tailWriter keeps the last lines written to it.
type tailWriter struct{ buf []byte }

func (t *tailWriter) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if len(t.buf) > 64<<10 {
		t.buf = []byte(lastLines(string(t.buf), tailLines))
	}
	return len(p), nil
}

func (t *tailWriter) String() string { return lastLines(string(t.buf), tailLines) }

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(strings.ReplaceAll(s, "\r\n", "\n"), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// LineWriter calls line for every line written to it (without its end of line). Close
// flushes a last line without one.
func LineWriter(line func(string)) io.WriteCloser { return &lineWriter{line: line} }

type lineWriter struct {
	mu   sync.Mutex
	line func(string)
	buf  []byte
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		l.line(strings.TrimRight(string(l.buf[:i]), "\r"))
		l.buf = l.buf[i+1:]
	}
}

func (l *lineWriter) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		l.line(strings.TrimRight(string(l.buf), "\r"))
		l.buf = nil
	}
	return nil
}
