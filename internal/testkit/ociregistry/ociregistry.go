// Package ociregistry serves a real OCI registry (go-containerregistry's registry package)
// on 127.0.0.1 holding a multi-platform Windows pause image, for tests that pull one.
package ociregistry

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"

	"github.com/kubewin/kubewin/internal/ociimage"
)

// Registry is a running registry.
type Registry struct {
	// Host is host:port.
	Host string
	// Sent counts the response bytes the registry wrote.
	Sent atomic.Int64
}

// Serve starts a registry; it stops when the test ends.
func Serve(t testing.TB) *Registry {
	t.Helper()
	r := &Registry{}
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		h.ServeHTTP(&counter{ResponseWriter: w, n: &r.Sent}, req)
	}))
	t.Cleanup(srv.Close)
	r.Host = strings.TrimPrefix(srv.URL, "http://")
	return r
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
	ref := r.Host + "/" + repoTag
	digests, err := ociimage.PushWindows(context.Background(), ref, img, builds, ociimage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return ref, digests
}
