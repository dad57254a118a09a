// Package tfregistry serves Terraform providers the way a provider registry does, for tests
// that install them with the real terraform and tofu CLIs: the provider registry protocol
// (service discovery, available versions, package metadata with signing keys) and the release
// files, over HTTPS on 127.0.0.1 with a throwaway CA, and throwaway GPG keys to sign releases.
//
// The protocol is the one documented by Terraform
// (https://developer.hashicorp.com/terraform/internals/provider-registry-protocol) and OpenTofu
// (https://opentofu.org/docs/internals/provider-registry-protocol/).
package tfregistry

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kubewin/kubewin/internal/testkit/loopbackca"
)

// Registry is a provider registry serving on 127.0.0.1.
type Registry struct {
	// Host is 127.0.0.1:<port>, the hostname part of the source address of the providers it
	// serves ("<Host>/<namespace>/<type>").
	Host string
	// CAFile is the PEM file of the CA that issued the server's certificate: give it to a CLI
	// as SSL_CERT_FILE.
	CAFile string

	mu        sync.Mutex
	providers map[string]map[string]*release // "namespace/type" → version → release
	requests  []string
}

// SigningKey is a GPG public key that the registry advertises for a provider's releases.
type SigningKey struct {
	// KeyID is the key's ID in upper-case hexadecimal (the last 16 digits of its fingerprint).
	KeyID string `json:"key_id"`
	// ASCIIArmor is the armored public key.
	ASCIIArmor string `json:"ascii_armor"`
}

// release is one version of a provider: goreleaser's output directory.
type release struct {
	dir       string
	prefix    string // terraform-provider-<type>_<version>_
	protocols []string
	shasums   map[string]string // "<os>_<arch>" → sha256 of the archive
	keys      []SigningKey
}

// Serve starts a registry with a certificate for 127.0.0.1 from a new CA; it stops when the
// test ends.
func Serve(t testing.TB) *Registry {
	t.Helper()
	dir := t.TempDir()
	// Terraform and OpenTofu reach registries over HTTPS only.
	ca, err := loopbackca.New("kubewin registrytest CA")
	if err != nil {
		t.Fatal(err)
	}
	r := &Registry{CAFile: filepath.Join(dir, "ca.pem"), providers: map[string]map[string]*release{}}
	if err := os.WriteFile(r.CAFile, ca.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(r.handler())
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Serving}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	r.Host = strings.TrimPrefix(srv.URL, "https://")
	return r
}

// Source is the source address of a provider the registry serves.
func (r *Registry) Source(namespace, typ string) string {
	return r.Host + "/" + namespace + "/" + typ
}

// Publish serves the provider release that goreleaser wrote to dir as namespace/typ, with
// keys as its signing keys. dir holds the files a registry takes in, named as the Terraform
// Registry requires: terraform-provider-<type>_<version>_<os>_<arch>.zip archives, the
// terraform-provider-<type>_<version>_SHA256SUMS file listing them, its detached GPG signature
// (…_SHA256SUMS.sig) and the registry manifest (…_manifest.json) naming the plugin protocol
// versions. The files are read when a client asks for them.
func (r *Registry) Publish(namespace, typ, dir string, keys ...SigningKey) error {
	sums, err := filepath.Glob(filepath.Join(dir, "terraform-provider-"+typ+"_*_SHA256SUMS"))
	if err != nil {
		return err
	}
	if len(sums) != 1 {
		return fmt.Errorf("%s: want one terraform-provider-%s_<version>_SHA256SUMS file, found %d", dir, typ, len(sums))
	}
	prefix := strings.TrimSuffix(filepath.Base(sums[0]), "SHA256SUMS")
	version := strings.TrimSuffix(strings.TrimPrefix(prefix, "terraform-provider-"+typ+"_"), "_")
	rel := &release{dir: dir, prefix: prefix, shasums: map[string]string{}, keys: keys}
	if _, err := os.Stat(sums[0] + ".sig"); err != nil {
		return fmt.Errorf("the release has no signature of its checksums: %w", err)
	}
	if rel.protocols, err = manifestProtocols(filepath.Join(dir, prefix+"manifest.json")); err != nil {
		return err
	}
	data, err := os.ReadFile(sums[0])
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 || !strings.HasPrefix(f[1], prefix) || !strings.HasSuffix(f[1], ".zip") {
			continue
		}
		rel.shasums[strings.TrimSuffix(strings.TrimPrefix(f[1], prefix), ".zip")] = f[0]
	}
	if len(rel.shasums) == 0 {
		return fmt.Errorf("%s lists no %s<os>_<arch>.zip archive", sums[0], prefix)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	key := namespace + "/" + typ
	if r.providers[key] == nil {
		r.providers[key] = map[string]*release{}
	}
	r.providers[key][version] = rel
	return nil
}

