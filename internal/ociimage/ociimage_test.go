package ociimage_test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/ociimage"
	"github.com/kubewin/kubewin/internal/testkit/ociregistry"
)

func TestResolveAndArchive(t *testing.T) {
	reg := ociregistry.Serve(t)
	ref, digests := reg.PushPause(t, "pause:3.10.2", 17763, 20348, 26100)
	ctx := context.Background()
	for build, want := range digests {
		got, err := ociimage.Resolve(ctx, ref, v1alpha1.WindowsBuild(build), false, ociimage.Options{})
		if err != nil || got.Digest != want {
			t.Errorf("ociimage.Resolve(%d) = %+v, %v; want %s", build, got, err, want)
		}
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

// Workload images are resolved as a node's runtime would run them: the windows/amd64 entry of the
// host's build under process isolation, a down-level one under Hyper-V isolation, and every
// other image refused with what to do.
func TestResolveWindowsImage(t *testing.T) {
	reg := ociregistry.Serve(t)
	const layer = 256 << 10
	app, digests := reg.PushWindowsImage(t, "app:1", layer, "10.0.17763.6532", "10.0.20348.2849", "10.0.26100.2314")
	old, oldDigests := reg.PushWindowsImage(t, "old:1", layer, "10.0.17763.6532", "10.0.20348.2849")
	linux := reg.PushLinuxImage(t, "linux:1")
	unsupported, _ := reg.PushWindowsImage(t, "win10:1", layer, "10.0.19041.1")
	ctx := context.Background()
	for build, osv := range map[v1alpha1.WindowsBuild]string{17763: "10.0.17763.6532", 20348: "10.0.20348.2849", 26100: "10.0.26100.2314"} {
		got, err := ociimage.Resolve(ctx, app, build, false, reg.Options())
		if err != nil || got.Digest != digests[osv] || got.OSVersion != osv || got.Size < 2*layer || got.Size > 2*layer+16<<10 {
			t.Errorf("Resolve(%s, %d) = %+v, %v; want %s (%s) of about %d bytes", app, build, got, err, digests[osv], osv, 2*layer)
		}
		// By digest, the image itself.
		pinned, err := ociimage.Pinned(app, digests[osv])
		if err != nil {
			t.Fatal(err)
		}
		if got2, err := ociimage.Resolve(ctx, pinned, build, false, reg.Options()); err != nil || got2 != got {
			t.Errorf("Resolve(%s, %d) = %+v, %v; want %+v", pinned, build, got2, err, got)
		}
	}
	// Hyper-V isolation on a 2025 host runs the newest older build.
	if got, err := ociimage.Resolve(ctx, old, 26100, true, reg.Options()); err != nil || got.Digest != oldDigests["10.0.20348.2849"] {
		t.Errorf("down-level image under Hyper-V isolation: %+v, %v", got, err)
	}
	pinned2019, err := ociimage.Pinned(old, oldDigests["10.0.17763.6532"])
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ref  string
		host v1alpha1.WindowsBuild
		want string
	}{
		{old, 26100, old + " has no windows/amd64 image for Windows build 26100: os.version 10.0.17763.6532: the image is for Windows build " +
			"17763 (os.version 10.0.17763.6532), the host runs build 26100 (Windows Server 2025): a process-isolated container must match " +
			"the host's build (HCS_E_IMAGE_MISMATCH)"},
		{pinned2019, 20348, pinned2019 + ": the image is for Windows build 17763"},
		{linux, 20348, linux + " has no windows/amd64 image: it has linux/amd64; use a Windows image"},
		{unsupported, 20348, unsupported + " has one windows/amd64 image, and it does not run on Windows build 20348: os.version 10.0.19041.1: " +
			"os.version 10.0.19041.1 is Windows build 19041, which kubewin nodes do not run"},
		{reg.Host + "/missing:1", 20348, reg.Host + "/missing:1 does not exist in " + reg.Host + ": check the repository and the tag or digest"},
	} {
		if _, err := ociimage.Resolve(ctx, tc.ref, tc.host, false, reg.Options()); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Resolve(%s, %d): %v\nwant an error with %q", tc.ref, tc.host, err, tc.want)
		}
	}
}

// A registry that requires a login refuses an image to a client without one or with a wrong
// one, and the error says which registry refused and what to check.
func TestResolveWithLogin(t *testing.T) {
	reg := ociregistry.ServeWithLogin(t, "builder", "s3cret")
	app, digests := reg.PushWindowsImage(t, "private/app:1", 64<<10, "10.0.20348.2849")
	ctx := context.Background()
	if got, err := ociimage.Resolve(ctx, app, 20348, false, reg.Options()); err != nil || got.Digest != digests["10.0.20348.2849"] {
		t.Fatalf("with the login: %+v, %v", got, err)
	}
	wrong := ociimage.Options{Keychain: ociimage.Logins{reg.Host: {Username: "builder", Password: "wrong"}}}
	for name, o := range map[string]ociimage.Options{"no login": {}, "wrong password": wrong} {
		_, err := ociimage.Resolve(ctx, app, 20348, false, o)
		if err == nil || !strings.Contains(err.Error(), reg.Host+" refused access to "+app+" with the credentials given") ||
			!strings.Contains(err.Error(), "check the credentials for "+reg.Host) || strings.Contains(err.Error(), "wrong") {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Without the login nothing is exported either.
	if err := ociimage.WriteArchive(ctx, io.Discard, app, digests["10.0.20348.2849"], wrong); err == nil {
		t.Error("an image was exported with a wrong password")
	}
}
