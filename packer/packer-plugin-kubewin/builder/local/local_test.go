package local

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"
)

func TestPrepareReportsEveryError(t *testing.T) {
	t.Setenv("KUBEWIN_BIN_PATH", "")
	t.Setenv("PATH", t.TempDir())
	var b Builder
	_, _, err := b.Prepare(map[string]any{"windows_version": "2016"})
	for _, want := range []string{`windows_version "2016" is not supported`, "nodeboot_path is not set and no nodeboot is in KUBEWIN_BIN_PATH or PATH"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
	_, _, err = new(Builder).Prepare(map[string]any{"nodeboot_path": t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "is not an executable file") {
		t.Errorf("a directory as nodeboot_path: %v", err)
	}

	dir := t.TempDir()
	exe := filepath.Join(dir, "nodeboot")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBEWIN_BIN_PATH", dir)
	b = Builder{}
	vars, _, err := b.Prepare(map[string]any{"packer_build_name": "ws"})
	if err != nil || b.config.NodebootPath != exe || b.config.OutputDirectory != "output-ws" || b.config.build != 20348 || len(vars) != 3 {
		t.Errorf("defaults: %+v %v %v", b.config, vars, err)
	}
}

func TestCommunicator(t *testing.T) {
	dir := t.TempDir()
	c := &Communicator{Dir: dir}
	var out bytes.Buffer
	cmd := &packersdk.RemoteCmd{Command: "pwd; echo 'it''s' >&2; exit 3", Stdout: &out, Stderr: &out}
	if err := c.Start(context.Background(), cmd); err != nil {
		t.Fatal(err)
	}
	if status := cmd.Wait(); status != 3 || !strings.Contains(out.String(), dir) || !strings.Contains(out.String(), "its") {
		t.Errorf("status %d, output %q", status, out.String())
	}
	if err := c.Upload("sub dir/file.txt", strings.NewReader("hello"), nil); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := c.Download(filepath.Join(dir, "sub dir", "file.txt"), &got); err != nil || got.String() != "hello" {
		t.Errorf("download: %q %v", got.String(), err)
	}
	dst := t.TempDir()
	if err := c.DownloadDir("sub dir/", dst, nil); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "file.txt")); err != nil || string(b) != "hello" {
		t.Errorf("download dir: %q %v", b, err)
	}
	if err := c.UploadDir("copy", filepath.Join(dir, "sub dir"), nil); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "copy", "sub dir", "file.txt")); err != nil || string(b) != "hello" {
		t.Errorf("upload dir without a trailing slash copies the directory itself: %q %v", b, err)
	}
}
