package windows

import (
	"strings"
	"unicode/utf16"
)

// escapeArg quotes one argument of a Windows command line so that CommandLineToArgvW (and the
// Go runtime on Windows) reads it back unchanged. It is the algorithm of
// golang.org/x/sys/windows.EscapeArg and syscall.EscapeArg, which mgr.CreateService uses to
// build a service's BinaryPathName, written here for every OS so that nodeboot compares and
// records the command lines it asks the Service Control Manager for.
func escapeArg(s string) string {
	if s == "" {
		return `""`
	}
	if !strings.ContainsAny(s, "\"\\ \t") {
		return s
	}
	hasSpace := strings.ContainsAny(s, " \t")
	var b strings.Builder
	if hasSpace {
		b.WriteByte('"')
	}
	slashes := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			slashes++
		case '"':
			for ; slashes > 0; slashes-- {
				b.WriteByte('\\')
			}
			b.WriteByte('\\')
		default:
			slashes = 0
		}
		b.WriteByte(s[i])
	}
	if hasSpace {
		for ; slashes > 0; slashes-- {
			b.WriteByte('\\')
		}
		b.WriteByte('"')
	}
	return b.String()
}

// CommandLine is the service command line of exe and args, as mgr.CreateService writes it.
func CommandLine(exe string, args []string) string {
	parts := make([]string, 0, 1+len(args))
	parts = append(parts, escapeArg(exe))
	for _, a := range args {
		parts = append(parts, escapeArg(a))
	}
	return strings.Join(parts, " ")
}

// SplitCommandLine splits a command line the way CommandLineToArgvW does for the arguments of
// a program (2n backslashes and a quote: n backslashes and a quote toggles quoting; 2n+1 and a
// quote: n backslashes and a literal quote; other backslashes are literal). It is the inverse of
// the quoting above, for reading a service's command line back.
func SplitCommandLine(line string) []string {
	var args []string
	var b strings.Builder
	inArg, quoted := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\\':
			n := 0
			for i < len(line) && line[i] == '\\' {
				n++
				i++
			}
			if i < len(line) && line[i] == '"' {
				b.WriteString(strings.Repeat(`\`, n/2))
				if n%2 == 1 {
					b.WriteByte('"')
				} else {
					quoted = !quoted
				}
			} else {
				b.WriteString(strings.Repeat(`\`, n))
				i--
			}
			inArg = true
		case c == '"':
			if quoted && i+1 < len(line) && line[i+1] == '"' {
				b.WriteByte('"') // "" inside quotes is a literal quote
				i++
			} else {
				quoted = !quoted
			}
			inArg = true
		case (c == ' ' || c == '\t') && !quoted:
			if inArg {
				args = append(args, b.String())
				b.Reset()
				inArg = false
			}
		default:
			b.WriteByte(c)
			inArg = true
		}
	}
	if inArg {
		args = append(args, b.String())
	}
	return args
}

// dependencyList is a service's dependencies as CreateService and ChangeServiceConfig take them:
// each name NUL-terminated, then a NUL; no names make the empty list, which removes a service's
// dependencies, where a NULL list leaves them unchanged (ChangeServiceConfigW, lpDependencies).
func dependencyList(deps []string) []uint16 {
	var b []uint16
	for _, d := range deps {
		b = append(b, utf16.Encode([]rune(d))...)
		b = append(b, 0)
	}
	if len(b) == 0 {
		b = append(b, 0)
	}
	return append(b, 0)
}
