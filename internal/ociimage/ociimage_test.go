package ociimage_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/kubewin/kubewin/internal/ociimage"
	"github.com/kubewin/kubewin/internal/testkit/ociregistry"
)

func TestResolveAndArchive(t *testing.T) {
	reg := ociregistry.Serve(t)
	ref, digests := reg.PushPause(t, "pause:3.10.2", 17763, 20348, 26100)
	ctx := context.Background()
	for build, want := range digests {
		got, err := ociimage.Resolve(ctx, ref, build, ociimage.Options{})
		if err != nil || got != want {
			t.Errorf("ociimage.Resolve(%d) = %s, %v; want %s", build, got, err, want)
		}
	}
	if _, err := ociimage.Resolve(ctx, ref, 14393, ociimage.Options{}); err == nil || !strings.Contains(err.Error(),
		"no windows/amd64 image for Windows build 14393") {
		t.Errorf("unsupported build: %v", err)
	}

	var a, b bytes.Buffer
	if err := ociimage.WriteArchive(ctx, &a, ref, digests[20348], ociimage.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := ociimage.WriteArchive(ctx, &b, ref, digests[20348], ociimage.Options{}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("two archives of one image differ")
	}
	got, err := ociimage.Inspect(bytes.NewReader(a.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != ref || got.OS != "windows" || got.OSVersion != "10.0.20348.1" || got.Layers != 2 {
		t.Errorf("archive holds %+v", got)
	}
	// Docker Engine loads it through manifest.json, as `docker save` writes it: the config and
	// every layer, and the image's name.
	if len(got.Docker) != 1 || len(got.Docker[0].Layers) != 2 || !strings.HasPrefix(got.Docker[0].Config, "blobs/sha256/") ||
		len(got.Docker[0].RepoTags) != 1 || got.Docker[0].RepoTags[0] != ref {
		t.Errorf("manifest.json: %+v", got.Docker)
	}

	// A corrupted blob is caught.
	bad := bytes.Replace(a.Bytes(), []byte(`"windows"`), []byte(`"linux!!"`), 1)
	if _, err := ociimage.Inspect(bytes.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "has digest") {
		t.Errorf("corrupted archive: %v", err)
	}
}
