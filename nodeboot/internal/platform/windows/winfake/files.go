package winfake

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/kubewin/kubewin/internal/sim/simmachine"
	"github.com/kubewin/kubewin/nodeboot/internal/platform/windows"
)

// files are the machine's files under its root; the security descriptors they are created with
// are recorded.
type files struct{ m *Machine }

var _ windows.Files = files{}

func (f files) Path(win string) string { return simmachine.Path(f.m.cfg.Root, win) }

func (f files) Write(win string, data []byte, sddl string) error {
	return f.m.change(Op{Backend: "files", Call: "Write", Target: win, Body: sddl}, true, func(st *State) (bool, bool, error) {
		path := f.Path(win)
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
			if had, err := acl(st, path, win); err == nil && had == sddl {
				return false, false, nil
			}
		}
		perm := os.FileMode(0o644)
		if sddl != "" {
			perm = 0o600
		}
		tmp := path + ".tmp"
		err := os.WriteFile(tmp, data, perm)
		if os.IsNotExist(err) { // the directory is made on the first write into it
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return false, false, err
			}
			err = os.WriteFile(tmp, data, perm)
		}
		if err != nil {
			return false, false, err
		}
		// The descriptor goes with the file, as NTFS keeps it, where the host's file system can
		// keep it; otherwise (whatever the reason) in the state.
		inFile := sddl != "" && setFileACL(tmp, sddl) == nil
		if err := os.Rename(tmp, path); err != nil {
			return false, false, err
		}
		before, had := st.ACLs[win]
		if sddl == "" || inFile {
			delete(st.ACLs, win)
			return true, had, nil
		}
		st.ACLs[win] = sddl
		return true, before != sddl, nil
	})
}

// errNoFileACLs says the host's file system keeps no security descriptor with a file.
var errNoFileACLs = errors.New("the file system keeps no extended attributes")

// acl is the security descriptor a file was written with: the one it keeps, or the state's.
func acl(st *State, path, win string) (string, error) {
	if sddl, ok := st.ACLs[win]; ok {
		return sddl, nil
	}
	sddl, err := fileACL(path)
	if errors.Is(err, errNoFileACLs) {
		return "", nil
	}
	return sddl, err
}

// ACL returns the security descriptor the file win was written with ("" for none).
func (m *Machine) ACL(win string) (string, error) {
	var sddl string
	err := m.do(Op{Backend: "files", Call: "ACL", Target: win}, false, func(st *State) (bool, error) {
		var err error
		sddl, err = acl(st, files{m}.Path(win), win)
		return false, err
	})
	return sddl, err
}

// Remove removes a file, and its security descriptor with it.
func (f files) Remove(win string) error {
	return f.m.do(Op{Backend: "files", Call: "Remove", Target: win}, true, func(st *State) (bool, error) {
		err := os.Remove(f.Path(win))
		_, had := st.ACLs[win]
		delete(st.ACLs, win)
		if os.IsNotExist(err) {
			return had, nil
		}
		return err == nil || had, err
	})
}

// RemoveAll removes a directory tree, and the security descriptors of its files.
func (f files) RemoveAll(win string) error {
	return f.m.do(Op{Backend: "files", Call: "RemoveAll", Target: win}, true, func(st *State) (bool, error) {
		path := f.Path(win)
		_, err := os.Lstat(path)
		if os.IsNotExist(err) {
			return false, nil
		}
		prefix := strings.TrimSuffix(win, `\`) + `\`
		for k := range st.ACLs {
			if strings.HasPrefix(strings.ToLower(k), strings.ToLower(prefix)) {
				delete(st.ACLs, k)
			}
		}
		return true, os.RemoveAll(path)
	})
}

// Symlink makes a symbolic link as NTFS does: the link names its target, and reading it reads
// the target. A target outside the link's directory is refused: the platform only links
// files side by side, and a relative target is what keeps the link valid under the root.
func (f files) Symlink(win, target string) error {
	return f.m.change(Op{Backend: "files", Call: "Symlink", Target: win, Body: target}, true, func(st *State) (bool, bool, error) {
		if strings.ContainsAny(target, `\/:`) {
			return false, false, fmt.Errorf("symlink %s: target %q is not a file name in the link's directory", win, target)
		}
		path := f.Path(win)
		if old, err := os.Readlink(path); err == nil && old == target {
			return false, false, nil
		}
		tmp := path + ".link"
		if err := os.Remove(tmp); err != nil && !os.IsNotExist(err) {
			return false, false, err
		}
		if err := os.Symlink(target, tmp); err != nil {
			return false, false, err
		}
		_, had := st.ACLs[win]
		delete(st.ACLs, win)
		return true, had, os.Rename(tmp, path)
	})
}
