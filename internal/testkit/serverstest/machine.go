package serverstest

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/kubewin/kubewin/internal/guest"
	"github.com/kubewin/kubewin/internal/nodecmd"
	"github.com/kubewin/kubewin/internal/nodestatus"
)

// Machine plays a Windows server to kubewin's commands, for WinRM.Answer: it says its Facts
// (with the files written to it that Facts looks for), keeps the files written to it and
// removes those written since its state was recorded when it is restored, installs
// the bake plan as its image manifest when nodeboot bake runs, and runs nodeboot join and status
// as told. Everything else succeeds silently.
type Machine struct {
	Facts guest.Facts
	// Join is called when nodeboot join runs; it returns join's output and exit code.
	Join func() (string, int)
	// Report is what nodeboot status --json prints.
	Report *nodestatus.Report
	// Summary, when set, is what nodeboot diagnose prints before its bundle line; the run puts
	// Bundle where nodeboot diagnose writes it.
	Summary string
	Bundle  []byte
	// Fail makes every command whose script contains a key fail with that exit code and
	// output.
	Fail map[string]Failure

	mu    sync.Mutex
	files map[string][]byte
	// snapshot lists the files there were when the server's state was recorded.
	snapshot []string
}

// Failure is a command's failure.
type Failure struct {
	Exit   int
	Output string
}

var (
	dstRE  = regexp.MustCompile(`\$dst = '((?:[^']|'')*)'`)
	readRE = regexp.MustCompile(`ReadAllBytes\('((?:[^']|'')*)'\)`)
)

func unquote(s string) string { return strings.ReplaceAll(s, "''", "'") }

// Answer answers a command.
func (m *Machine) Answer(c Command) (string, int) {
	for key, f := range m.Fail {
		if strings.Contains(c.Script, key) {
			return f.Output, f.Exit
		}
	}
	switch {
	case strings.Contains(c.Script, "ConvertTo-Json -Compress"):
		f := m.Facts
		m.mu.Lock()
		for path := range m.files {
			if slices.Contains(guest.ProbeFiles(), path) && !slices.Contains(f.Files, path) {
				f.Files = append(f.Files, path)
			}
		}
		m.mu.Unlock()
		b, _ := json.Marshal(f)
		return string(b) + "\r\n", 0
	case strings.Contains(c.Script, "entries recorded"):
		m.mu.Lock()
		m.snapshot = append([]string{}, slices.Collect(maps.Keys(m.files))...)
		m.mu.Unlock()
		return "3 entries recorded\r\n", 0
	case strings.Contains(c.Script, "entries removed"):
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.snapshot == nil {
			return "Exception calling \"ReadAllLines\": Could not find file", 1
		}
		n := len(m.files)
		maps.DeleteFunc(m.files, func(path string, _ []byte) bool { return !slices.Contains(m.snapshot, path) })
		m.snapshot = nil
		return fmt.Sprintf("%d entries removed\r\n", n-len(m.files)), 0
	case strings.Contains(c.Script, "' bake --manifest "):
		// The bake installs the plan as the image's manifest.
		plan, _ := m.File(guest.PlanPath)
		m.SetFile(nodecmd.DefaultPaths().ImageManifest, plan)
		return "[bake] image ready\r\n", 0
	case strings.Contains(c.Script, "FromBase64String($line)"):
		var data []byte
		for _, line := range strings.Fields(string(c.Stdin)) {
			b, err := base64.StdEncoding.DecodeString(line)
			if err != nil {
				return "invalid base64 on standard input", 1
			}
			data = append(data, b...)
		}
		path := unquote(dstRE.FindStringSubmatch(c.Script)[1])
		m.mu.Lock()
		if m.files == nil {
			m.files = map[string][]byte{}
		}
		m.files[path] = data
		m.mu.Unlock()
		sum := sha256.Sum256(data)
		return hex.EncodeToString(sum[:]) + "\r\n", 0
	case readRE.MatchString(c.Script):
		data, ok := m.File(unquote(readRE.FindStringSubmatch(c.Script)[1]))
		if !ok {
			return "Exception calling \"ReadAllBytes\": Could not find file", 1
		}
		return base64.StdEncoding.EncodeToString(data) + "\r\n", 0
	case strings.Contains(c.Script, `\nodeboot.exe' 'join'`) && m.Join != nil:
		return m.Join()
	case strings.Contains(c.Script, `\nodeboot.exe' 'diagnose'`) && m.Summary != "":
		path := nodecmd.DefaultPaths().DiagnosticsBundle()
		m.SetFile(path, m.Bundle)
		return strings.ReplaceAll(m.Summary, "\n", "\r\n") + nodestatus.BundleLinePrefix + path + "\r\n", 0
	case strings.Contains(c.Script, `\nodeboot.exe' 'status' '--json'`) && m.Report != nil:
		b, _ := json.Marshal(m.Report)
		return string(b), 0
	}
	return "", 0
}

// File returns a file written to the machine, or put there with SetFile.
func (m *Machine) File(path string) ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	data, ok := m.files[path]
	return data, ok
}

// SetFile puts a file on the machine.
func (m *Machine) SetFile(path string, data []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.files == nil {
		m.files = map[string][]byte{}
	}
	m.files[path] = data
}
