package guest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/ociimage"
)

// cache is a content-addressed store on the Packer host: sha256/<hex> holds a file whose
// sha256 is <hex>; oci/<hex>.tar the OCI archive of the image whose digest is sha256:<hex>
// (the pause image, workload images).
type cache struct {
	dir      string
	client   *http.Client
	registry ociimage.Options
	// Downloaded counts the bytes fetched, Reused the bytes served from the cache.
	Downloaded, Reused int64
}

// file returns the cached copy of f, downloading and verifying it when it is not cached.
func (c *cache) file(ctx context.Context, f v1alpha1.File) (string, error) {
	path := filepath.Join(c.dir, "sha256", f.SHA256)
	if fi, err := os.Stat(path); err == nil && fi.Size() == f.Size {
		c.Reused += fi.Size()
		return path, nil
	}
	if f.Source == "" {
		return "", fmt.Errorf("payload file %s has no source URL and is not in the cache %s", f.Path, c.dir)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.Source, nil)
	if err != nil {
		return "", err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("download payload file %s: %w", f.Path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("download payload file %s: GET %s: %s", f.Path, f.Source, resp.Status)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".download-*")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), resp.Body)
	c.Downloaded += n
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("download payload file %s from %s: %w", f.Path, f.Source, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != f.SHA256 || n != f.Size {
		return "", fmt.Errorf("payload file %s from %s has sha256 %s (%d bytes), the release says %s (%d bytes): the source changed or was tampered with",
			f.Path, f.Source, got, n, f.SHA256, f.Size)
	}
	return path, os.Rename(tmp.Name(), path)
}

// imageArchive returns the cached OCI archive of image ref with the given digest, exporting it
// from its registry when it is not cached. Only a complete export enters the cache.
func (c *cache) imageArchive(ctx context.Context, ref, digest string) (string, error) {
	path := filepath.Join(c.dir, "oci", strings.TrimPrefix(digest, "sha256:")+".tar")
	if fi, err := os.Stat(path); err == nil {
		c.Reused += fi.Size()
		return path, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".export-*")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	err = ociimage.WriteArchive(ctx, tmp, ref, digest, c.registry)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("export %s: %w", ref, err)
	}
	fi, err := os.Stat(tmp.Name())
	if err != nil {
		return "", err
	}
	c.Downloaded += fi.Size()
	return path, os.Rename(tmp.Name(), path)
}
