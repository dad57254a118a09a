//go:build !cgo

package guest

import "testing"

// The scripts are checked with a C parser: without cgo that check cannot run.
func TestWindowsScriptsParse(t *testing.T) {
	t.Fatal("the PowerShell parser tests need cgo: run the tests with CGO_ENABLED=1 and a C compiler")
}
