// Package diagnose gathers a node's diagnostics bundle (nodeboot diagnose): one gzipped tar
// archive with the join's state and reports, the rendered configuration with its secrets
// removed, the end of the node components' logs, HNS's networks, endpoints and policy lists,
// the services' states, the routing table and the event log entries that tell about the node.
// It holds what Kubernetes' Windows log collection scripts gather (Azure/aks-engine
// scripts/collect-windows-logs.ps1; microsoft/SDN Kubernetes/windows/debug/collectlogs.ps1),
// read through the platform's interfaces, so the same code gathers it on Windows and on a
// simulated machine. No file of the bundle holds a bootstrap token, a private key or a
// kubeconfig credential: each is removed where it is known to be (Redact*) and every file is
// scrubbed once more before it is written (Scrub).
package diagnose

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubewin/kubewin/internal/api"
	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/cni"
	"github.com/kubewin/kubewin/internal/nodecmd"
	"github.com/kubewin/kubewin/internal/nodestatus"
	"github.com/kubewin/kubewin/nodeboot/internal/join"
	"github.com/kubewin/kubewin/nodeboot/internal/platform"
)

// Input is what the bundle is gathered from.
type Input struct {
	Platform platform.Platform
	Paths    nodecmd.Paths
	// NodeConfig is the Windows path of the NodeConfig the machine was given.
	NodeConfig string
	// Node is the node's name, empty when it is not known.
	Node string
	// Report, Health and State are the join's report, what `nodeboot run` last found and the
	// join's state file; nil when there is none (a node whose NodeConfig cannot be read).
	Report *nodestatus.Report
	Health *join.Health
	State  []byte
	// Problem is why the join's state could not be read, if it could not.
	Problem error
	// Now is the time of the bundle. Default: time.Now.
	Now func() time.Time
}

// Limits of what the bundle holds of each source.
const (
	// LogTail is how much of the end of each log the bundle holds.
	LogTail = 256 << 10
	// EventsPerSource is how many of the newest entries of each event log source it holds.
	EventsPerSource = 200
	// MaxSummary bounds the summary, which a run command returns whole with the join report's
	// line (about 1.5 KiB) and the bundle's path: Azure returns the last 4,096 bytes of a run
	// command's output
	// (https://learn.microsoft.com/en-us/azure/virtual-machines/windows/run-command#restrictions:
	// "Output is limited to the last 4,096 bytes").
	MaxSummary = 2048
	// SummaryLogLines is how many of the last lines of nodeboot's log the summary holds.
	SummaryLogLines = 8
)

// The files of a bundle, in the order they are written. docs/nodeboot-diagnostics.md lists
// them; a test checks the two agree.
const (
	FileSummary        = "summary.txt"
	FileReport         = "join/report.json"
	FileState          = "join/state.json"
	FileHealth         = "join/health.json"
	FileNodeConfig     = "config/nodeconfig.json"
	FileImageManifest  = "config/image-manifest.json"
	FileKubeletConfig  = "config/kubelet-config.yaml"
	FileKubeProxy      = "config/kube-proxy-config.yaml"
	FileKubeconfig     = "config/kubelet.conf"
	FileCNI            = "config/cni.conf"
	FileContainerd     = "config/containerd-config.toml"
	FileKubeletLog     = "logs/kubelet.log"
	FileKubeProxyLog   = "logs/kube-proxy.log"
	FileRuntimeLog     = "logs/runtime.log"
	FileNodebootLog    = "logs/nodeboot.log"
	FileHNSNetworks    = "hns/networks.json"
	FileHNSEndpoints   = "hns/endpoints.json"
	FileHNSPolicyLists = "hns/policylists.json"
	FileServices       = "services.json"
	FileRoutes         = "routes.json"
	FileEvents         = "events.json"
)

// Content is a file of the bundle and what it holds.
type Content struct {
	File, Holds string
	// Containerd is set on a file only a containerd node's bundle has.
	Containerd bool
}

