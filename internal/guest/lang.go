package guest

import (
	"fmt"
	"strings"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/nodecmd"
	"github.com/kubewin/kubewin/internal/powershell"
	"github.com/kubewin/kubewin/internal/sim/simmachine"
)

// BakeArgs are nodeboot bake's arguments.
type BakeArgs struct {
	Manifest, Mirror, PullPause string
	Parallel                    int
}

// Lang is a guest's command language: the command lines that do kubewin's work there. Paths
// given to it are node paths (C:\k\kubelet.exe). A command that has nothing to do on a guest
// is empty.
type Lang interface {
	// Path is where a node path is for a transport's own uploads and downloads.
	Path(node string) string
	// Mkdir creates a directory and its parents.
	Mkdir(node string) string
	// EnableFeatures installs Windows features (FeatureContainers, FeatureHyperV) and exits
	// 3010 when Windows needs a restart to finish any of them.
	EnableFeatures(features ...string) string
	// BootTime prints "boot <time>", the time the guest last booted.
	BootTime() string
	// Restart restarts the guest.
	Restart() string
	// Fetch downloads url to a node path unless it is there with that sha256, and verifies it.
	Fetch(url, sha256, node string) string
	// Bake runs nodeboot bake; nodeboot is at the node path exe.
	Bake(exe string, a BakeArgs) string
	// Receive writes its standard input, base64 in lines that each decode alone, to a node
	// path (creating its directory), and prints the file's sha256 last. A secret is readable
	// only by its owner and administrators.
	Receive(node string, secret bool) string
	// Send prints a node file in base64.
	Send(node string) string
	// Facts prints the Facts of the machine as JSON.
	Facts() string
	// Nodeboot runs nodeboot (installed in the node's binary directory) with args.
	Nodeboot(args ...string) string
	// StartNode and StopNode start and stop nodeboot's service (`nodeboot run`), which keeps
	// the node's network and services up; stopping a service that is not there succeeds.
	StartNode() string
	StopNode() string
	// Snapshot records, in the node file list, what exists under the node's owned roots;
	// Restore removes what appeared there since, then the list.
	Snapshot(list string) string
	Restore(list string) string
	// Unbake removes what a bake registered outside the file system: the services of
	// nodeboot and of the runtime, firewall rules and antivirus exclusions.
	Unbake(runtime v1alpha1.RuntimeName) string
}

// Facts are what a machine says of itself before it joins.
type Facts struct {
	ComputerName string `json:"computerName"`
	Build        uint32 `json:"build"`
	// ContainersFeature is whether the Windows Containers feature is installed.
	ContainersFeature bool `json:"containersFeature"`
	// RebootPending is whether Windows waits for a restart to finish installing something.
	RebootPending bool `json:"rebootPending"`
	// PortsInUse are the node's ports (ProbePorts) something listens on.
	PortsInUse []int `json:"portsInUse"`
	// Services are the node's services (ProbeServices) that exist.
	Services []Service `json:"services"`
	// Files are the node's files (ProbeFiles) that exist.
	Files []string `json:"files"`
}

// Service is a Windows service.
type Service struct {
	Name    string `json:"name"`
	Running bool   `json:"running"`
}

// What Facts looks for.
var (
	ProbePorts    = []int{10250, 10256}
	ProbeServices = []string{"kubelet", "kube-proxy", "nodeboot", string(v1alpha1.RuntimeContainerd), string(v1alpha1.RuntimeDocker)}
)

// ProbeFiles are the files Facts looks for: a Kubernetes node's binaries and configuration,
// kubewin's image manifest and join state, and a NodeConfig.
func ProbeFiles() []string {
	p := nodecmd.DefaultPaths()
	return []string{p.BinDir + `\kubelet.exe`, p.ImageManifest, JoinState, p.KubeletKubeconfig, p.KubeletConfig, p.CustomData}
}

// JoinState is nodeboot's join state on a node.
var JoinState = nodecmd.DefaultPaths().NodebootDir + `\state.json`

// Windows is a Windows guest: every command is a PowerShell script, passed encoded (UTF-16LE,
// base64) so that no quoting of cmd.exe or of the transport applies; inside, every value is a
// PowerShell verbatim string written by powershell.Quote. SSH is set when a transport of its own
// (OpenSSH for Windows) moves files, which wants forward slashes.
type Windows struct{ SSH bool }

// PowerShell is the command that runs a PowerShell script, stopping at the first error.
func PowerShell(script string) string { return powershell.CommandLine(script) }

