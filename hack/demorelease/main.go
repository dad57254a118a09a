// Command demorelease serves the local release mirror on 127.0.0.1 that make release-mirror
// starts (hack/release-mirror.sh) and make demo bakes from: the Windows node binaries built from
// source by hack/testenv.sh (kubelet, kube-proxy, kubeadm, kube-log-runner, containerd, the CNI
// plugins), nodeboot.exe, laid out as their upstream sites publish them with checksum files, and
// an OCI registry holding a Windows pause image for every supported Windows build. Once it
// serves, it writes a Packer variables file pointing examples/packer/local.pkr.hcl at them; it
// serves until it is interrupted.
package main

import (
	"archive/tar"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/ociimage"
	"github.com/kubewin/kubewin/internal/testkit/releasemirror"
)

func main() {
	var (
		bin        = flag.String("bin", ".testbin/windows", "directory of the windows/amd64 binaries")
		nodeboot   = flag.String("nodeboot", "bin/windows_amd64/nodeboot.exe", "nodeboot.exe")
		kube       = flag.String("kubernetes-version", "", "version of the Kubernetes binaries (v1.37.1)")
		containerd = flag.String("containerd-version", "", "version of containerd")
		cni        = flag.String("cni-plugins-version", "", "version of the CNI plugins")
		nbVersion  = flag.String("nodeboot-version", "", "version of nodeboot")
		vars       = flag.String("vars", "release.pkrvars.hcl", "Packer variables file to write")
	)
	flag.Parse()
	log.SetFlags(0)
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(*bin, name))
		if err != nil {
			log.Fatalf("demorelease: %v (make testenv builds it: hack/testenv.sh winnode)", err)
		}
		return b
	}
	m := releasemirror.New()
	m.AddKubernetes(*kube, map[string][]byte{"kubelet.exe": read("kubelet.exe"), "kube-proxy.exe": read("kube-proxy.exe"),
		"kubeadm.exe": read("kubeadm.exe"), "kube-log-runner.exe": read("kube-log-runner.exe")})
	m.AddContainerd(*containerd, map[string][]byte{"bin/containerd.exe": read("containerd.exe"), "bin/ctr.exe": read("ctr.exe"),
		"bin/containerd-shim-runhcs-v1.exe": read("containerd-shim-runhcs-v1.exe")})
	m.AddCNIPlugins(*cni, map[string][]byte{"./win-bridge.exe": read("win-bridge.exe"), "./win-overlay.exe": read("win-overlay.exe"),
		"./host-local.exe": read("host-local.exe")})
	exe, err := os.ReadFile(*nodeboot)
	if err != nil {
		log.Fatalf("demorelease: %v (make build writes it)", err)
	}
	m.AddNodeboot(*nbVersion, exe)

	files, err := serve(m)
	if err != nil {
		log.Fatal(err)
	}
	reg, err := serve(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	if err != nil {
		log.Fatal(err)
	}
	pause := reg + "/pause:3.10.2"
	if err := pushPause(pause, read("pause.exe")); err != nil {
		log.Fatalf("demorelease: push the pause image: %v", err)
	}
	doc := fmt.Sprintf(`# Written by hack/demorelease: the local release mirror of make release-mirror.
kubernetes_version = %q
nodeboot_version   = %q
pause_image        = %q
release_base_urls = {
  kubernetes  = "http://%[4]s%[5]s"
  containerd  = "http://%[4]s%[6]s"
  cni_plugins = "http://%[4]s%[7]s"
  nodeboot    = "http://%[4]s%[8]s"
}
`, *kube, *nbVersion, pause, files, releasemirror.Kubernetes, releasemirror.Containerd, releasemirror.CNIPlugins, releasemirror.Nodeboot)
	// Written whole, then renamed into place: whoever waits for the file reads all of it.
	if err := os.WriteFile(*vars+".tmp", []byte(doc), 0o644); err != nil {
		log.Fatal(err)
	}
	if err := os.Rename(*vars+".tmp", *vars); err != nil {
		log.Fatal(err)
	}
	log.Printf("demorelease: release mirror on http://%s, registry on %s, variables in %s", files, reg, *vars)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	<-stop
}

// serve serves h on a free loopback port and returns host:port.
func serve(h http.Handler) (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	go func() { _ = (&http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}).Serve(l) }()
	return l.Addr().String(), nil
}

// pushPause pushes an index with a windows/amd64 image per supported Windows build, each a
// Windows layer (Files/ and Hives/) holding pause.exe.
func pushPause(ref string, exe []byte) error {
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for _, d := range []string{"Files/", "Hives/"} {
			if err := tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755, ModTime: time.Unix(0, 0)}); err != nil {
				return nil, err
			}
		}
		if err := tw.WriteHeader(&tar.Header{Name: "Files/pause.exe", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(exe)), ModTime: time.Unix(0,
			0)}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(exe); err != nil {
			return nil, err
		}
		if err := tw.Close(); err != nil {
			return nil, err
		}
		return io.NopCloser(&buf), nil
	})
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(mutate.ConfigMediaType(empty.Image, types.OCIConfigJSON), types.OCIManifestSchema1), layer)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.Config.Entrypoint = []string{`C:\pause.exe`}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	versions := make([]string, len(v1alpha1.WindowsBuilds))
	for i, b := range v1alpha1.WindowsBuilds {
		versions[i] = b.OSVersion() + ".1"
	}
	_, err = ociimage.PushWindows(context.Background(), ref, img, versions, ociimage.Options{})
	return err
}