// Contents lists the bundle's files; docs/nodeboot-diagnostics.md is generated from it
// (package diagdocs).
var Contents = []Content{
	{File: FileSummary, Holds: "The node, the join's state (a failure with its phase, code and message), the services' states, the conditions " +
		"that are not True and the sources that could not be read. A failed apply's error ends with it."},
	{File: FileReport, Holds: "The join report (`nodeboot status --json`): each phase, its duration, the last error and its code."},
	{File: FileState, Holds: "The join's state file: the phases' outcomes and what they learned (API server, CSR name, node address, pod CIDR)."},
	{File: FileHealth, Holds: "What `nodeboot run` last found: the node's conditions and the repairs it made, once it has run."},
	{File: FileNodeConfig, Holds: "The NodeConfig the machine was given, its bootstrap token replaced by `<redacted>`."},
	{File: FileImageManifest, Holds: "The image manifest baked into the image: versions, runtime, payload files."},
	{File: FileKubeletConfig, Holds: "The kubelet's configuration file as nodeboot rendered it."},
	{File: FileKubeProxy, Holds: "kube-proxy's configuration file as nodeboot rendered it."},
	{File: FileKubeconfig, Holds: "The kubelet's kubeconfig, its credentials (client key and certificate data, tokens, passwords) " +
		"replaced by `REDACTED`."},
	{File: FileCNI, Holds: "The CNI configuration nodeboot wrote."},
	{File: FileContainerd, Containerd: true, Holds: "containerd's configuration, registry credentials (`password`, `auth`, `identitytoken`) replaced."},
	{File: FileKubeletLog, Holds: "The last 256 KiB of the kubelet's log."},
	{File: FileKubeProxyLog, Holds: "The last 256 KiB of kube-proxy's log."},
	{File: FileRuntimeLog, Holds: "The last 256 KiB of the runtime's log: containerd's, or cri-dockerd's on Docker Engine."},
	{File: FileNodebootLog, Holds: "The last 256 KiB of nodeboot's own log: its entries in the Application event log (source `nodeboot`)."},
	{File: FileHNSNetworks, Holds: "HNS's networks as its v2 API reports them (what `Get-HnsNetwork | ConvertTo-Json` shows)."},
	{File: FileHNSEndpoints, Holds: "The endpoints on each HNS network (`Get-HnsEndpoint`)."},
	{File: FileHNSPolicyLists, Holds: "HNS's load balancers, kube-proxy's services (`Get-HnsPolicyList`)."},
	{File: FileServices, Holds: "State, start type and command line of nodeboot, the kubelet, kube-proxy, the runtime, HNS and the " +
		"Hyper-V compute service."},
	{File: FileRoutes, Holds: "Every IPv4 route, in both stores (`Get-NetRoute`)."},
	{File: FileEvents, Holds: "The newest 200 entries of each event log source about the node: the Service Control Manager's about its services, " +
		"restarts and shutdowns (System 1074, 1076, 6005, 6006, 6008), resource exhaustion (2004), Windows Error Reporting, " +
		"Hyper-V-Compute-Operational, Host-Network-Service-Admin, nodeboot."},
}

// Services are the services whose states the bundle holds: the node's and what they need.
var Services = []string{"nodeboot", "kubelet", "kube-proxy", "containerd", "docker", "cri-dockerd", "hns", "vmcompute"}

// Bundle is a gathered bundle: its files by name, in order, and its summary.
type Bundle struct {
	Names   []string
	Files   map[string][]byte
	Summary string
	// Missing says, by file, why a source could not be read.
	Missing map[string]string
}

func (b *Bundle) add(name string, data []byte) {
	if _, ok := b.Files[name]; !ok {
		b.Names = append(b.Names, name)
	}
	b.Files[name] = data
}

func (b *Bundle) missing(name string, err error) {
	b.Missing[name] = err.Error()
}

func (b *Bundle) addJSON(name string, v any) {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		b.missing(name, err)
		return
	}
	b.add(name, append(data, '\n'))
}

