package pool

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/kubewin/kubewin/internal/nodestatus"
)

// Diagnosis is what a machine's diagnostics bundle (nodeboot diagnose) says.
type Diagnosis struct {
	// Report is the machine's own join report, nil when it has none.
	Report *nodestatus.Report
	// Summary is the bundle's summary.
	Summary string
	// Bundle is the bundle, nil when only its summary came back; OnNode is then where the
	// bundle is on the machine (a Windows path).
	Bundle []byte
	OnNode string
	// Saved is where the bundle was saved on this machine (SaveBundle), once it was.
	Saved string
}

// Detail is the part of an error message the diagnosis adds: its summary and where the
// full bundle is.
func (d *Diagnosis) Detail(node string) string {
	if d == nil || d.Summary == "" {
		return ""
	}
	msg := fmt.Sprintf("Diagnostics of %s (nodeboot diagnose):\n%s", node, strings.TrimRight(d.Summary, "\n"))
	switch {
	case d.Saved != "":
		msg += "\n\nThe full diagnostics bundle was saved to " + d.Saved + " (readable by you only)."
	case d.OnNode != "":
		msg += "\n\nThe full diagnostics bundle is on the machine at " + d.OnNode + "."
	}
	return msg
}

// DiagnosticsDir is where SaveBundle saves bundles: kubewin/diagnostics in the user's cache
// directory (os.UserCacheDir: $XDG_CACHE_HOME or ~/.cache on Linux, ~/Library/Caches on macOS,
// %LocalAppData% on Windows).
func DiagnosticsDir() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no directory to save the diagnostics bundle in: %w", err)
	}
	return filepath.Join(cache, "kubewin", "diagnostics"), nil
}

// SaveBundle saves the diagnosis's bundle as <node>-<UTC time>.tar.gz, readable by the user
// only (0600 in a 0700 directory: it holds the node's logs and configuration), and records
// where in Saved.
func (d *Diagnosis) SaveBundle(node string) error {
	if d == nil || d.Bundle == nil {
		return nil
	}
	dir, err := DiagnosticsDir()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("save the diagnostics bundle: %w", err)
	}
	// MkdirAll leaves an existing directory's mode as it is.
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("save the diagnostics bundle: %w", err)
	}
	path := filepath.Join(dir, fmt.Sprintf("%s-%s.tar.gz", node, time.Now().UTC().Format("20060102T150405.000Z")))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("save the diagnostics bundle: %w", err)
	}
	_, err = f.Write(d.Bundle)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("save the diagnostics bundle: %w", err)
	}
	d.Saved = path
	return nil
}

// diagnose fetches a machine's diagnosis and saves its bundle, within a bound of its own: it
// runs when a join failed or the wait ran out. A failure to fetch it is logged, not returned.
func (m *Manager) diagnose(ctx context.Context, name string) *Diagnosis {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), diagnoseTimeout)
	defer cancel()
	d, err := m.Compute.Diagnose(ctx, name)
	if err != nil {
		tflog.Warn(ctx, "cannot fetch the machine's diagnostics bundle", map[string]any{"machine": name, "error": err.Error()})
		return nil
	}
	if err := d.SaveBundle(name); err != nil {
		tflog.Warn(ctx, "cannot save the machine's diagnostics bundle", map[string]any{"machine": name, "error": err.Error()})
	}
	return d
}

// diagnoseTimeout bounds the fetch of one machine's diagnosis: on Azure a run command, which
// goes through the VM agent and takes tens of seconds.
const diagnoseTimeout = 5 * time.Minute
