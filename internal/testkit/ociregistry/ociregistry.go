// Package ociregistry serves a real OCI registry (go-containerregistry's registry package)
// on 127.0.0.1 for tests that pull images: multi-platform Windows images (a pause image, workload
// images with a windows/amd64 entry per os.version) and, to be refused, others.
package ociregistry

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/subtle"
	"fmt"
	"hash/fnv"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/kubewin/kubewin/internal/ociimage"
)

// Registry is a running registry.
type Registry struct {
	// Host is host:port.
	Host string
	// Sent counts the response bytes the registry wrote.
	Sent atomic.Int64
	// Login, when set, is the user name and password every request must carry.
	Login *authn.Basic
}

// Serve starts a registry open to anyone; it stops when the test ends.
func Serve(t testing.TB) *Registry {
	t.Helper()
	return serve(t, nil)
}

// ServeWithLogin starts a registry that answers only requests carrying the user name and
// password (HTTP basic authentication), as a registry with htpasswd authentication does; it stops
// when the test ends.
func ServeWithLogin(t testing.TB, user, password string) *Registry {
	t.Helper()
	return serve(t, &authn.Basic{Username: user, Password: password})
}

func serve(t testing.TB, login *authn.Basic) *Registry {
	r := &Registry{Login: login}
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		cw := &counter{ResponseWriter: w, n: &r.Sent}
		if !r.authorized(req) {
			unauthorized(cw)
			return
		}
		h.ServeHTTP(cw, req)
	}))
	t.Cleanup(srv.Close)
	r.Host = strings.TrimPrefix(srv.URL, "http://")
	return r
}

func (r *Registry) authorized(req *http.Request) bool {
	if r.Login == nil {
		return true
	}
	user, password, ok := req.BasicAuth()
	return ok && subtle.ConstantTimeCompare([]byte(user), []byte(r.Login.Username)) == 1 &&
		subtle.ConstantTimeCompare([]byte(password), []byte(r.Login.Password)) == 1
}

// unauthorized refuses a request as a registry refuses one without valid credentials: 401 with
// a WWW-Authenticate challenge, which a 401 must carry (RFC 9110 section 15.5.2) and from which
// clients learn how to authenticate (Docker Registry HTTP API V2, "API Version Check":
// https://distribution.github.io/distribution/spec/api/#api-version-check), and an UNAUTHORIZED
// error body (OCI distribution spec, error codes:
// https://github.com/opencontainers/distribution-spec/blob/main/spec.md#error-codes). The
// challenge is distribution's htpasswd one (registry/auth/htpasswd/access.go).
func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Basic realm="kubewin-test-registry"`)
	w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = io.WriteString(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required","detail":null}]}`)
}

// Options are the registry options of a client that logs in to this registry.
func (r *Registry) Options() ociimage.Options {
	return ociimage.Options{Keychain: ociimage.Logins{r.Host: r.login()}}
}

func (r *Registry) login() authn.Basic {
	if r.Login == nil {
		return authn.Basic{}
	}
	return *r.Login
}

type counter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c *counter) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	return c.ResponseWriter.Write(p)
}

// PushPause pushes repo:tag as an index with one windows/amd64 image per build (two random
// layers, os.version 10.0.<build>.1) and returns the reference and each build's digest.
func (r *Registry) PushPause(t testing.TB, repoTag string, builds ...uint32) (string, map[uint32]string) {
	t.Helper()
	img, err := random.Image(64<<10, 2)
	if err != nil {
		t.Fatal(err)
	}
	versions := make([]string, len(builds))
	for i, b := range builds {
		versions[i] = fmt.Sprintf("10.0.%d.1", b)
	}
	ref, byVersion := r.push(t, repoTag, img, versions)
	digests := map[uint32]string{}
	for i, b := range builds {
		digests[b] = byVersion[versions[i]]
	}
	return ref, digests
}

// PushWindowsImage pushes repo:tag as a multi-platform index with a windows/amd64 image per
// os.version ("10.0.20348.2849"), laid out as mcr.microsoft.com/windows/servercore's indexes are,
// and returns the reference and each os.version's image digest. Each image has two layers of
// layerSize bytes of content each, the same for the same repoTag and layerSize, which does not
// compress (so an image's size is about 2 × layerSize).
func (r *Registry) PushWindowsImage(t testing.TB, repoTag string, layerSize int, osVersions ...string) (string, map[string]string) {
	t.Helper()
	img := empty.Image
	for i := range 2 {
		l, err := layer(repoTag, i, layerSize)
		if err != nil {
			t.Fatal(err)
		}
		if img, err = mutate.AppendLayers(img, l); err != nil {
			t.Fatal(err)
		}
	}
	return r.push(t, repoTag, mutate.MediaType(mutate.ConfigMediaType(img, types.OCIConfigJSON), types.OCIManifestSchema1), osVersions)
}

// PushLinuxImage pushes repo:tag as an index with a linux/amd64 image only.
func (r *Registry) PushLinuxImage(t testing.TB, repoTag string) string {
	t.Helper()
	img, err := random.Image(4<<10, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref := r.Host + "/" + repoTag
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), mutate.IndexAddendum{Add: img,
		Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}})
	if err := remote.WriteIndex(tag, idx, remote.WithAuthFromKeychain(ociimage.Logins{r.Host: r.login()})); err != nil {
		t.Fatal(err)
	}
	return ref
}

func (r *Registry) push(t testing.TB, repoTag string, img v1.Image, osVersions []string) (string, map[string]string) {
	t.Helper()
	ref := r.Host + "/" + repoTag
	digests, err := ociimage.PushWindows(context.Background(), ref, img, osVersions, r.Options())
	if err != nil {
		t.Fatal(err)
	}
	return ref, digests
}

// layer is a layer holding one file of size bytes, generated from the seed and index.
func layer(seed string, i, size int) (v1.Layer, error) {
	h := fnv.New64a()
	_, _ = io.WriteString(h, seed)
	rng := rand.New(rand.NewPCG(h.Sum64(), uint64(i)))
	data := make([]byte, size)
	for j := range data {
		data[j] = byte(rng.Uint32())
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("Files/app/data%d.bin", i), Mode: 0o644, Size: int64(size),
		Typeflag: tar.TypeReg}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
}