// Collect gathers the bundle. A source that cannot be read is named in the summary, not an
// error: a bundle is most needed from a node that is broken.
func Collect(ctx context.Context, in Input) *Bundle {
	b := &Bundle{Files: map[string][]byte{}, Missing: map[string]string{}}
	b.add(FileSummary, nil) // first in the archive; written last
	if in.Report != nil {
		b.addJSON(FileReport, in.Report)
	}
	if in.State != nil {
		b.add(FileState, in.State)
	}
	if in.Health != nil {
		b.addJSON(FileHealth, in.Health)
	}
	p, paths := in.Platform, in.Paths
	var cfg *v1alpha1.NodeConfig
	if raw, err := os.ReadFile(p.Path(in.NodeConfig)); err != nil {
		b.missing(FileNodeConfig, err)
	} else if c, err := api.DecodeNodeConfig(raw); err != nil {
		b.missing(FileNodeConfig, fmt.Errorf("the NodeConfig does not decode: %w", err))
	} else {
		cfg = c
		if data, err := api.EncodeJSON(c.Redacted()); err != nil {
			b.missing(FileNodeConfig, err)
		} else {
			b.add(FileNodeConfig, data)
		}
	}
	b.file(p, FileImageManifest, paths.ImageManifest, nil)
	b.file(p, FileKubeletConfig, paths.KubeletConfig, nil)
	b.file(p, FileKubeProxy, paths.KubeProxyConfig, nil)
	b.file(p, FileKubeconfig, paths.KubeletKubeconfig, RedactKubeconfig)
	b.file(p, FileCNI, strings.TrimSuffix(paths.CNIConfDir, `\`)+`\`+path.Base(cni.FileName), nil)
	runtime := v1alpha1.RuntimeContainerd
	if cfg != nil && cfg.Runtime.Name != "" {
		runtime = cfg.Runtime.Name
	}
	runtimeLog := paths.ContainerdLog()
	if runtime == v1alpha1.RuntimeDocker {
		runtimeLog = paths.LogDir + `\cri-dockerd.log`
	} else {
		b.file(p, FileContainerd, paths.ContainerdConfigFile, RedactTOML)
	}
	b.tail(p, FileKubeletLog, paths.LogDir+`\kubelet.log`)
	b.tail(p, FileKubeProxyLog, paths.LogDir+`\kube-proxy.log`)
	b.tail(p, FileRuntimeLog, runtimeLog)
	d := p.Diagnostics()
	if log, err := d.NodebootLog(ctx, LogTail); err != nil {
		b.missing(FileNodebootLog, err)
	} else {
		b.add(FileNodebootLog, log)
	}
	var services []platform.ServiceStatus
	if hns, err := d.HNS(ctx); err != nil {
		b.missing(FileHNSNetworks, err)
	} else {
		b.addJSON(FileHNSNetworks, hns.Networks)
		b.addJSON(FileHNSEndpoints, hns.Endpoints)
		b.addJSON(FileHNSPolicyLists, hns.LoadBalancers)
	}
	if s, err := d.ServiceStates(ctx, Services); err != nil {
		b.missing(FileServices, err)
	} else {
		services = s
		b.addJSON(FileServices, s)
	}
	if r, err := d.RouteTable(ctx); err != nil {
		b.missing(FileRoutes, err)
	} else {
		b.addJSON(FileRoutes, r)
	}
	if e, err := d.Events(ctx, Services, EventsPerSource); err != nil {
		b.missing(FileEvents, err)
	} else {
		b.addJSON(FileEvents, e)
	}
	secrets := []string{}
	if cfg != nil && cfg.Cluster.BootstrapToken != "" {
		secrets = append(secrets, cfg.Cluster.BootstrapToken)
	}
	b.Summary = summary(in, services, b)
	b.Files[FileSummary] = []byte(b.Summary)
	for name, data := range b.Files {
		b.Files[name] = Scrub(data, secrets...)
	}
	b.Summary = string(b.Files[FileSummary])
	return b
}

// file adds a node file, through redact when it may hold a secret.
func (b *Bundle) file(p platform.Platform, name, win string, redact func([]byte) ([]byte, error)) {
	data, err := os.ReadFile(p.Path(win))
	if err == nil && redact != nil {
		data, err = redact(data)
	}
	if err != nil {
		b.missing(name, fileError(win, err))
		return
	}
	b.add(name, data)
}

// fileError names the node's file, not the path nodeboot opened it by.
func fileError(win string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s does not exist", win)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %s: %w", win, pe.Op, pe.Err)
	}
	return fmt.Errorf("%s: %w", win, err)
}

// tail adds the end of a log file.
func (b *Bundle) tail(p platform.Platform, name, win string) {
	f, err := os.Open(p.Path(win))
	if err != nil {
		b.missing(name, fileError(win, err))
		return
	}
	defer func() { _ = f.Close() }()
	if fi, err := f.Stat(); err == nil && fi.Size() > LogTail {
		_, _ = f.Seek(fi.Size()-LogTail, io.SeekStart)
	}
	data, err := io.ReadAll(io.LimitReader(f, LogTail))
	if err != nil {
		b.missing(name, fileError(win, err))
		return
	}
	b.add(name, data)
}

// summary is the bundle's first file and what a failed apply shows: the join's state, the
// failure with its code, the services that do not run, the conditions, and what is missing.
func summary(in Input, services []platform.ServiceStatus, b *Bundle) string {
	var s strings.Builder
	now := time.Now
	if in.Now != nil {
		now = in.Now
	}
	node := in.Node
	if node == "" {
		node = "(unknown)"
	}
	fmt.Fprintf(&s, "nodeboot diagnostics of node %s at %s\n", node, now().UTC().Format(time.RFC3339))
	switch r := in.Report; {
	case in.Problem != nil:
		fmt.Fprintf(&s, "join: unknown: %v\n", in.Problem)
	case r == nil:
		s.WriteString("join: no report\n")
	case r.State == nodestatus.StateFailed:
		fmt.Fprintf(&s, "join: %s\n", r.Failure())
	default:
		fmt.Fprintf(&s, "join: %s", r.State)
		if r.Phase != "" && r.State != nodestatus.StateDone {
			fmt.Fprintf(&s, " (phase %s)", r.Phase)
		}
		s.WriteString("\n")
	}
	var states []string
	for _, svc := range services {
		if svc.State != platform.ServiceMissing {
			states = append(states, svc.Name+" "+svc.State)
		}
	}
	if len(states) > 0 {
		fmt.Fprintf(&s, "services: %s\n", strings.Join(states, ", "))
	}
	if in.Health != nil {
		for _, c := range in.Health.Conditions {
			if c.Status != corev1.ConditionTrue {
				fmt.Fprintf(&s, "condition: %s %s: %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(b.Missing)) {
		fmt.Fprintf(&s, "not gathered: %s: %s\n", name, b.Missing[name])
	}
	head := s.String()
	// The end of nodeboot's log, without its report lines (the report is above), each line cut
	// to what fits.
	var log []string
	for _, l := range strings.Split(strings.TrimRight(strings.ReplaceAll(string(b.Files[FileNodebootLog]), "\r\n", "\n"), "\n"), "\n") {
		if l != "" && !strings.HasPrefix(l, nodestatus.SerialPrefix) {
			log = append(log, l)
		}
	}
	if len(log) > 0 {
		head += "last lines of nodeboot's log:\n"
		for _, l := range log[max(0, len(log)-SummaryLogLines):] {
			head += "  " + l[:min(len(l), 200)] + "\n"
		}
	}
	if len(head) > MaxSummary {
		head = head[:MaxSummary-len("...\n")] + "...\n"
	}
	return head
}

// Write writes the bundle as a gzipped tar archive, each file owner-only.
func (b *Bundle) Write(w io.Writer, modTime time.Time) error {
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	for _, name := range b.Names {
		data := b.Files[name]
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: int64(len(data)), ModTime: modTime, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// Read reads a bundle Write wrote.
func Read(r io.Reader) (*Bundle, error) {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("read the diagnostics bundle: %w", err)
	}
	b := &Bundle{Files: map[string][]byte{}, Missing: map[string]string{}}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read the diagnostics bundle: %w", err)
		}
		var buf bytes.Buffer
		if _, err := io.Copy(&buf, io.LimitReader(tr, 64<<20)); err != nil {
			return nil, fmt.Errorf("read the diagnostics bundle: %w", err)
		}
		b.add(h.Name, buf.Bytes())
	}
	b.Summary = string(b.Files[FileSummary])
	return b, nil
}
