package windows

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/windows"
)

// ntfs writes files on the machine's own file system.
type ntfs struct{}

func (ntfs) Path(win string) string { return win }

func (ntfs) Remove(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

func (ntfs) RemoveAll(path string) error { return os.RemoveAll(path) }

// Write writes a new temporary file next to the target, created with the security descriptor
// when one is given (CreateFile with SECURITY_ATTRIBUTES, CREATE_NEW: the file never has its
// inherited permissions, not even for a moment; CreateFile ignores the descriptor when it opens
// an existing file, so a temporary file left over is removed first), then moves it over the
// target; a move within a volume keeps the file's security descriptor.
func (ntfs) Write(path string, data []byte, sddl string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	var sa *windows.SecurityAttributes
	if sddl != "" {
		sd, err := windows.SecurityDescriptorFromString(sddl)
		if err != nil {
			return fmt.Errorf("security descriptor %q: %w", sddl, err)
		}
		sa = &windows.SecurityAttributes{Length: uint32(unsafe.Sizeof(windows.SecurityAttributes{})), SecurityDescriptor: sd}
	}
	name, err := windows.UTF16PtrFromString(tmp)
	if err != nil {
		return err
	}
	h, err := windows.CreateFile(name, windows.GENERIC_WRITE, 0, sa, windows.CREATE_NEW, windows.FILE_ATTRIBUTE_NORMAL, 0)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	f := os.NewFile(uintptr(h), tmp)
	_, werr := f.Write(data)
	if err := f.Close(); werr == nil {
		werr = err
	}
	if werr != nil {
		_ = os.Remove(tmp) // best effort: the failure above is the error to report
		return werr
	}
	from, _ := windows.UTF16PtrFromString(tmp)
	to, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return err
	}
	if err := windows.MoveFileEx(from, to, windows.MOVEFILE_REPLACE_EXISTING|windows.MOVEFILE_WRITE_THROUGH); err != nil {
		_ = os.Remove(tmp) // best effort: the failure above is the error to report
		return fmt.Errorf("replace %s: %w", path, err)
	}
	return nil
}

// Symlink creates the link under a temporary name and moves it over win, so win is always
// either the old file or the new link. CreateSymbolicLink needs SeCreateSymbolicLinkPrivilege,
// which LocalSystem, the account nodeboot runs as, holds ("Create symbolic links" security
// policy setting, learn.microsoft.com/windows/security/threat-protection/security-policy-settings/create-symbolic-links).
func (ntfs) Symlink(path, target string) error {
	tmp := path + ".link"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.Symlink(target, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp) // best effort: the failure above is the error to report
		return fmt.Errorf("replace %s: %w", path, err)
	}
	return nil
}
