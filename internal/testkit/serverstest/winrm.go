// Package serverstest is a WinRM server on 127.0.0.1 for tests: github.com/dylanmei/winrmtest
// answers the commands, behind an HTTPS proxy of this package that enforces HTTP Basic
// authentication and records every command, with its standard input.
//
// What it cannot do, and so what tests through it do not check: winrmtest sends no standard
// error (a command's stderr is dropped), speaks no NTLM, Kerberos or CredSSP (the proxy knows
// Basic only), streams nothing (a command's whole output comes in one answer), and runs no
// PowerShell (Answer plays the server). winrmtest also predates the WS-Addressing actions that
// masterzen/winrm checks in the answers to Create and Command, and has no shell/Send: the proxy
// adds the actions, and takes standard input itself, handing it to Answer.
package serverstest

import (
	"bytes"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dylanmei/winrmtest"

	"github.com/kubewin/kubewin/internal/testkit/guesttest"
)

// Command is a command the server received: its PowerShell script (decoded) or command line,
// and its standard input.
type Command struct {
	Script string
	Stdin  []byte
}

// WinRM is the server.
type WinRM struct {
	Host string
	Port int
	// CA is the PEM certificate the server's TLS certificate is (self-signed).
	CA string

	// Answer answers a command with its standard output and exit code. It is called once a
	// command that reads its standard input ($input) has it all.
	Answer func(c Command) (stdout string, exit int)

	user, password string
	mu             sync.Mutex
	commands       []Command
	refused        int
	stdin          *bytes.Buffer
	stdinDone      chan struct{}
}

// NewWinRM starts a server that lets user in with password; it stops when the test ends.
func NewWinRM(t testing.TB, user, password string) *WinRM {
	t.Helper()
	w := &WinRM{user: user, password: password, Answer: func(Command) (string, int) { return "", 0 }}
	remote := winrmtest.NewRemote()
	t.Cleanup(remote.Close)
	// One command runs at a time: the matcher notes it, the handler answers it.
	var current string
	remote.CommandFunc(func(candidate string) bool {
		w.mu.Lock()
		current = candidate
		w.mu.Unlock()
		return true
	}, func(out, _ io.Writer) int {
		w.mu.Lock()
		line := current
		w.mu.Unlock()
		return w.answer(line, out)
	})
	backend := "http://" + net.JoinHostPort(remote.Host, strconv.Itoa(remote.Port)) + "/wsman"
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { w.serve(rw, r, backend) }))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // handshakes that tests make fail
	srv.StartTLS()
	t.Cleanup(srv.Close)
	w.CA = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	addr, ok := srv.Listener.Addr().(*net.TCPAddr)
	if !ok {
		t.Fatalf("a TCP listener at %v", srv.Listener.Addr())
	}
	w.Host, w.Port = addr.IP.String(), addr.Port
	return w
}

// Commands returns the commands received so far.
func (w *WinRM) Commands() []Command {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Command(nil), w.commands...)
}

// Refused is how many requests came without the right credentials.
func (w *WinRM) Refused() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.refused
}

func (w *WinRM) answer(line string, out io.Writer) int {
	c := Command{Script: guesttest.Decode(line)}
	w.mu.Lock()
	in, done := w.stdin, w.stdinDone
	w.mu.Unlock()
	if strings.Contains(c.Script, "$input") {
		select {
		case <-done:
		case <-time.After(30 * time.Second):
		}
		w.mu.Lock()
		c.Stdin = bytes.Clone(in.Bytes())
		w.mu.Unlock()
	}
	w.mu.Lock()
	w.commands = append(w.commands, c)
	w.mu.Unlock()
	stdout, exit := w.Answer(c)
	_, _ = io.WriteString(out, stdout) // a client that left has no one to tell
	return exit
}

var (
	actionRE = regexp.MustCompile(`<a:Action[^>]*>([^<]+)</a:Action>`)
	stdinRE  = regexp.MustCompile(`<rsp:Stream([^>]*?)(?:/>|>([^<]*)</rsp:Stream>)`)
)

// Answers to the actions winrmtest does not name.
var answerActions = map[string]string{
	"http://schemas.xmlsoap.org/ws/2004/09/transfer/Create":           "http://schemas.xmlsoap.org/ws/2004/09/transfer/CreateResponse",
	"http://schemas.microsoft.com/wbem/wsman/1/windows/shell/Command": "http://schemas.microsoft.com/wbem/wsman/1/windows/shell/CommandResponse",
}

func (w *WinRM) serve(rw http.ResponseWriter, r *http.Request, backend string) {
	if u, p, ok := r.BasicAuth(); !ok || u != w.user || p != w.password {
		w.mu.Lock()
		w.refused++
		w.mu.Unlock()
		rw.Header().Set("WWW-Authenticate", `Basic realm="WSMAN"`)
		rw.WriteHeader(http.StatusUnauthorized)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var action string
	if m := actionRE.FindSubmatch(body); m != nil {
		action = string(m[1])
	}
	switch {
	case strings.HasSuffix(action, "shell/Send"):
		w.receive(body)
		rw.Header().Set("Content-Type", "application/soap+xml;charset=UTF-8")
		_, _ = io.WriteString(rw,
			`<s:Envelope xmlns:s="http://www.w3.org/2003/05/soap-envelope" xmlns:rsp="http://schemas.microsoft.com/wbem/wsman/1/windows/shell">`+
				`<s:Body><rsp:SendResponse/></s:Body></s:Envelope>`)
		return
	case strings.HasSuffix(action, "shell/Command"):
		w.mu.Lock()
		w.stdin, w.stdinDone = &bytes.Buffer{}, make(chan struct{})
		w.mu.Unlock()
	}
	resp, err := http.Post(backend, r.Header.Get("Content-Type"), bytes.NewReader(body))
	if err != nil {
		http.Error(rw, err.Error(), http.StatusBadGateway)
		return
	}
	defer func() { _ = resp.Body.Close() }()
	out, _ := io.ReadAll(resp.Body)
	if answer, ok := answerActions[action]; ok {
		i := bytes.Index(out, []byte("<env:Envelope"))
		j := i + bytes.IndexByte(out[i:], '>') + 1
		header := fmt.Sprintf(`<env:Header><a:Action xmlns:a="http://schemas.xmlsoap.org/ws/2004/08/addressing">%s</a:Action></env:Header>`, answer)
		out = append(append(append([]byte{}, out[:j]...), header...), out[j:]...)
	}
	for k, v := range resp.Header {
		rw.Header()[k] = v
	}
	rw.Header().Del("Content-Length")
	rw.WriteHeader(resp.StatusCode)
	_, _ = rw.Write(out) // a client that left has no one to tell
}

// receive takes a Send's standard input.
func (w *WinRM) receive(body []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range stdinRE.FindAllSubmatch(body, -1) {
		if !bytes.Contains(m[1], []byte(`Name="stdin"`)) {
			continue
		}
		data, _ := base64.StdEncoding.DecodeString(string(m[2]))
		w.stdin.Write(data)
		if bytes.Contains(m[1], []byte(`End="true"`)) {
			select {
			case <-w.stdinDone:
			default:
				close(w.stdinDone)
			}
		}
	}
}
