// Package winname derives Windows computer names from a node pool's name prefix and checks pool
// names. Windows computer (NetBIOS) names hold at most 15 characters; kubewin names a node's
// computer the way Azure scale sets name Windows instances: a prefix of at most 9 characters
// followed by the instance index in 6 base-36 digits, lower-cased, so that the Node name and the
// computer name are the same on every backend.
package winname

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

const (
	// MaxComputerName is the length limit of a Windows computer name.
	MaxComputerName = 15
	// SuffixLen is the length of the index suffix.
	SuffixLen = 6
	// MaxPrefix is the longest node name prefix that leaves room for the suffix.
	MaxPrefix = MaxComputerName - SuffixLen
	// MaxPoolName is the longest pool name (a DNS label, used in labels and object names).
	MaxPoolName = 63
)

// MaxIndex is the largest index a 6-digit base-36 suffix can hold.
const MaxIndex = 36*36*36*36*36*36 - 1

var (
	prefixRE = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
	poolRE   = regexp.MustCompile(`^[a-z]([a-z0-9-]*[a-z0-9])?$`)
)

// ValidatePoolName checks a pool name: a lower-case DNS label starting with a letter.
func ValidatePoolName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("pool name must not be empty")
	case len(name) > MaxPoolName:
		return fmt.Errorf("pool name %q is %d characters long: use at most %d", name, len(name), MaxPoolName)
	case !poolRE.MatchString(name):
		return fmt.Errorf("pool name %q must be lower-case letters, digits and '-', start with a letter and end with a letter or digit", name)
	}
	return nil
}

// ValidatePrefix checks a node name prefix: it must leave room for the index so that every
// computer name stays within 15 characters.
func ValidatePrefix(prefix string) error {
	switch {
	case prefix == "":
		return fmt.Errorf("node name prefix must not be empty")
	case len(prefix) > MaxPrefix:
		return fmt.Errorf("node name prefix %q makes Windows computer names of %d characters (prefix + %d-character index), over the limit of %d: use a "+
			"prefix of at most %d characters, e.g. %q",
			prefix, len(prefix)+SuffixLen, SuffixLen, MaxComputerName, MaxPrefix, Shorten(prefix))
	case !prefixRE.MatchString(prefix):
		return fmt.Errorf("node name prefix %q must be lower-case letters, digits and '-', starting with a letter", prefix)
	}
	return nil
}

// ComputerName returns the computer (and Node) name of instance index of a pool.
func ComputerName(prefix string, index int) (string, error) {
	if err := ValidatePrefix(prefix); err != nil {
		return "", err
	}
	suffix, err := Suffix(index)
	if err != nil {
		return "", err
	}
	return prefix + suffix, nil
}

// Suffix returns the part of a computer name that encodes instance index: the index in
// SuffixLen lower-case base-36 digits, as Azure scale sets suffix Windows computer names.
func Suffix(index int) (string, error) {
	if index < 0 || index > MaxIndex {
		return "", fmt.Errorf("instance index %d is out of range 0..%d", index, MaxIndex)
	}
	s := strconv.FormatInt(int64(index), 36)
	return strings.Repeat("0", SuffixLen-len(s)) + s, nil
}

// Index returns the instance index encoded in a computer name made by ComputerName with prefix.
func Index(prefix, name string) (int, bool) {
	if len(name) != len(prefix)+SuffixLen || !strings.HasPrefix(name, prefix) {
		return 0, false
	}
	v, err := strconv.ParseInt(name[len(prefix):], 36, 64)
	if err != nil || v < 0 {
		return 0, false
	}
	return int(v), true
}

// Shorten suggests a valid prefix for a name that is too long: its first MaxPrefix characters,
// without a trailing '-'.
func Shorten(name string) string {
	if len(name) > MaxPrefix {
		name = name[:MaxPrefix]
	}
	return strings.TrimRight(name, "-")
}
