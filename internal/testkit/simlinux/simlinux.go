// Package simlinux simulates a Linux virtual machine on this host, for the ARM test server's
// machines: a machine is a directory holding what the machine itself would write under /etc and
// /var/lib. A command runs "on" the machine in private user, mount and UTS namespaces in which
// the machine's directories are overlaid on the host's /etc and /var/lib and the hostname is the
// machine's computer name, so that the host's programs (kubeadm, kubectl, openssl, sh) run
// unmodified and read and write files where they would on the machine. Its /run is its own and
// empty, so that no command reaches the host's services (systemd, a container runtime). It needs
// unprivileged
// user namespaces (util-linux's unshare) and overlayfs in them (Linux 5.11 or later).
//
// What it does not simulate: the network (a command sees the host's), processes started by a
// command outliving it as services (no init system), and everything outside /etc and /var/lib,
// which commands see as the host's.
package simlinux

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Overlaid are the host directories a machine has its own copy of.
var Overlaid = []string{"/etc", "/var/lib"}

// Machine is a simulated Linux machine.
type Machine struct {
	// Root holds the machine's files: Root/etc and Root/var/lib are its /etc and /var/lib (what
	// it changed there), Root/.work is overlayfs's work area.
	Root string
	// Hostname is the machine's computer name.
	Hostname string
	// Path lists directories searched for programs before the host's PATH.
	Path []string
}

// Prepare creates the machine's directories.
func (m *Machine) Prepare() error {
	if strings.ContainsAny(m.Root, ",:\n") || !filepath.IsAbs(m.Root) {
		return fmt.Errorf("simlinux: machine root %q must be an absolute path without ',' or ':' (overlayfs options)", m.Root)
	}
	if m.Hostname == "" || strings.ContainsAny(m.Hostname, "\n/") {
		return fmt.Errorf("simlinux: invalid hostname %q", m.Hostname)
	}
	for _, d := range Overlaid {
		for _, p := range []string{filepath.Join(m.Root, d), filepath.Join(m.Root, ".work", d)} {
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		}
	}
	return nil
}

// File is the host path of a file of the machine, given its absolute path on the machine; it
// is in the machine's directory for the overlaid directories, else the host's own.
func (m *Machine) File(path string) string {
	for _, d := range Overlaid {
		if path == d || strings.HasPrefix(path, d+"/") {
			return filepath.Join(m.Root, path)
		}
	}
	return path
}

// WriteFile writes a file of the machine, creating its directories.
func (m *Machine) WriteFile(path string, data []byte, perm fs.FileMode) error {
	f := m.File(path)
	if f == path {
		return fmt.Errorf("simlinux: %s is outside the machine's own directories %v", path, Overlaid)
	}
	if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
		return err
	}
	return os.WriteFile(f, data, perm)
}

// ReadFile reads a file of the machine.
func (m *Machine) ReadFile(path string) ([]byte, error) { return os.ReadFile(m.File(path)) }

// setup runs as root of the new namespaces: it overlays the machine's directories, gives it an
// empty /run, names the machine and runs the command.
var setup = `set -e
root=$1 host=$2; shift 2
for d in ` + strings.Join(Overlaid, " ") + `; do
	mount -t overlay kubewin-sim -o "lowerdir=$d,upperdir=$root$d,workdir=$root/.work$d,userxattr" "$d"
done
mount -t tmpfs kubewin-sim /run
printf '%s\n' "$host" >/proc/sys/kernel/hostname
exec "$@"
`

// Command is a command run on the machine.
func (m *Machine) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	argv := append([]string{"--user", "--map-root-user", "--mount", "--uts", "--propagation", "private", "--", "/bin/sh", "-c", setup, "sh", m.Root,
		m.Hostname, name}, args...)
	cmd := exec.CommandContext(ctx, "unshare", argv...)
	path := os.Getenv("PATH")
	if len(m.Path) > 0 {
		path = strings.Join(m.Path, string(os.PathListSeparator)) + string(os.PathListSeparator) + path
	}
	cmd.Env = append(os.Environ(), "PATH="+path, "HOME=/root", "KUBECONFIG=")
	return cmd
}

// Run runs a command on the machine and returns its combined output.
func (m *Machine) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	out, err := m.Command(ctx, name, args...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s %s on machine %s: %w\n%s", name, strings.Join(args, " "), m.Hostname, err, out)
	}
	return out, nil
}

// Available checks that machines can be simulated here: unshare with unprivileged user
// namespaces and overlayfs in them.
func Available() error {
	dir, err := os.MkdirTemp("", "simlinux-check-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	m := Machine{Root: dir, Hostname: "check"}
	if err := m.Prepare(); err != nil {
		return err
	}
	out, err := m.Command(context.Background(), "sh", "-c",
		"mkdir -p /etc/kubewin-check && hostname 2>/dev/null || cat /proc/sys/kernel/hostname").CombinedOutput()
	if err != nil {
		return fmt.Errorf("simulated Linux machines need util-linux's unshare with unprivileged user namespaces and overlayfs in them (Linux 5.11+; "+
			"sysctl kernel.unprivileged_userns_clone=1): %w: %s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "etc", "kubewin-check")); err != nil {
		return errors.New("simulated Linux machine: a directory made under /etc did not land in the machine's directory")
	}
	return nil
}
