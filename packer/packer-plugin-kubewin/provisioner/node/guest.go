package node

import (
	"fmt"
	"strings"

	"github.com/kubewin/kubewin/internal/powershell"
	"github.com/kubewin/kubewin/internal/simmachine"
)

// Generated data a builder sets when its guest is a simulated Windows machine (the
// kubewin-local builder does): the provisioner then runs nodeboot's sim platform there.
const (
	// DataGuest is "sim" for a simulated machine.
	DataGuest = "KubewinGuest"
	// DataRoot is the simulated machine's directory on the guest.
	DataRoot = "KubewinRoot"
	// DataNodeboot is the nodeboot binary on the guest that runs the sim platform.
	DataNodeboot = "KubewinNodeboot"
)

// bakeArgs are nodeboot bake's arguments.
type bakeArgs struct {
	manifest, mirror, pullPause string
	parallel                    int
}

// guest speaks the guest's command language. Paths given to it are node paths (C:\k\kubelet.exe).
type guest interface {
	// path is where a node path is for the communicator's uploads and downloads.
	path(node string) string
	// mkdir creates a directory and its parents.
	mkdir(node string) string
	// enableContainers installs the Containers feature and exits 3010 when Windows needs a
	// restart to finish; empty when the guest has no such feature.
	enableContainers() string
	// bootTime prints the time the guest last booted.
	bootTime() string
	// restart restarts the guest.
	restart() string
	// fetch downloads url to a node path unless it is there with that sha256, and verifies it.
	fetch(url, sha256, node string) string
	// bake runs nodeboot bake; nodeboot is at the node path exe.
	bake(exe string, a bakeArgs) string
}

// windows is a Windows guest: every command is a PowerShell script, passed encoded (UTF-16LE,
// base64) so that no quoting of cmd.exe or of the transport applies; inside, every value is a
// PowerShell verbatim string written by powershell.Quote. Over SSH (OpenSSH for Windows) paths
// use forward slashes.
type windows struct{ ssh bool }

// ps is the command that runs a PowerShell script, stopping at the first error.
func ps(script string) string { return powershell.CommandLine(script) }

// lit quotes s as a PowerShell verbatim string.
func lit(s string) string { return powershell.Quote(s) }

func (w windows) path(node string) string {
	if w.ssh {
		return strings.ReplaceAll(node, `\`, "/")
	}
	return node
}

func (windows) mkdir(node string) string {
	return ps(fmt.Sprintf("New-Item -ItemType Directory -Force -Path %s | Out-Null", lit(node)))
}

func (windows) enableContainers() string {
	return ps(`$f = Get-WindowsFeature -Name Containers
if ($f.Installed) { Write-Output 'Containers feature: installed'; exit 0 }
$r = Install-WindowsFeature -Name Containers
if (-not $r.Success) { Write-Error 'installing the Containers feature failed'; exit 1 }
if ($r.RestartNeeded -eq 'Yes') { Write-Output 'Containers feature: installed, restart needed'; exit 3010 }
Write-Output 'Containers feature: installed'`)
}

func (windows) bootTime() string {
	return ps(`Write-Output ('boot ' + (Get-CimInstance -ClassName Win32_OperatingSystem).LastBootUpTime.ToUniversalTime().ToString('o'))`)
}

// restart is a plain command, not a script: its exit status is shutdown's own (1115 and 1190
// mean a shutdown is already under way). It reads the same in cmd.exe (WinRM) and in
// PowerShell (the default shell of OpenSSH on the image).
func (windows) restart() string {
	return `shutdown /r /f /t 5 /c "kubewin: finishing the Containers feature"`
}

func (windows) fetch(url, sha256, node string) string {
	return ps(fmt.Sprintf(`$dst = %s; $want = %s; $url = %s
if ((Test-Path -LiteralPath $dst) -and ((Get-FileHash -Algorithm SHA256 -LiteralPath $dst).Hash.ToLower() -eq $want)) { Write-Output "$dst present and verified"; exit 0 }
New-Item -ItemType Directory -Force -Path (Split-Path -Parent $dst) | Out-Null
Invoke-WebRequest -UseBasicParsing -Uri $url -OutFile "$dst.part"
$got = (Get-FileHash -Algorithm SHA256 -LiteralPath "$dst.part").Hash.ToLower()
if ($got -ne $want) { Remove-Item -Force -LiteralPath "$dst.part"; Write-Error "$dst from $url has sha256 $got, the release says $want"; exit 1 }
Move-Item -Force -LiteralPath "$dst.part" -Destination $dst
Write-Output "$dst downloaded and verified"`, lit(node), lit(sha256), lit(url)))
}

func (windows) bake(exe string, a bakeArgs) string {
	args := []string{"bake", "--manifest", lit(a.manifest), "--parallel", fmt.Sprint(a.parallel)}
	if a.mirror != "" {
		args = append(args, "--mirror", lit(a.mirror))
	}
	if a.pullPause != "" {
		args = append(args, "--pull-pause", lit(a.pullPause))
	}
	return ps(fmt.Sprintf("& %s %s\nexit $LASTEXITCODE", lit(exe), strings.Join(args, " ")))
}

// sim is a simulated Windows machine (nodeboot's sim platform) under root on a POSIX guest:
// node paths map under root, and nodeboot is the guest's own binary.
type sim struct{ root, nodeboot string }

// sh quotes s for a POSIX shell.
func sh(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func (s sim) path(node string) string { return simmachine.Path(s.root, node) }

func (s sim) mkdir(node string) string { return "mkdir -p " + sh(s.path(node)) }

func (sim) enableContainers() string { return "" }
func (sim) bootTime() string         { return "" }
func (sim) restart() string          { return "" }

func (s sim) fetch(url, sha256, node string) string { return "" }

func (s sim) bake(_ string, a bakeArgs) string {
	args := []string{sh(s.nodeboot), "--platform", "sim", "--root", sh(s.root), "bake", "--manifest", sh(s.path(a.manifest)), "--parallel", fmt.Sprint(a.parallel)}
	if a.mirror != "" {
		args = append(args, "--mirror", sh(a.mirror))
	}
	if a.pullPause != "" {
		args = append(args, "--pull-pause", sh(a.pullPause))
	}
	return strings.Join(args, " ")
}
