// Package bake prepares a kubewin image on the machine being baked: it gets the payload onto
// the disk (downloading it, in parallel and resumably, when the Packer plugin asks the guest to
// fetch), verifies every file against the image manifest, installs the manifest, prepares the
// node's directories and registers nodeboot to start at boot.
package bake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/filesum"
)

// FetchOptions say where the payload comes from.
type FetchOptions struct {
	// Mirror, when set, replaces each file's source: the file is fetched from Mirror/<path>.
	Mirror string
	// Parallel is how many files download at once. Default: 4.
	Parallel int
	// Attempts per file for transient failures. Default: 3.
	Attempts int
	Client   *http.Client
	// Local maps a payload path to the file to write.
	Local func(path string) string
	// Progress receives a line per file.
	Progress io.Writer
}

// Stats are a fetch's figures.
type Stats struct {
	Files      int
	Downloaded int64 // bytes transferred
	Reused     int64 // bytes already on disk (complete files and resumed parts)
	Elapsed    time.Duration
}

// MismatchError is a file whose content is not what the manifest says.
type MismatchError struct {
	Path, URL, Got, Want string
	GotSize, WantSize    int64
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("payload file %s from %s has sha256 %s (%d bytes), the image manifest says %s (%d bytes): the source changed or was "+
		"tampered with",
		e.Path, e.URL, e.Got, e.GotSize, e.Want, e.WantSize)
}

// Fetch makes every file of the manifest present and verified, downloading what is missing.
func Fetch(ctx context.Context, m *v1alpha1.ImageManifest, o FetchOptions) (Stats, error) {
	if o.Parallel <= 0 {
		o.Parallel = 4
	}
	if o.Attempts <= 0 {
		o.Attempts = 3
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: 30 * time.Minute}
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	start := time.Now()
	var st Stats
	var downloaded, reused atomic.Int64
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan v1alpha1.File)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range o.Parallel {
		wg.Go(func() {
			for f := range jobs {
				d, r, err := fetchFile(ctx, f, o)
				downloaded.Add(d)
				reused.Add(r)
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					cancel() // one bad file stops the bake
				}
			}
		})
	}
	for _, f := range m.Files {
		select {
		case jobs <- f:
		case <-ctx.Done():
		}
	}
	close(jobs)
	wg.Wait()
	st.Files, st.Downloaded, st.Reused, st.Elapsed = len(m.Files), downloaded.Load(), reused.Load(), time.Since(start)
	var mismatch *MismatchError
	for _, err := range errs {
		if errors.As(err, &mismatch) {
			return st, err // the file at fault, not the cancellations it caused
		}
	}
	return st, errors.Join(errs...)
}

func sourceURL(f v1alpha1.File, mirror string) string {
	if mirror != "" {
		return strings.TrimSuffix(mirror, "/") + "/" + f.Path
	}
	return f.Source
}

// fetchFile returns the bytes it downloaded and those it found on disk.
func fetchFile(ctx context.Context, f v1alpha1.File, o FetchOptions) (int64, int64, error) {
	dst := o.Local(f.Path)
	if sum, size, err := filesum.File(dst); err == nil && sum == f.SHA256 && size == f.Size {
		_, _ = fmt.Fprintf(o.Progress, "[bake] %s: present and verified\n", f.Path)
		return 0, size, nil
	}
	url := sourceURL(f, o.Mirror)
	if url == "" {
		return 0, 0, fmt.Errorf("payload file %s is missing and has no source: set its source in the manifest or a mirror", f.Path)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return 0, 0, err
	}
	part := dst + ".part"
	var downloaded, reused int64
	var err error
	for attempt := 1; attempt <= o.Attempts; attempt++ {
		var d, r int64
		d, r, err = download(ctx, o.Client, url, part)
		downloaded += d
		if attempt == 1 {
			reused = r
		}
		if err == nil || ctx.Err() != nil {
			break
		}
		_, _ = fmt.Fprintf(o.Progress, "[bake] %s: attempt %d: %v\n", f.Path, attempt, err)
		time.Sleep(time.Duration(attempt) * 500 * time.Millisecond)
	}
	if err != nil {
		return downloaded, reused, fmt.Errorf("download payload file %s from %s: %w", f.Path, url, err)
	}
	sum, size, err := filesum.File(part)
	if err != nil {
		return downloaded, reused, err
	}
	if sum != f.SHA256 || size != f.Size {
		_ = os.Remove(part)
		return downloaded, reused, &MismatchError{Path: f.Path, URL: url, Got: sum, Want: f.SHA256, GotSize: size, WantSize: f.Size}
	}
	if err := os.Rename(part, dst); err != nil {
		return downloaded, reused, err
	}
	_, _ = fmt.Fprintf(o.Progress, "[bake] %s: downloaded and verified (%d bytes)\n", f.Path, size)
	return downloaded, reused, nil
}

// download appends the rest of url to part, resuming from its current length when the server
// supports ranges, and returns the bytes transferred and those kept from before.
func download(ctx context.Context, c *http.Client, url, part string) (int64, int64, error) {
	var have int64
	if fi, err := os.Stat(part); err == nil {
		have = fi.Size()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, 0, err
	}
	if have > 0 {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(have, 10)+"-")
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	flags := os.O_CREATE | os.O_WRONLY
	switch {
	case resp.StatusCode == http.StatusPartialContent && have > 0:
		flags |= os.O_APPEND
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable && have > 0:
		return 0, have, nil // the part is complete already
	case resp.StatusCode == http.StatusOK:
		flags |= os.O_TRUNC
		have = 0
	default:
		return 0, 0, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	out, err := os.OpenFile(part, flags, 0o644)
	if err != nil {
		return 0, 0, err
	}
	n, err := io.Copy(out, resp.Body)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, have, err
}
