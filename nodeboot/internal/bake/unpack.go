package bake

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// unpack extracts an archive (.zip, .tar.gz, .tgz) into dir and returns the files it wrote.
// Entries that would land outside dir are refused.
func unpack(archive, dir string) (int, error) {
	if strings.HasSuffix(strings.ToLower(archive), ".zip") {
		return unzip(archive, dir)
	}
	f, err := os.Open(archive)
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", filepath.Base(archive), err)
	}
	tr := tar.NewReader(gz)
	n := 0
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("%s: %w", filepath.Base(archive), err)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if _, err := target(dir, h.Name); err != nil {
				return n, err
			}
		case tar.TypeReg:
			if err := extract(dir, h.Name, tr); err != nil {
				return n, err
			}
			n++
		}
	}
}

func unzip(archive, dir string) (int, error) {
	zr, err := zip.OpenReader(archive)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", filepath.Base(archive), err)
	}
	defer func() { _ = zr.Close() }()
	n := 0
	for _, f := range zr.File {
		if f.FileInfo().IsDir() {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return n, err
		}
		err = extract(dir, f.Name, rc)
		_ = rc.Close()
		if err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// target is where an archive entry goes under dir.
func target(dir, entry string) (string, error) {
	name := filepath.FromSlash(strings.ReplaceAll(entry, `\`, "/"))
	if filepath.IsAbs(name) || !filepath.IsLocal(name) {
		return "", fmt.Errorf("archive entry %q would be written outside %s", entry, dir)
	}
	return filepath.Join(dir, name), nil
}

func extract(dir, entry string, r io.Reader) error {
	path, err := target(dir, entry)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, r); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}
