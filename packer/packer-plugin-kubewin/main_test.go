package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// The plugin protocol version in the release configuration must be the one the SDK speaks.
func TestDescribeMatchesReleaseConfig(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "packer-plugin-kubewin")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "describe").Output()
	if err != nil {
		t.Fatalf("describe: %v", err)
	}
	var desc struct {
		APIVersion string `json:"api_version"`
	}
	if err := json.Unmarshal(out, &desc); err != nil {
		t.Fatalf("describe printed %q: %v", out, err)
	}
	conf, err := os.ReadFile(".goreleaser.yml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`API_VERSION=(\S+)`).FindSubmatch(conf)
	if m == nil {
		t.Fatal(".goreleaser.yml sets no API_VERSION")
	}
	if string(m[1]) != desc.APIVersion {
		t.Errorf(".goreleaser.yml has API_VERSION=%s but the plugin speaks %s", m[1], desc.APIVersion)
	}
}
