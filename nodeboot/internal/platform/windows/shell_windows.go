package windows

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"

	"github.com/kubewin/kubewin/internal/powershell"
)

// powerShell runs scripts with Windows PowerShell, encoded.
type powerShell struct{}

func (powerShell) Run(ctx context.Context, s Script) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "powershell.exe", powershell.Args(s.Text)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("%s: %v: %s", s.Name, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}
