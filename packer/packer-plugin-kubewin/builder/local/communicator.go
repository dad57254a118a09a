package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"
)

// Communicator runs the build's commands on the Packer host with /bin/sh, in the machine's
// directory, one at a time; uploads and downloads are file copies on the host.
type Communicator struct {
	Dir string
	mu  sync.Mutex
}

var _ packersdk.Communicator = new(Communicator)

func (c *Communicator) Start(ctx context.Context, rc *packersdk.RemoteCmd) error {
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", rc.Command)
	cmd.Dir = c.Dir
	cmd.Stdin = rc.Stdin
	cmd.Stdout, cmd.Stderr = orDiscard(rc.Stdout), orDiscard(rc.Stderr)
	c.mu.Lock()
	if err := cmd.Start(); err != nil {
		c.mu.Unlock()
		return err
	}
	go func() {
		defer c.mu.Unlock()
		err := cmd.Wait()
		status := 0
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			status = ee.ExitCode()
		case err != nil:
			status = 1
		}
		rc.SetExited(status)
	}()
	return nil
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// local resolves a destination: absolute paths as they are, relative ones under Dir.
func (c *Communicator) local(path string) string {
	if filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(c.Dir, path)
}

func (c *Communicator) Upload(dst string, r io.Reader, fi *os.FileInfo) error {
	if strings.HasSuffix(dst, "/") {
		if fi == nil {
			return fmt.Errorf("upload to directory %s needs the file's name", dst)
		}
		dst += (*fi).Name()
	}
	mode := os.FileMode(0o644)
	if fi != nil {
		mode = (*fi).Mode().Perm()
	}
	return writeFile(c.local(dst), r, mode)
}

func writeFile(path string, r io.Reader, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".upload"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		_ = f.Close()
		_ = os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// UploadDir copies src into dst, or src's content when src ends in a slash (rsync's rule).
func (c *Communicator) UploadDir(dst, src string, exclude []string) error {
	return copyTree(c.local(dst), src, strings.HasSuffix(src, "/"), exclude)
}

func (c *Communicator) Download(src string, w io.Writer) error {
	f, err := os.Open(c.local(src))
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	_, err = io.Copy(w, f)
	return err
}

func (c *Communicator) DownloadDir(src, dst string, exclude []string) error {
	return copyTree(dst, c.local(src), strings.HasSuffix(src, "/"), exclude)
}

// copyTree copies src into dst, or only src's content when contentOnly.
func copyTree(dst, src string, contentOnly bool, exclude []string) error {
	if !contentOnly {
		dst = filepath.Join(dst, filepath.Base(src))
	}
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		for _, ex := range exclude {
			if ok, _ := filepath.Match(ex, d.Name()); ok {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		info, err := d.Info()
		if err != nil {
			return err
		}
		return writeFile(filepath.Join(dst, rel), f, info.Mode().Perm())
	})
}
