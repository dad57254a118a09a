package main

import (
	"debug/pe"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// nodeboot runs on Windows Server: its windows/amd64 build must succeed and be a PE32+ executable.
func TestWindowsBuild(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "nodeboot.exe")
	cmd := exec.Command("go", "build", "-o", exe, ".")
	cmd.Env = append(os.Environ(), "GOOS=windows", "GOARCH=amd64", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("windows build: %v\n%s", err, out)
	}
	f, err := pe.Open(exe)
	if err != nil {
		t.Fatalf("not a PE file: %v", err)
	}
	defer func() { _ = f.Close() }()
	if _, ok := f.OptionalHeader.(*pe.OptionalHeader64); !ok {
		t.Errorf("optional header is %T, not PE32+", f.OptionalHeader)
	}
	if f.Machine != pe.IMAGE_FILE_MACHINE_AMD64 {
		t.Errorf("machine is %#x, not amd64", f.Machine)
	}

	// The simulated machine, its simulated Windows and its simulated kubelet are for the local
	// backend's host only: nodeboot.exe does not contain them, so a Windows node never runs a
	// simulated kubelet.
	out, err := exec.Command("go", "tool", "nm", exe).Output()
	if err != nil {
		t.Fatalf("go tool nm: %v", err)
	}
	syms := string(out)
	if !strings.Contains(syms, "nodeboot/internal/join.") {
		t.Fatal("go tool nm lists no symbol of the join package: the check below would prove nothing")
	}
	for _, pkg := range []string{"kubewin/internal/simkubelet.", "nodeboot/internal/platform/sim.", "nodeboot/internal/platform/windows/winfake."} {
		if n := strings.Count(syms, pkg); n != 0 {
			t.Errorf("nodeboot.exe has %d symbols of %s", n, strings.TrimSuffix(pkg, "."))
		}
	}
}
