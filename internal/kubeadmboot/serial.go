package kubeadmboot

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strings"
)

// SerialPrefix starts the bootstrap script's lines on the serial console.
const SerialPrefix = "kubewin-boot: "

// Boot is what a machine's serial console says of its bootstrap.
type Boot struct {
	// Started is true once the script ran.
	Started bool
	// Ready is true once kubeadm finished; CACert is then the cluster CA certificate (PEM).
	Ready  bool
	CACert []byte
	// Failed is true when the script stopped in Phase with Exit.
	Failed      bool
	Phase, Exit string
	// Line is the last bootstrap line.
	Line string
}

// ReadyLine is the line the script writes once kubeadm finished.
func ReadyLine(role Role, caPEM []byte) string {
	return fmt.Sprintf("%sready role=%s ca=%s", SerialPrefix, role, base64.StdEncoding.EncodeToString(caPEM))
}

// FailedLine is the line the script writes when a phase fails.
func FailedLine(role Role, phase string, exit int) string {
	return fmt.Sprintf("%sfailed role=%s phase=%s exit=%d", SerialPrefix, role, phase, exit)
}

// ReadSerial reads the bootstrap's state from a serial console log: its last line decides.
func ReadSerial(log []byte) Boot {
	var b Boot
	for _, raw := range bytes.Split(log, []byte("\n")) {
		line := strings.TrimRight(string(raw), "\r")
		i := strings.Index(line, SerialPrefix)
		if i < 0 {
			continue
		}
		line = line[i:]
		fields := map[string]string{}
		words := strings.Fields(strings.TrimPrefix(line, SerialPrefix))
		if len(words) == 0 {
			continue
		}
		for _, w := range words[1:] {
			if k, v, ok := strings.Cut(w, "="); ok {
				fields[k] = v
			}
		}
		switch words[0] {
		case "start":
			b = Boot{Started: true, Line: line}
		case "ready":
			ca, err := base64.StdEncoding.DecodeString(fields["ca"])
			if err != nil || !bytes.Contains(ca, []byte("BEGIN CERTIFICATE")) {
				b = Boot{Started: true, Failed: true, Phase: "report", Exit: "bad CA", Line: line}
				continue
			}
			b = Boot{Started: true, Ready: true, CACert: ca, Line: line}
		case "failed":
			b = Boot{Started: true, Failed: true, Phase: fields["phase"], Exit: fields["exit"], Line: line}
		}
	}
	return b
}
