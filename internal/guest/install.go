// Package guest gets a kubewin payload onto a Windows machine and runs nodeboot there, through
// whatever reaches the machine: the Packer provisioner's communicator while an image is baked,
// or the Terraform provider's SSH or WinRM connection to an existing server. Install is the one
// implementation of "get every file on, verified, and run `nodeboot bake`"; Lang speaks the
// machine's command language (PowerShell on Windows, a POSIX shell for the local backend's
// simulated machines) and Transport runs its commands and moves files.
package guest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/kubewin/kubewin/internal/api"
	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/filesum"
	"github.com/kubewin/kubewin/internal/nodecmd"
	"github.com/kubewin/kubewin/internal/ociimage"
)

// Transfer modes.
const (
	// GuestFetch makes the guest download every artifact itself (nodeboot bake: parallel,
	// resumable, sha256-verified), from the upstream URLs or a mirror.
	GuestFetch = "guest-fetch"
	// HostCache downloads on the host running kubewin into a content-addressed cache and
	// uploads.
	HostCache = "host-cache"
)

// Node paths of an installation.
const (
	// PlanPath is where the bake plan goes on the guest.
	PlanPath = `C:\ProgramData\kubewin\bake\plan.json`
	// PauseArchive is the payload path of the pause image's OCI archive.
	PauseArchive = "ProgramData/kubewin/images/pause.tar"
	// NodebootFile is nodeboot's payload path.
	NodebootFile = "k/nodeboot.exe"
)

// Install says how to install a bake plan.
type Install struct {
	// Plan is a bake plan: an image manifest whose files carry their source URLs.
	Plan     v1alpha1.ImageManifest
	Transfer string
	// Mirror, with GuestFetch, serves every file at <Mirror>/<path> instead of its source.
	Mirror string
	// Parallel is how many files the guest downloads at once.
	Parallel int
	// CacheDir is the host cache of HostCache and of workload images; Registry configures image
	// pulls into it (registry logins among them, which stay on the host).
	CacheDir string
	Registry ociimage.Options
	// Images are workload images, by tag or by digest, pulled on the host into the cache,
	// uploaded and imported into the runtime's image store by the bake, with either transfer.
	Images []string
	// Say receives a line of progress; Out the commands' output.
	Say func(string)
	Out io.Writer
}

// Run installs the plan on the guest: the payload (fetched by the guest or uploaded from the
// host cache), then `nodeboot bake`, which verifies every file and prepares the machine. It
// returns the image manifest the bake installed.
func (in Install) Run(ctx context.Context, t Transport, l Lang) ([]byte, error) {
	if in.Say == nil {
		in.Say = func(string) {}
	}
	plan := in.Plan
	args := BakeArgs{Manifest: PlanPath, Parallel: max(in.Parallel, 1)}
	c := &cache{dir: in.CacheDir, client: &http.Client{Timeout: 30 * time.Minute}, registry: in.Registry}
	// Every image is resolved and checked before anything reaches the guest.
	warm, err := in.pullImages(ctx, c, plan.WindowsBuild, plan.HyperV())
	if err != nil {
		return nil, err
	}
	var uploads []upload
	switch in.Transfer {
	case GuestFetch:
		args.Mirror = in.Mirror
		if plan.PauseImage.Archive == "" {
			args.PullPause = PauseArchive
		}
		if err := in.fetchNodeboot(ctx, t, l); err != nil {
			return nil, err
		}
	case HostCache:
		items, err := in.cacheFiles(ctx, c, &plan)
		if err != nil {
			return nil, err
		}
		uploads = items
	default:
		return nil, fmt.Errorf("transfer %q is not a transfer mode: use %q or %q", in.Transfer, GuestFetch, HostCache)
	}
	plan.Files = append(plan.Files, warm.files...)
	plan.WorkloadImages = append(plan.WorkloadImages, warm.images...)
	uploads = append(uploads, warm.uploads...)
	if err := in.upload(ctx, t, l, uploads); err != nil {
		return nil, err
	}
	doc, err := api.EncodeJSON(plan)
	if err != nil {
		return nil, err
	}
	if _, err := Run(ctx, t, Command{What: "prepare the bake directory", Line: l.Mkdir(winDir(PlanPath))}, in.Out); err != nil {
		return nil, err
	}
	if err := t.Upload(ctx, PlanPath, bytes.NewReader(doc), int64(len(doc))); err != nil {
		return nil, fmt.Errorf("upload the bake plan: %w", err)
	}
	in.Say("running nodeboot bake on the guest")
	if _, err := Run(ctx, t, Command{What: "nodeboot bake", Line: l.Bake(nodecmd.DefaultPaths().Payload(NodebootFile), args), Elevated: true},
		in.Out); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := t.Download(ctx, nodecmd.DefaultPaths().ImageManifest, &buf); err != nil {
		return nil, fmt.Errorf("download the image manifest from the guest: %w", err)
	}
	if _, err := api.LoadImageManifest(buf.Bytes()); err != nil {
		return nil, fmt.Errorf("the image manifest the bake installed: %w", err)
	}
	return buf.Bytes(), nil
}

// fetchNodeboot has the guest download nodeboot itself (verified), which then fetches the rest.
func (in Install) fetchNodeboot(ctx context.Context, t Transport, l Lang) error {
	for _, f := range in.Plan.Files {
		if f.Path != NodebootFile {
			continue
		}
		url := f.Source
		if in.Mirror != "" {
			url = strings.TrimSuffix(in.Mirror, "/") + "/" + f.Path
		}
		cmd := l.Fetch(url, f.SHA256, nodecmd.DefaultPaths().Payload(f.Path))
		if cmd == "" {
			return nil
		}
		in.Say("fetching nodeboot on the guest from " + url)
		_, err := Run(ctx, t, Command{What: "fetch nodeboot", Line: cmd}, in.Out)
		return err
	}
	return fmt.Errorf("the release lists no %s: use the manifest of a kubewin-release data source", NodebootFile)
}