// manifestProtocols reads the plugin protocol versions from a release's registry manifest
// (terraform-registry-manifest.json), as the Terraform Registry does.
func manifestProtocols(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("the release has no registry manifest: %w", err)
	}
	var m struct {
		Version  int `json:"version"`
		Metadata struct {
			ProtocolVersions []string `json:"protocol_versions"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("registry manifest %s: %w", path, err)
	}
	if m.Version != 1 || len(m.Metadata.ProtocolVersions) == 0 {
		return nil, fmt.Errorf("registry manifest %s: want version 1 and metadata.protocol_versions, got %s", path, data)
	}
	return m.Metadata.ProtocolVersions, nil
}

// Requests lists the paths that clients asked for, in order.
func (r *Registry) Requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.requests)
}

func (r *Registry) lookup(req *http.Request) (map[string]*release, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.providers[req.PathValue("namespace")+"/"+req.PathValue("type")], req.PathValue("version")
}

func (r *Registry) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/terraform.json", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]string{"providers.v1": "/v1/providers/"})
	})
	mux.HandleFunc("GET /v1/providers/{namespace}/{type}/versions", func(w http.ResponseWriter, req *http.Request) {
		versions, _ := r.lookup(req)
		if versions == nil {
			http.NotFound(w, req)
			return
		}
		type platform struct {
			OS   string `json:"os"`
			Arch string `json:"arch"`
		}
		type version struct {
			Version   string     `json:"version"`
			Protocols []string   `json:"protocols"`
			Platforms []platform `json:"platforms"`
		}
		var list []version
		for _, v := range slices.Sorted(maps.Keys(versions)) {
			rel := versions[v]
			e := version{Version: v, Protocols: rel.protocols}
			for _, p := range slices.Sorted(maps.Keys(rel.shasums)) {
				goos, goarch, _ := strings.Cut(p, "_")
				e.Platforms = append(e.Platforms, platform{goos, goarch})
			}
			list = append(list, e)
		}
		writeJSON(w, map[string]any{"versions": list})
	})
	mux.HandleFunc("GET /v1/providers/{namespace}/{type}/{version}/download/{os}/{arch}", func(w http.ResponseWriter, req *http.Request) {
		versions, v := r.lookup(req)
		rel := versions[v]
		platform := req.PathValue("os") + "_" + req.PathValue("arch")
		if rel == nil || rel.shasums[platform] == "" {
			http.NotFound(w, req)
			return
		}
		files := "https://" + r.Host + "/files/" + req.PathValue("namespace") + "/" + req.PathValue("type") + "/" + v + "/"
		keys := rel.keys
		if keys == nil {
			keys = []SigningKey{}
		}
		writeJSON(w, map[string]any{
			"protocols":             rel.protocols,
			"os":                    req.PathValue("os"),
			"arch":                  req.PathValue("arch"),
			"filename":              rel.prefix + platform + ".zip",
			"download_url":          files + rel.prefix + platform + ".zip",
			"shasums_url":           files + rel.prefix + "SHA256SUMS",
			"shasums_signature_url": files + rel.prefix + "SHA256SUMS.sig",
			"shasum":                rel.shasums[platform],
			"signing_keys":          map[string]any{"gpg_public_keys": keys},
		})
	})
	mux.HandleFunc("GET /files/{namespace}/{type}/{version}/{file}", func(w http.ResponseWriter, req *http.Request) {
		versions, v := r.lookup(req)
		rel, name := versions[v], req.PathValue("file")
		if rel == nil || !strings.HasPrefix(name, rel.prefix) {
			http.NotFound(w, req)
			return
		}
		http.ServeFile(w, req, filepath.Join(rel.dir, filepath.Base(name)))
	})
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.requests = append(r.requests, req.URL.Path)
		r.mu.Unlock()
		mux.ServeHTTP(w, req)
	})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
