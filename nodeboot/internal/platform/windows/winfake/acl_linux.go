package winfake

import (
	"errors"

	"golang.org/x/sys/unix"
)

// aclAttr is the extended attribute a file's security descriptor is kept in. NTFS keeps the
// descriptor with the file, so a file replaced by a rename carries its own: set on the
// temporary file before the rename, the attribute does too.
const aclAttr = "user.kubewin.sddl"

// setFileACL keeps sddl with the file at path. It fails on a file system without user
// attributes (tmpfs before Linux 6.6, some network and FUSE file systems).
func setFileACL(path, sddl string) error { return unix.Setxattr(path, aclAttr, []byte(sddl), 0) }

func fileACL(path string) (string, error) {
	n, err := unix.Getxattr(path, aclAttr, nil)
	switch {
	case errors.Is(err, unix.ENODATA):
		return "", nil
	case errors.Is(err, unix.EOPNOTSUPP):
		return "", errNoFileACLs
	case err != nil:
		return "", err
	}
	buf := make([]byte, n)
	n, err = unix.Getxattr(path, aclAttr, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}