// upload is a file to upload: its node path and local copy.
type upload struct{ node, local string }

// cacheFiles fills the host cache with every artifact and the pause image archive, and returns
// them to upload.
func (in Install) cacheFiles(ctx context.Context, c *cache, plan *v1alpha1.ImageManifest) ([]upload, error) {
	start := time.Now()
	downloaded, reused := c.Downloaded, c.Reused
	var items []upload
	for _, f := range plan.Files {
		local, err := c.file(ctx, f)
		if err != nil {
			return nil, err
		}
		items = append(items, upload{nodecmd.DefaultPaths().Payload(f.Path), local})
	}
	if plan.PauseImage.Archive == "" {
		local, err := c.imageArchive(ctx, plan.PauseImage.Reference, plan.PauseImage.Digest)
		if err != nil {
			return nil, fmt.Errorf("the pause image: %w", err)
		}
		sum, size, err := filesum.File(local)
		if err != nil {
			return nil, err
		}
		plan.Files = append(plan.Files, v1alpha1.File{Path: PauseArchive, SHA256: sum, Size: size})
		plan.PauseImage.Archive = PauseArchive
		items = append(items, upload{nodecmd.DefaultPaths().Payload(PauseArchive), local})
	}
	in.Say(fmt.Sprintf("host cache %s: %d files, %d bytes downloaded, %d bytes from the cache, in %s",
		c.dir, len(items), c.Downloaded-downloaded, c.Reused-reused, time.Since(start).Round(time.Millisecond)))
	return items, nil
}

// WorkloadArchive is the payload path of a workload image's OCI archive.
func WorkloadArchive(digest string) string {
	return "ProgramData/kubewin/images/" + strings.Replace(digest, ":", "-", 1) + ".tar"
}

// workloads are the workload images of a bake: their records, archives and uploads.
type workloads struct {
	images  []v1alpha1.WorkloadImage
	files   []v1alpha1.File
	uploads []upload
}

// pullImages resolves every workload image for Windows build host (down-level images too when
// the image runs Hyper-V isolated containers), pinned by digest, then exports each into the host
// cache. Nothing is exported unless every image resolves.
func (in Install) pullImages(ctx context.Context, c *cache, host v1alpha1.WindowsBuild, hyperV bool) (workloads, error) {
	var w workloads
	if len(in.Images) == 0 {
		return w, nil
	}
	start := time.Now()
	seen := map[string]string{}
	for _, ref := range in.Images {
		img, err := ociimage.Resolve(ctx, ref, host, hyperV, in.Registry)
		if err != nil {
			return w, fmt.Errorf("images: %w", err)
		}
		if other, dup := seen[img.Digest]; dup {
			return w, fmt.Errorf("images: %s and %s are the same image (%s): list it once", other, ref, img.Digest)
		}
		seen[img.Digest] = ref
		w.images = append(w.images, v1alpha1.WorkloadImage{Reference: ref, Digest: img.Digest, OSVersion: img.OSVersion, Size: img.Size,
			Archive: WorkloadArchive(img.Digest)})
	}
	downloaded, reused := c.Downloaded, c.Reused
	var size int64
	for _, im := range w.images {
		t := time.Now()
		local, err := c.imageArchive(ctx, im.Reference, im.Digest)
		if err != nil {
			return w, fmt.Errorf("images: %w", err)
		}
		sum, n, err := filesum.File(local)
		if err != nil {
			return w, err
		}
		w.files = append(w.files, v1alpha1.File{Path: im.Archive, SHA256: sum, Size: n})
		w.uploads = append(w.uploads, upload{nodecmd.DefaultPaths().Payload(im.Archive), local})
		size += im.Size
		in.Say(fmt.Sprintf("workload image %s: %s, os.version %s, %d bytes, in %s%s", im.Reference, im.Digest, im.OSVersion, im.Size,
			time.Since(t).Round(time.Millisecond), im.IsolationNote(host)))
	}
	in.Say(fmt.Sprintf("workload images: %d images, %d bytes (%d bytes downloaded, %d bytes from the cache %s) in %s",
		len(w.images), size, c.Downloaded-downloaded, c.Reused-reused, c.dir, time.Since(start).Round(time.Millisecond)))
	return w, nil
}

// upload uploads files to the guest.
func (in Install) upload(ctx context.Context, t Transport, l Lang, items []upload) error {
	if len(items) == 0 {
		return nil
	}
	dirs := map[string]bool{}
	start := time.Now()
	var sent int64
	for _, it := range items {
		if dir := winDir(it.node); !dirs[dir] {
			dirs[dir] = true
			if _, err := Run(ctx, t, Command{What: "create " + dir, Line: l.Mkdir(dir)}, in.Out); err != nil {
				return err
			}
		}
		n, err := uploadFile(ctx, t, it.node, it.local)
		if err != nil {
			return fmt.Errorf("upload %s: %w", it.node, err)
		}
		sent += n
	}
	secs := time.Since(start).Seconds()
	in.Say(fmt.Sprintf("uploaded %d files, %d bytes in %.1fs (%.1f MB/s)", len(items), sent, secs, float64(sent)/1e6/max(secs, 1e-3)))
	return nil
}

// winDir is the directory of a node path.
func winDir(node string) string { return node[:max(strings.LastIndex(node, `\`), 0)] }

// uploadFile uploads a local file and returns its size.
func uploadFile(ctx context.Context, t Transport, dst, src string) (int64, error) {
	f, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), t.Upload(ctx, dst, f, fi.Size())
}
