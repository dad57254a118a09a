// Package guesttest helps tests read the commands sent to a guest.
package guesttest

import (
	"encoding/base64"
	"regexp"
	"unicode/utf16"
)

var encoded = regexp.MustCompile(`-EncodedCommand ([A-Za-z0-9+/=]+)`)

// Decode returns the PowerShell script of an encoded command, or the command as it is.
func Decode(command string) string {
	m := encoded.FindStringSubmatch(command)
	if m == nil {
		return command
	}
	b, err := base64.StdEncoding.DecodeString(m[1])
	if err != nil || len(b)%2 != 0 {
		return command
	}
	u := make([]uint16, len(b)/2)
	for i := range u {
		u[i] = uint16(b[2*i]) | uint16(b[2*i+1])<<8
	}
	return string(utf16.Decode(u))
}
