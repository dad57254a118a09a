// Package registrytest serves a real OCI registry (go-containerregistry's registry package)
// on 127.0.0.1 holding a multi-platform Windows pause image, for tests that pull one.
package registrytest

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
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

// PushPause pushes repo:tag as an index with one windows/amd64 image per build (random
// layers, os.version 10.0.<build>.1) and returns the reference and each build's digest.
func (r *Registry) PushPause(t testing.TB, repoTag string, builds ...uint32) (string, map[uint32]string) {
	t.Helper()
	ref := r.Host + "/" + repoTag
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	digests := map[uint32]string{}
	for _, b := range builds {
		img, err := random.Image(64<<10, 2)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		cf = cf.DeepCopy()
		cf.OS, cf.Architecture, cf.OSVersion = "windows", "amd64", fmt.Sprintf("10.0.%d.1", b)
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		digests[b] = d.String()
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: "windows", Architecture: "amd64", OSVersion: cf.OSVersion},
		}})
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(tag, idx); err != nil {
		t.Fatal(err)
	}
	return ref, digests
}
