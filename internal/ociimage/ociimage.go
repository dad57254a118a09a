// Package ociimage resolves and exports the images baked into a Windows node (the pause image
// and workload images): it finds the manifest of a (multi-platform) image for windows/amd64 that
// runs on a given Windows build, and writes that image as an OCI archive (a tar of an OCI image
// layout) that containerd and Docker import, so that a node never pulls them.
package ociimage

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
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
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
)

// Options of registry access.
type Options struct {
	// Transport replaces the default HTTP transport (tests count bytes with it).
	Transport http.RoundTripper
	// Keychain gives credentials for registries, ahead of the Docker config's.
	Keychain authn.Keychain
}

func (o Options) remote(ctx context.Context) []remote.Option {
	// Credentials come from the Docker config (docker login), as for any registry client.
	var keychain authn.Keychain = authn.DefaultKeychain
	if o.Keychain != nil {
		keychain = authn.NewMultiKeychain(o.Keychain, authn.DefaultKeychain)
	}
	opts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(keychain)}
	if o.Transport != nil {
		opts = append(opts, remote.WithTransport(o.Transport))
	}
	return opts
}

// Logins is a Keychain of a user name and password per registry ("registry.example.com",
// "127.0.0.1:5000"; Docker Hub is "index.docker.io"), as name.Registry.RegistryStr spells it.
type Logins map[string]authn.Basic

// Resolve returns the login for r's registry, or none.
func (l Logins) Resolve(r authn.Resource) (authn.Authenticator, error) {
	if b, ok := l[r.RegistryStr()]; ok && b != (authn.Basic{}) {
		return &b, nil
	}
	return authn.Anonymous, nil
}

// Image is an image resolved for a Windows host.
type Image struct {
	// Digest is the digest of the windows/amd64 image's manifest.
	Digest string
	// OSVersion is its os.version ("10.0.20348.2849").
	OSVersion string
	// Size is what a pull of it downloads, in bytes: its manifest, config and compressed layers.
	Size int64
}

// Resolve returns ref's image that runs on a host of Windows build host, by
// v1alpha1.CheckImageBuild: from a multi-platform index (as mcr.microsoft.com/windows/servercore
// publishes them, one windows/amd64 entry per build with its os.version), the entry of the
// host's build or, with hyperV, of the newest older build; a single image must itself pass.
// ref names the image by tag or by digest.
func Resolve(ctx context.Context, ref string, host v1alpha1.WindowsBuild, hyperV bool, o Options) (Image, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return Image{}, fmt.Errorf("image reference %q: %w", ref, err)
	}
	desc, err := remote.Get(r, o.remote(ctx)...)
	if err != nil {
		return Image{}, lookupError(ref, r, err)
	}
	if !desc.MediaType.IsIndex() {
		img, err := desc.Image()
		if err != nil {
			return Image{}, err
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return Image{}, err
		}
		if cf.OS != "windows" || cf.Architecture != "amd64" {
			return Image{}, fmt.Errorf("%s is an image for %s/%s, not windows/amd64: use a Windows image", ref, cf.OS, cf.Architecture)
		}
		if err := v1alpha1.CheckImageBuild(host, cf.OSVersion, hyperV); err != nil {
			return Image{}, fmt.Errorf("%s: %w", ref, err)
		}
		return sized(img, Image{Digest: desc.Digest.String(), OSVersion: cf.OSVersion})
	}
	idx, err := desc.ImageIndex()
	if err != nil {
		return Image{}, err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return Image{}, err
	}
	var seen []string
	var refused []error
	var best *v1.Descriptor
	var bestBuild v1alpha1.WindowsBuild
	for i, m := range im.Manifests {
		p := m.Platform
		if p == nil {
			continue
		}
		if p.OS != "windows" || p.Architecture != "amd64" {
			seen = append(seen, p.OS+"/"+p.Architecture)
			continue
		}
		if err := v1alpha1.CheckImageBuild(host, p.OSVersion, hyperV); err != nil {
			refused = append(refused, fmt.Errorf("os.version %s: %w", p.OSVersion, err))
			continue
		}
		// The host's build wins; under Hyper-V isolation, the newest older one otherwise.
		if b, _ := v1alpha1.ImageBuild(p.OSVersion); best == nil || b == host || (bestBuild != host && b > bestBuild) {
			best, bestBuild = &im.Manifests[i], b
		}
	}
	switch {
	case best != nil:
		img, err := idx.Image(best.Digest)
		if err != nil {
			return Image{}, err
		}
		return sized(img, Image{Digest: best.Digest.String(), OSVersion: best.Platform.OSVersion})
	case len(refused) == 0:
		return Image{}, fmt.Errorf("%s has no windows/amd64 image: it has %s; use a Windows image (an index with a windows/amd64 entry per "+
			"Windows build)", ref, strings.Join(seen, ", "))
	case len(refused) == 1:
		return Image{}, fmt.Errorf("%s has one windows/amd64 image, and it does not run on Windows build %d: %w", ref, host, refused[0])
	}
	return Image{}, fmt.Errorf("%s has no windows/amd64 image for Windows build %d: %w", ref, host, errors.Join(refused...))
}

// sized adds img's size to i.
func sized(img v1.Image, i Image) (Image, error) {
	raw, err := img.RawManifest()
	if err != nil {
		return i, err
	}
	m, err := img.Manifest()
	if err != nil {
		return i, err
	}
	i.Size = int64(len(raw)) + m.Config.Size
	for _, l := range m.Layers {
		i.Size += l.Size
	}
	return i, nil
}

// lookupError says what a registry's refusal to look ref up means and what to do.
func lookupError(ref string, r name.Reference, err error) error {
	var terr *transport.Error
	if errors.As(err, &terr) {
		switch terr.StatusCode {
		case http.StatusNotFound:
			return fmt.Errorf("%s does not exist in %s: check the repository and the tag or digest (%w)", ref, r.Context().RegistryStr(), err)
		case http.StatusUnauthorized, http.StatusForbidden:
			return fmt.Errorf("%s refused access to %s with the credentials given (%w): check the credentials for %s", r.Context().RegistryStr(),
				ref, err, r.Context().RegistryStr())
		}
	}
	return fmt.Errorf("look up %s: %w", ref, err)
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

// PushWindows pushes ref as a multi-platform index holding base once per os.version
// ("10.0.20348.2849"), each a windows/amd64 image with that os.version in its config and its index
// entry (how Windows base images are published), and returns each os.version's image digest.
func PushWindows(ctx context.Context, ref string, base v1.Image, osVersions []string, o Options) (map[string]string, error) {
	tag, err := name.NewTag(ref)
	if err != nil {
		return nil, fmt.Errorf("image reference %q: %w", ref, err)
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	digests := map[string]string{}
	for _, v := range osVersions {
		cf, err := base.ConfigFile()
		if err != nil {
			return nil, err
		}
		cf = cf.DeepCopy()
		cf.OS, cf.Architecture, cf.OSVersion = "windows", "amd64", v
		img, err := mutate.ConfigFile(base, cf)
		if err != nil {
			return nil, err
		}
		d, err := img.Digest()
		if err != nil {
			return nil, err
		}
		digests[v] = d.String()
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: "windows", Architecture: "amd64", OSVersion: v},
		}})
	}
	if err := remote.WriteIndex(tag, idx, o.remote(ctx)...); err != nil {
		return nil, fmt.Errorf("push %s: %w", ref, err)
	}
	return digests, nil
}
