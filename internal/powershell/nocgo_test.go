//go:build !cgo

package powershell

import "testing"

// The scripts are checked with a C parser: without cgo that check cannot run, and a test run
// that skipped it silently would claim more than it proved.
func TestQuoteParses(t *testing.T) {
	t.Fatal("the PowerShell parser tests need cgo: run the tests with CGO_ENABLED=1 and a C compiler")
}
