// Package ociimage resolves and exports the pause image of a Windows node: it finds the
// manifest of a (multi-platform) image for windows/amd64 on a given Windows build, and writes
// that image as an OCI archive (a tar of an OCI image layout) that containerd and Docker
// import, so that a node never pulls its sandbox image.
package ociimage

import (
	"archive/tar"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Options of registry access.
type Options struct {
	// Transport replaces the default HTTP transport (tests count bytes with it).
	Transport http.RoundTripper
}

func (o Options) remote(ctx context.Context) []remote.Option {
	// Credentials come from the Docker config (docker login), as for any registry client.
	opts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	if o.Transport != nil {
		opts = append(opts, remote.WithTransport(o.Transport))
	}
	return opts
}

// Resolve returns the digest of ref's image for windows/amd64 whose os.version is on build
// ("10.0.20348.*"). ref may name an image index or a single image.
func Resolve(ctx context.Context, ref string, build uint32, o Options) (string, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return "", fmt.Errorf("image reference %q: %w", ref, err)
	}
	desc, err := remote.Get(r, o.remote(ctx)...)
	if err != nil {
		return "", fmt.Errorf("look up %s: %w", ref, err)
	}
	prefix := fmt.Sprintf("10.0.%d.", build)
	matches := func(p *v1.Platform) bool {
		return p != nil && p.OS == "windows" && p.Architecture == "amd64" && (p.OSVersion == prefix[:len(prefix)-1] || strings.HasPrefix(p.OSVersion,
			prefix))
	}
	if desc.MediaType.IsIndex() {
		idx, err := desc.ImageIndex()
		if err != nil {
			return "", err
		}
		im, err := idx.IndexManifest()
		if err != nil {
			return "", err
		}
		var seen []string
		for _, m := range im.Manifests {
			if matches(m.Platform) {
				return m.Digest.String(), nil
			}
			if m.Platform != nil {
				seen = append(seen, m.Platform.OS+"/"+m.Platform.Architecture+" "+m.Platform.OSVersion)
			}
		}
		return "", fmt.Errorf("%s has no windows/amd64 image for Windows build %d (os.version %s*): it has %s; use a pause image that supports this build "+
			"(registry.k8s.io/pause 3.10.2 or later covers 17763, 20348 and 26100)",
			ref, build, prefix, strings.Join(seen, ", "))
	}
	img, err := desc.Image()
	if err != nil {
		return "", err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return "", err
	}
	if p := cf.Platform(); !matches(p) {
		return "", fmt.Errorf("%s is an image for %s/%s %s, not windows/amd64 on Windows build %d", ref, cf.OS, cf.Architecture, cf.OSVersion, build)
	}
	return desc.Digest.String(), nil
}

// Pinned returns ref pinned to digest ("registry.k8s.io/pause@sha256:…").
func Pinned(ref, digest string) (string, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return "", fmt.Errorf("image reference %q: %w", ref, err)
	}
	return r.Context().Name() + "@" + digest, nil
}

// WriteArchive fetches ref's image with the given digest and writes it to w as an OCI archive
// in which the image is named ref. The archive is byte-for-byte the same for the same image.
func WriteArchive(ctx context.Context, w io.Writer, ref, digest string, o Options) error {
	pinned, err := Pinned(ref, digest)
	if err != nil {
		return err
	}
	d, err := name.NewDigest(pinned)
	if err != nil {
		return err
	}
	img, err := remote.Image(d, o.remote(ctx)...)
	if err != nil {
		return fmt.Errorf("fetch %s: %w", pinned, err)
	}
	manifest, err := img.RawManifest()
	if err != nil {
		return err
	}
	config, err := img.RawConfigFile()
	if err != nil {
		return err
	}
	mt, err := img.MediaType()
	if err != nil {
		return err
	}
	h, err := v1.NewHash(digest)
	if err != nil {
		return err
	}
	tag, repoTags := "", []string(nil)
	if t, err := name.NewTag(ref); err == nil {
		tag, repoTags = t.TagStr(), []string{t.Name()}
	}
	index, err := json.Marshal(v1.IndexManifest{
		SchemaVersion: 2, MediaType: types.OCIImageIndex,
		Manifests: []v1.Descriptor{{
			MediaType: mt, Size: int64(len(manifest)), Digest: h,
			Annotations: map[string]string{"io.containerd.image.name": ref, "org.opencontainers.image.ref.name": tag},
		}},
	})
	if err != nil {
		return err
	}
	cfgName, err := img.ConfigName()
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	put := func(path string, size int64, r io.Reader) error {
		if err := tw.WriteHeader(&tar.Header{Name: path, Mode: 0o644, Size: size, ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg,
			Format: tar.FormatPAX}); err != nil {
			return err
		}
		n, err := io.Copy(tw, r)
		if err == nil && n != size {
			err = fmt.Errorf("%s: got %d bytes, want %d", path, n, size)
		}
		return err
	}
	layout := []byte(`{"imageLayoutVersion":"1.0.0"}`)
	if err := put("oci-layout", int64(len(layout)), strings.NewReader(string(layout))); err != nil {
		return err
	}
	if err := put("index.json", int64(len(index)), strings.NewReader(string(index))); err != nil {
		return err
	}
	if err := put(blob(digest), int64(len(manifest)), strings.NewReader(string(manifest))); err != nil {
		return err
	}
	if err := put(blob(cfgName.String()), int64(len(config)), strings.NewReader(string(config))); err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	saved, err := dockerManifest(repoTags, cfgName, layers)
	if err != nil {
		return err
	}
	if err := put(DockerManifestFile, int64(len(saved)), strings.NewReader(string(saved))); err != nil {
		return err
	}
	for _, l := range layers {
		dg, err := l.Digest()
		if err != nil {
			return err
		}
		size, err := l.Size()
		if err != nil {
			return err
		}
		rc, err := l.Compressed()
		if err != nil {
			return fmt.Errorf("fetch layer %s: %w", dg, err)
		}
		err = put(blob(dg.String()), size, rc)
		_ = rc.Close()
		if err != nil {
			return fmt.Errorf("layer %s: %w", dg, err)
		}
	}
	return tw.Close()
}