// lit quotes s as a PowerShell verbatim string; lits is an array of them.
func lit(s string) string { return powershell.Quote(s) }

func lits(ss []string) string { return powershell.QuoteList(ss) }

func (w Windows) Path(node string) string {
	if w.SSH {
		return strings.ReplaceAll(node, `\`, "/")
	}
	return node
}

func (Windows) Mkdir(node string) string {
	return PowerShell(fmt.Sprintf("New-Item -ItemType Directory -Force -Path %s | Out-Null", lit(node)))
}

// The Windows features a bake installs. Every container needs Containers; a Hyper-V isolated
// one needs the Hyper-V role too, and on a virtual machine nested virtualization ("The Hyper-V
// role must be installed before running Hyper-V isolation"; "If a Windows container host will be
// run from a Hyper-V virtual machine, and will also be hosting Hyper-V isolation, nested
// virtualization will need to be enabled": MicrosoftDocs/Virtualization-Documentation,
// virtualization/windowscontainers/deploy-containers/system-requirements.md).
const (
	FeatureContainers = "Containers"
	FeatureHyperV     = "Hyper-V"
)

// EnableFeatures installs each missing feature with Install-WindowsFeature, the cmdlet of
// Windows Server's ServerManager module, and asks for a single restart for all of them.
func (Windows) EnableFeatures(features ...string) string {
	return PowerShell(fmt.Sprintf(`$restart = $false
foreach ($name in %s) {
  $f = Get-WindowsFeature -Name $name
  if ($f.Installed) { Write-Output "$name feature: installed"; continue }
  $r = Install-WindowsFeature -Name $name
  if (-not $r.Success) { Write-Error "installing the $name feature failed"; exit 1 }
  if ($r.RestartNeeded -eq 'Yes') { Write-Output "$name feature: installed, restart needed"; $restart = $true; continue }
  Write-Output "$name feature: installed"
}
if ($restart) { exit 3010 }`, lits(features)))
}

func (Windows) BootTime() string {
	return PowerShell(`Write-Output ('boot ' + (Get-CimInstance -ClassName Win32_OperatingSystem).LastBootUpTime.ToUniversalTime().ToString('o'))`)
}

// Restart is a plain command, not a script: its exit status is shutdown's own (1115 and 1190
// mean a shutdown is already under way). It reads the same in cmd.exe (WinRM) and in PowerShell
// (the default shell of OpenSSH on the image).
func (Windows) Restart() string {
	return `shutdown /r /f /t 5 /c "kubewin: finishing the Windows features"`
}

// Fetch sets TLS 1.2 before the download: Windows PowerShell 5.1 offers SSL 3 and TLS 1.0 only
// by default, as Kubernetes' GCE node setup notes (cluster/gce/windows/k8s-node-setup.psm1
// Set-PrerequisiteOptions: "Use TLS 1.2: needed for Invoke-WebRequest downloads from
// github.com").
func (Windows) Fetch(url, sha256, node string) string {
	return PowerShell(fmt.Sprintf(`$dst = %s; $want = %s; $url = %s
if ((Test-Path -LiteralPath $dst) -and ((Get-FileHash -Algorithm SHA256 -LiteralPath $dst).Hash.ToLower() -eq $want)) `+
		`{ Write-Output "$dst present and verified"; exit 0 }
New-Item -ItemType Directory -Force -Path (Split-Path -Parent $dst) | Out-Null
[Net.ServicePointManager]::SecurityProtocol = [Net.SecurityProtocolType]::Tls12
Invoke-WebRequest -UseBasicParsing -Uri $url -OutFile "$dst.part"
$got = (Get-FileHash -Algorithm SHA256 -LiteralPath "$dst.part").Hash.ToLower()
if ($got -ne $want) { Remove-Item -Force -LiteralPath "$dst.part"; Write-Error "$dst from $url has sha256 $got, the release says $want"; exit 1 }
Move-Item -Force -LiteralPath "$dst.part" -Destination $dst
Write-Output "$dst downloaded and verified"`, lit(node), lit(sha256), lit(url)))
}

func (Windows) Bake(exe string, a BakeArgs) string {
	args := []string{"bake", "--manifest", lit(a.Manifest), "--parallel", fmt.Sprint(a.Parallel)}
	if a.Mirror != "" {
		args = append(args, "--mirror", lit(a.Mirror))
	}
	if a.PullPause != "" {
		args = append(args, "--pull-pause", lit(a.PullPause))
	}
	return PowerShell(fmt.Sprintf("& %s %s\nexit $LASTEXITCODE", lit(exe), strings.Join(args, " ")))
}

// Receive reads standard input as pipeline input ($input), a line at a time. A secret's file
// gets an ACL of its own (SYSTEM and Administrators, by SID) before anything is written to it.
func (Windows) Receive(node string, secret bool) string {
	acl := ""
	if secret {
		acl = `$acl = New-Object System.Security.AccessControl.FileSecurity
$acl.SetAccessRuleProtection($true, $false)
foreach ($sid in 'S-1-5-18', 'S-1-5-32-544') {
  $id = New-Object System.Security.Principal.SecurityIdentifier($sid)
  $acl.AddAccessRule((New-Object System.Security.AccessControl.FileSystemAccessRule($id, 'FullControl', 'Allow')))
}
Set-Acl -LiteralPath $part -AclObject $acl
`
	}
	return PowerShell(fmt.Sprintf(`$dst = %s; $part = "$dst.part"
New-Item -ItemType Directory -Force -Path (Split-Path -Parent $dst) | Out-Null
[IO.File]::WriteAllBytes($part, [byte[]]@())
%s$f = [IO.File]::Open($part, [IO.FileMode]::Append, [IO.FileAccess]::Write)
try { foreach ($line in $input) { if ($line) { $b = [Convert]::FromBase64String($line); $f.Write($b, 0, $b.Length) } } } finally { $f.Close() }
Move-Item -Force -LiteralPath $part -Destination $dst
(Get-FileHash -Algorithm SHA256 -LiteralPath $dst).Hash.ToLower()`, lit(node), acl))
}

func (Windows) Send(node string) string {
	return PowerShell(fmt.Sprintf("[Convert]::ToBase64String([IO.File]::ReadAllBytes(%s))", lit(node)))
}

func (Windows) Facts() string {
	ports := make([]string, len(ProbePorts))
	for i, p := range ProbePorts {
		ports[i] = fmt.Sprint(p)
	}
	return PowerShell(fmt.Sprintf(`$os = Get-CimInstance -ClassName Win32_OperatingSystem
$feature = Get-WindowsFeature -Name Containers -ErrorAction SilentlyContinue
$pending = @('HKLM:\SOFTWARE\Microsoft\Windows\CurrentVersion\Component Based Servicing\RebootPending',
  'HKLM:\SOFTWARE\Microsoft\Windows\CurrentVersion\WindowsUpdate\Auto Update\RebootRequired') | Where-Object { Test-Path $_ }
$rename = (Get-ItemProperty 'HKLM:\SYSTEM\CurrentControlSet\Control\ComputerName\ActiveComputerName').ComputerName `+
		`-ne (Get-ItemProperty 'HKLM:\SYSTEM\CurrentControlSet\Control\ComputerName\ComputerName').ComputerName
$ports = @(Get-NetTCPConnection -State Listen -ErrorAction SilentlyContinue | Where-Object { $_.LocalPort -in @(%s) } `+
		`| ForEach-Object { [int]$_.LocalPort } | Sort-Object -Unique)
$services = @(Get-Service -Name %s -ErrorAction SilentlyContinue `+
		`| ForEach-Object { [ordered]@{ name = $_.Name; running = ($_.Status -eq 'Running') } })
$files = @(%s | Where-Object { Test-Path -LiteralPath $_ })
[ordered]@{
  computerName = $env:COMPUTERNAME; build = [int]$os.BuildNumber
  containersFeature = [bool]($feature -and $feature.Installed); rebootPending = [bool]($pending -or $rename)
  portsInUse = $ports; services = $services; files = $files
} | ConvertTo-Json -Compress -Depth 4`, strings.Join(ports, ","), lits(ProbeServices), lits(ProbeFiles())))
}

func (Windows) Nodeboot(args ...string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = lit(a)
	}
	return PowerShell(fmt.Sprintf("& %s %s\nexit $LASTEXITCODE", lit(nodecmd.DefaultPaths().BinDir+`\nodeboot.exe`), strings.Join(q, " ")))
}

func (Windows) StartNode() string { return PowerShell("Start-Service -Name nodeboot") }

func (Windows) StopNode() string {
	return PowerShell(`$s = Get-Service -Name nodeboot -ErrorAction SilentlyContinue
if ($s -and $s.Status -ne 'Stopped') { Stop-Service -Name nodeboot -Force }`)
}

func (Windows) Snapshot(list string) string {
	return PowerShell(fmt.Sprintf(`$list = %s
$seen = New-Object System.Collections.Generic.List[string]
foreach ($r in %s) {
  if (Test-Path -LiteralPath $r) {
    $seen.Add((Get-Item -LiteralPath $r -Force).FullName)
    Get-ChildItem -LiteralPath $r -Recurse -Force | ForEach-Object { $seen.Add($_.FullName) }
  }
}
New-Item -ItemType Directory -Force -Path (Split-Path -Parent $list) | Out-Null
[IO.File]::WriteAllLines($list, $seen)
Write-Output "$($seen.Count) entries recorded"`, lit(list), lits(nodecmd.DefaultPaths().OwnedRoots())))
}

func (Windows) Restore(list string) string {
	return PowerShell(fmt.Sprintf(`$keep = New-Object 'System.Collections.Generic.HashSet[string]' ([StringComparer]::OrdinalIgnoreCase)
foreach ($l in [IO.File]::ReadAllLines(%s)) { [void]$keep.Add($l) }
$gone = 0
foreach ($r in %s) {
  if (-not (Test-Path -LiteralPath $r)) { continue }
  @(Get-Item -LiteralPath $r -Force) + @(Get-ChildItem -LiteralPath $r -Recurse -Force) |
    Sort-Object { $_.FullName.Length } -Descending |
    Where-Object { -not $keep.Contains($_.FullName) } |
    ForEach-Object { if (Test-Path -LiteralPath $_.FullName) { Remove-Item -LiteralPath $_.FullName -Recurse -Force; $gone++ } }
}
Remove-Item -LiteralPath %[1]s -Force -ErrorAction SilentlyContinue
Write-Output "$gone entries removed"`, lit(list), lits(nodecmd.DefaultPaths().OwnedRoots())))
}

// Unbake removes the services, firewall rules and exclusions a bake added, and gives Windows
// Update back its Windows Server start type (manual, trigger-started), which the bake disabled.
func (Windows) Unbake(runtime v1alpha1.RuntimeName) string {
	var rules []string
	for _, p := range nodecmd.InboundPorts {
		rules = append(rules, p.Name)
	}
	return PowerShell(fmt.Sprintf(`foreach ($name in %s) {
  $s = Get-Service -Name $name -ErrorAction SilentlyContinue
  if (-not $s) { continue }
  if ($s.Status -ne 'Stopped') { Stop-Service -Name $name -Force }
  & sc.exe delete $name | Out-Null
  if ($LASTEXITCODE -ne 0) { Write-Error "deleting service $name failed with exit code $LASTEXITCODE"; exit 1 }
}
foreach ($rule in %s) { & netsh advfirewall firewall delete rule "name=$rule" | Out-Null }
Remove-MpPreference -ExclusionPath %s -ErrorAction SilentlyContinue
Set-Service -Name wuauserv -StartupType Manual
exit 0`, lits([]string{"nodeboot", string(runtime)}), lits(rules), lits(nodecmd.DefaultPaths().ScanExclusions())))
}

// Sim is a simulated Windows machine (nodeboot's sim platform) under Root on a POSIX guest:
// node paths map under Root, nodeboot is the guest's own Binary, and nodeboot's service is
// `nodeboot run` in the background, its process ID kept in the machine's sim directory.
type Sim struct{ Root, Binary string }

// sh quotes s for a POSIX shell.
func sh(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func (s Sim) Path(node string) string { return simmachine.Path(s.Root, node) }

func (s Sim) Mkdir(node string) string { return "mkdir -p " + sh(s.Path(node)) }

func (Sim) EnableFeatures(...string) string       { return "" }
func (Sim) BootTime() string                      { return "" }
func (Sim) Restart() string                       { return "" }
func (Sim) Fetch(url, sha256, node string) string { return "" }

func (s Sim) nodeboot(args ...string) []string {
	return append([]string{sh(s.Binary), "--platform", "sim", "--root", sh(s.Root)}, args...)
}

func (s Sim) Bake(_ string, a BakeArgs) string {
	args := s.nodeboot("bake", "--manifest", sh(s.Path(a.Manifest)), "--parallel", fmt.Sprint(a.Parallel))
	if a.Mirror != "" {
		args = append(args, "--mirror", sh(a.Mirror))
	}
	if a.PullPause != "" {
		args = append(args, "--pull-pause", sh(a.PullPause))
	}
	return strings.Join(args, " ")
}

func (s Sim) Receive(node string, secret bool) string {
	umask := ""
	if secret {
		umask = "umask 077 && "
	}
	dst := sh(s.Path(node))
	return fmt.Sprintf(`d=%s && mkdir -p "$(dirname "$d")" && %sbase64 -d > "$d.part" && mv -f "$d.part" "$d" && sha256sum "$d" | cut -d' ' -f1`, dst,
		umask)
}

func (s Sim) Send(node string) string { return "base64 " + sh(s.Path(node)) }

func (s Sim) Facts() string {
	var files []string
	for _, f := range ProbeFiles() {
		files = append(files, sh(f)+" "+sh(s.Path(f)))
	}
	return fmt.Sprintf(`r=%s; m="$r/sim/machine.json"
[ -f "$m" ] || { echo "no simulated machine at $r" >&2; exit 1; }
name=$(sed -n 's/.*"computerName": *"\([^"]*\)".*/\1/p' "$m" | head -n 1)
build=$(sed -n 's/.*"build": *\([0-9]*\).*/\1/p' "$m" | head -n 1)
printf '{"computerName":"%%s","build":%%s,"containersFeature":true,"rebootPending":false,"portsInUse":[],"services":[' "$name" "${build:-0}"
sep=
for s in %s; do
  f="$r/sim/services/$s.json"; [ -f "$f" ] || continue
  running=false; grep -q '"running": *true' "$f" && running=true
  printf '%%s{"name":"%%s","running":%%s}' "$sep" "$s" "$running"; sep=,
done
printf '],"files":['
sep=
set -- %s
while [ $# -gt 0 ]; do
  if [ -e "$2" ]; then printf '%%s"%%s"' "$sep" "$(printf '%%s' "$1" | sed 's/\\/\\\\/g')"; sep=,; fi
  shift 2
done
printf ']}\n'`, sh(s.Root), strings.Join(ProbeServices, " "), strings.Join(files, " "))
}

func (s Sim) Nodeboot(args ...string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = sh(a)
	}
	return strings.Join(s.nodeboot(q...), " ")
}

// pidFile holds the process ID of the simulated machine's nodeboot service.
func (s Sim) pidFile() string { return sh(s.Root + "/sim/nodeboot-run.pid") }

func (s Sim) StartNode() string {
	return fmt.Sprintf(`p=%s
if [ -f "$p" ] && kill -0 "$(cat "$p")" 2>/dev/null; then exit 0; fi
setsid %s >>%s 2>&1 </dev/null &
echo $! > "$p"`, s.pidFile(), strings.Join(s.nodeboot("run"), " "), sh(s.Root+"/sim/nodeboot-run.log"))
}

func (s Sim) StopNode() string {
	return fmt.Sprintf(`p=%s
[ -f "$p" ] || exit 0
pid=$(cat "$p"); kill "$pid" 2>/dev/null
i=0
while kill -0 "$pid" 2>/dev/null; do
  i=$((i+1)); [ $i -le 300 ] || { echo "nodeboot (process $pid) did not stop" >&2; exit 1; }
  sleep 0.1
done
rm -f "$p"`, s.pidFile())
}

func (s Sim) Snapshot(list string) string {
	return fmt.Sprintf(`l=%s; seen=$(find %s -mindepth 1) || exit 1
mkdir -p "$(dirname "$l")" && { printf '%%s\n' "$seen" | grep . || true; } > "$l" && echo "$(printf '%%s' "$seen" | grep -c .) entries recorded"`,
		sh(s.Path(list)), sh(s.Root))
}

func (s Sim) Restore(list string) string {
	return fmt.Sprintf(`l=%s; [ -f "$l" ] || { echo "no snapshot at $l" >&2; exit 1; }
gone=$(find %s -mindepth 1 -depth | grep -vxF -f "$l" | grep -vxF -e "$l")
printf '%%s\n' "$gone" | while IFS= read -r p; do [ -z "$p" ] || rm -rf -- "$p"; done
rm -f "$l"
echo "$(printf '%%s' "$gone" | grep -c .) entries removed"`, sh(s.Path(list)), sh(s.Root))
}

// Unbake has nothing to do: a simulated machine records services, firewall rules and
// exclusions as files, which Restore removes.
func (Sim) Unbake(v1alpha1.RuntimeName) string { return "" }
