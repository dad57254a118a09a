// Package simmachine lays out the simulated Windows machines of the local backend: a directory
// that stands for the machine's system drive (C:\a\b is <root>/C/a/b), a description of the
// machine (its Windows build, adapter address, runtime), the image it was created from (payload
// and manifest, as the kubewin-local Packer builder produces) and its custom data (the
// NodeConfig). nodeboot's sim platform runs on such a machine.
package simmachine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/kubewin/kubewin/internal/api"
	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/atomicfile"
	"github.com/kubewin/kubewin/internal/nodecmd"
	"github.com/kubewin/kubewin/internal/proc"
)

// Machine describes a simulated machine.
type Machine struct {
	// Root is the machine's system drive.
	Root string `json:"-"`
	// ComputerName is the machine's Windows computer name, which its node is named after.
	ComputerName string `json:"computerName"`
	// Build is the Windows build the machine pretends to run.
	Build uint32 `json:"build"`
	// Adapter is the name of its host adapter, with Address on Subnet.
	Adapter string       `json:"adapter"`
	Address netip.Addr   `json:"address"`
	Subnet  netip.Prefix `json:"subnet"`
	// Runtime is the container runtime it pretends to have.
	Runtime v1alpha1.RuntimeName `json:"runtime"`
	// WithoutDefender is an image without the Windows-Defender feature (and its PowerShell
	// module).
	WithoutDefender bool `json:"withoutDefender,omitempty"`
	// SetupCompleteAt is when its Windows setup finishes; until then it has a temporary computer
	// name. Zero: set up when provisioned.
	SetupCompleteAt time.Time `json:"setupCompleteAt,omitzero"`
	// MetadataEndpoint is the base URL of its instance metadata service (the ARM test server's
	// IMDS for its machines); empty when it has none.
	MetadataEndpoint string `json:"metadataEndpoint,omitempty"`
	// PortsInUse are ports another program of the machine listens on: a fault a test gives a
	// machine (the kubelet's 10250 fails its join's preflight with PortInUse).
	PortsInUse []int `json:"portsInUse,omitempty"`
	// Network is the URL of the network the machine is in (the ARM test server's virtual
	// networks, served by package simboot), which it asks before each TCP connection it opens
	// (Dialer). Empty: its connections go where they are addressed.
	Network string `json:"network,omitempty"`
}

// File is where a machine's description lives, under its root.
const File = "sim/machine.json"

// Image layout: a directory with the manifest and the payload, whose files are at the paths
// the manifest lists (relative to the system drive).
const (
	ImageManifestFile = "kubewin-manifest.json"
	ImagePayloadDir   = "payload"
)

// Path maps a Windows path of the machine under root.
func Path(root, win string) string {
	rest := strings.TrimPrefix(strings.TrimPrefix(win, "C:"), "c:")
	return filepath.Join(root, "C", filepath.FromSlash(strings.ReplaceAll(rest, `\`, "/")))
}

// Load reads the machine described under root.
func Load(root string) (Machine, error) {
	var m Machine
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(File)))
	if err != nil {
		return m, fmt.Errorf("no simulated machine at %s: %w", root, err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("simulated machine at %s: %w", root, err)
	}
	m.Root = root
	return m, nil
}

// Provision creates machine m from an image directory and hands it its custom data: the
// description, the payload at its paths, the image manifest and the NodeConfig. With nil
// custom data the NodeConfig is left for the caller to write (WriteCustomData), as Azure's
// provisioning writes it during Windows setup.
func Provision(m Machine, imageDir string, customData []byte) error {
	raw, err := os.ReadFile(filepath.Join(imageDir, ImageManifestFile))
	if err != nil {
		return fmt.Errorf("image %s: %w", imageDir, err)
	}
	manifest, err := api.LoadImageManifest(raw)
	if err != nil {
		return fmt.Errorf("image %s: %w", imageDir, err)
	}
	desc, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(m.Root, filepath.FromSlash(File)), desc, 0o644); err != nil {
		return err
	}
	for _, f := range manifest.Files {
		if err := copyFile(filepath.Join(imageDir, ImagePayloadDir, filepath.FromSlash(f.Path)), filepath.Join(m.Root, "C",
			filepath.FromSlash(f.Path))); err != nil {
			return fmt.Errorf("install payload file %s: %w", f.Path, err)
		}
	}
	if err := writeFile(Path(m.Root, nodecmd.DefaultPaths().ImageManifest), raw, 0o644); err != nil {
		return err
	}
	if customData == nil {
		return nil
	}
	return WriteCustomData(m.Root, customData)
}

// WriteCustomData writes the machine's custom data file at once (through a rename), so that it
// is never seen half-written.
func WriteCustomData(root string, customData []byte) error {
	path := Path(root, nodecmd.DefaultPaths().CustomData)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(path, customData, 0o600)
}

// Boot provisions machine m from an image directory with its custom data — its Windows build and
// runtime are the image's — and starts its nodeboot (`nodeboot run`, detached, logging to
// logPath), which joins it and keeps it running after the caller exits. It returns nodeboot's
// process ID.
func Boot(m Machine, imageDir string, customData []byte, nodeboot, logPath string) (int, error) {
	raw, err := os.ReadFile(filepath.Join(imageDir, ImageManifestFile))
	if err != nil {
		return 0, fmt.Errorf("image %s: %w", imageDir, err)
	}
	manifest, err := api.LoadImageManifest(raw)
	if err != nil {
		return 0, fmt.Errorf("image %s: %w", imageDir, err)
	}
	m.Build, m.Runtime = uint32(manifest.WindowsBuild), manifest.Runtime.Name
	if err := Provision(m, imageDir, customData); err != nil {
		return 0, err
	}
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, err
	}
	defer func() { _ = log.Close() }()
	cmd := exec.Command(nodeboot, "--platform", "sim", "--root", m.Root, "run")
	cmd.Stdout, cmd.Stderr, cmd.Dir = log, log, filepath.Dir(logPath)
	// The machines of a host share its cores with each other and the control plane: one core's
	// worth of Go scheduler each (the runtime's idle spinning across all the host's cores cost a
	// 50-machine pool a tenth of its nodeboot CPU).
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
	cmd.SysProcAttr = proc.SysProcAttr(true)
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start nodeboot: %w", err)
	}
	go func() { _ = cmd.Wait() }() // reap it if it dies while this process lives
	return cmd.Process.Pid, nil
}

func writeFile(path string, data []byte, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, perm)
}

// copyFile links src to dst when it can (images are read-only), and copies it otherwise.
func copyFile(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	_ = os.Remove(dst)
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

// WriteImage writes an image directory: the payload files (keyed by their path relative to the
// system drive) and a manifest listing each with its sha256 and size.
func WriteImage(dir string, m v1alpha1.ImageManifest, payload map[string][]byte) error {
	m.Files = nil
	for _, p := range sortedKeys(payload) {
		data := payload[p]
		sum := sha256.Sum256(data)
		m.Files = append(m.Files, v1alpha1.File{Path: p, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(data))})
		if err := writeFile(filepath.Join(dir, ImagePayloadDir, filepath.FromSlash(p)), data, 0o755); err != nil {
			return err
		}
	}
	if errs := m.Validate(); len(errs) > 0 {
		return &api.ValidationError{Kind: v1alpha1.KindImageManifest, Errs: errs}
	}
	b, err := api.EncodeJSON(m)
	if err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, ImageManifestFile), b, 0o644)
}

func sortedKeys(m map[string][]byte) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