// DockerManifestFile is the index of a `docker save` archive. Docker Engine's own image store
// loads an archive through it and nothing else: without it, `docker load` falls back to the
// pre-1.10 layout of one directory per layer (moby image/tarexport/load.go, Load and
// legacyLoad), so a bare OCI layout does not load. containerd reads index.json. An archive
// with both loads into either, as `docker save` writes them since Docker Engine 25.
const DockerManifestFile = "manifest.json"

// DockerManifestItem is one image of a `docker save` archive's manifest.json (moby
// image/tarexport/tarexport.go, manifestItem).
type DockerManifestItem struct {
	Config   string
	RepoTags []string `json:",omitempty"`
	Layers   []string
}

// dockerManifest is the manifest.json naming the archive's config and layer blobs, and the
// image's tags. Docker decompresses each layer file as it loads it.
func dockerManifest(repoTags []string, cfg v1.Hash, layers []v1.Layer) ([]byte, error) {
	item := DockerManifestItem{Config: blob(cfg.String()), RepoTags: repoTags}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return nil, err
		}
		item.Layers = append(item.Layers, blob(d.String()))
	}
	return json.Marshal([]DockerManifestItem{item})
}

func blob(digest string) string {
	return "blobs/" + strings.Replace(digest, ":", "/", 1)
}

// Archived is what an OCI archive holds: the image's name and platform.
type Archived struct {
	Name      string
	OS        string
	OSVersion string
	Layers    int
	// Docker is the archive's manifest.json, nil when it has none (see DockerManifestFile).
	Docker []DockerManifestItem
}

// Inspect reads an OCI archive written by WriteArchive (or any single-image OCI archive) and
// checks that every blob it references is present with the right digest.
func Inspect(r io.Reader) (Archived, error) {
	var a Archived
	files := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return a, fmt.Errorf("read the archive: %w", err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return a, err
		}
		files[strings.TrimPrefix(h.Name, "./")] = b
	}
	var idx v1.IndexManifest
	if err := json.Unmarshal(files["index.json"], &idx); err != nil {
		return a, fmt.Errorf("not an OCI archive: index.json: %w", err)
	}
	if len(idx.Manifests) != 1 {
		return a, fmt.Errorf("the archive holds %d images, want 1", len(idx.Manifests))
	}
	get := func(d v1.Hash) ([]byte, error) {
		b, ok := files[blob(d.String())]
		if !ok {
			return nil, fmt.Errorf("blob %s is missing from the archive", d)
		}
		if got, _, _ := v1.SHA256(strings.NewReader(string(b))); got != d {
			return nil, fmt.Errorf("blob %s has digest %s", d, got)
		}
		return b, nil
	}
	desc := idx.Manifests[0]
	a.Name = desc.Annotations["io.containerd.image.name"]
	raw, err := get(desc.Digest)
	if err != nil {
		return a, err
	}
	m, err := v1.ParseManifest(strings.NewReader(string(raw)))
	if err != nil {
		return a, err
	}
	raw, err = get(m.Config.Digest)
	if err != nil {
		return a, err
	}
	cf, err := v1.ParseConfigFile(strings.NewReader(string(raw)))
	if err != nil {
		return a, err
	}
	for _, l := range m.Layers {
		if _, err := get(l.Digest); err != nil {
			return a, err
		}
	}
	a.OS, a.OSVersion, a.Layers = cf.OS, cf.OSVersion, len(m.Layers)
	if raw, ok := files[DockerManifestFile]; ok {
		if err := json.Unmarshal(raw, &a.Docker); err != nil {
			return a, fmt.Errorf("%s: %w", DockerManifestFile, err)
		}
		for _, item := range a.Docker {
			for _, f := range append([]string{item.Config}, item.Layers...) {
				if _, ok := files[f]; !ok {
					return a, fmt.Errorf("%s names %s, which is missing from the archive", DockerManifestFile, f)
				}
			}
		}
	}
	return a, nil
}

// PushWindows pushes ref as an index holding base once per Windows build, as a windows/amd64
// image whose os.version is 10.0.<build>.1 (how Windows base images are published), and
// returns each build's image digest.
func PushWindows(ctx context.Context, ref string, base v1.Image, builds []uint32, o Options) (map[uint32]string, error) {
	tag, err := name.NewTag(ref)
	if err != nil {
		return nil, fmt.Errorf("image reference %q: %w", ref, err)
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	digests := map[uint32]string{}
	for _, b := range builds {
		cf, err := base.ConfigFile()
		if err != nil {
			return nil, err
		}
		cf = cf.DeepCopy()
		cf.OS, cf.Architecture, cf.OSVersion = "windows", "amd64", fmt.Sprintf("10.0.%d.1", b)
		img, err := mutate.ConfigFile(base, cf)
		if err != nil {
			return nil, err
		}
		d, err := img.Digest()
		if err != nil {
			return nil, err
		}
		digests[b] = d.String()
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: "windows", Architecture: "amd64", OSVersion: cf.OSVersion},
		}})
	}
	if err := remote.WriteIndex(tag, idx, o.remote(ctx)...); err != nil {
		return nil, fmt.Errorf("push %s: %w", ref, err)
	}
	return digests, nil
}
