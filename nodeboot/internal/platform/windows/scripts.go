package windows

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/powershell"
	"github.com/kubewin/kubewin/nodeboot/internal/platform"
)

// The scripts nodeboot runs. Each one is written from typed values, every string through
// powershell.Quote; the Params types are what the recording backend simulates them from.

var q = powershell.Quote

// ListRoutesParams are the values of the routes.list script (none: it only reads).
type ListRoutesParams struct{}

func listRoutesScript() Script {
	text := fmt.Sprintf(`$routes = @()
foreach ($store in @(%s, %s)) {
  foreach ($r in @(Get-NetRoute -AddressFamily IPv4 -PolicyStore $store -ErrorAction SilentlyContinue)) {
    if ($r.RouteMetric -eq %d) {
      $routes += [pscustomobject]@{ DestinationPrefix = $r.DestinationPrefix; NextHop = $r.NextHop; `+
		`InterfaceIndex = $r.InterfaceIndex; Store = $store }
    }
  }
}
$index = 0
$default = Get-NetRoute -AddressFamily IPv4 -DestinationPrefix '0.0.0.0/0' -PolicyStore %s -ErrorAction SilentlyContinue `+
		`| Sort-Object -Property RouteMetric | Select-Object -First 1
if ($default) { $index = $default.InterfaceIndex }
ConvertTo-Json -Compress -Depth 3 -InputObject ([pscustomobject]@{ InterfaceIndex = $index; Routes = @($routes) })
`, q(ActiveStore), q(PersistentStore), RouteMetric, q(ActiveStore))
	return Script{Name: "routes.list", Params: ListRoutesParams{}, Text: text}
}

// ApplyRoutesParams are the values of the routes.apply script.
type ApplyRoutesParams struct {
	Remove         []StoredRoute
	Add            []platform.Route
	InterfaceIndex int
}

func applyRoutesScript(remove []StoredRoute, add []platform.Route, ifIndex int) Script {
	var b strings.Builder
	for _, r := range remove {
		fmt.Fprintf(&b, "Remove-NetRoute -AddressFamily IPv4 -DestinationPrefix %s -NextHop %s -InterfaceIndex %d -PolicyStore %s -Confirm:$false "+
			"-ErrorAction SilentlyContinue\n",
			q(r.DestinationPrefix), q(r.NextHop), r.InterfaceIndex, q(r.Store))
	}
	for _, r := range add {
		fmt.Fprintf(&b,
			"New-NetRoute -AddressFamily IPv4 -DestinationPrefix %s -NextHop %s -InterfaceIndex %d -RouteMetric %d -PolicyStore %s | Out-Null\n",
			q(r.Destination.String()), q(r.NextHop.String()), ifIndex, RouteMetric, q(ActiveStore))
	}
	return Script{Name: "routes.apply", Params: ApplyRoutesParams{Remove: remove, Add: add, InterfaceIndex: ifIndex}, Text: b.String()}
}

// MetadataRoutesParams are the values of the metadata-routes.ensure script.
type MetadataRoutesParams struct {
	Adapters     []string
	Destinations []netip.Prefix
}

// metadataRoutesScript adds an on-link route to each destination on each adapter that has
// none in effect (the active store: a persistent-store route alone is not in effect until a
// restart), in the active store (nodeboot adds them again on every boot), ignoring adapters that
// are missing or cannot take routes: kubernetes cluster/gce/windows/k8s-node-setup.psm1
// Add_GceMetadataServerRoute (New-NetRoute -ErrorAction Ignore on every adapter, because after
// HNS creates a network "vEthernet (Ethernet)" subsumes the routes of "Ethernet").
func metadataRoutesScript(adapters []string, destinations []netip.Prefix) Script {
	dsts := make([]string, len(destinations))
	for i, d := range destinations {
		dsts[i] = d.String()
	}
	text := fmt.Sprintf(`foreach ($name in %s) {
  $adapter = Get-NetAdapter -Name $name -ErrorAction SilentlyContinue
  if (-not $adapter) { continue }
  foreach ($prefix in %s) {
    $inEffect = Get-NetRoute -AddressFamily IPv4 -DestinationPrefix $prefix -InterfaceIndex $adapter.InterfaceIndex `+
		`-PolicyStore %s -ErrorAction SilentlyContinue
    if (-not $inEffect) {
      New-NetRoute -AddressFamily IPv4 -DestinationPrefix $prefix -InterfaceIndex $adapter.InterfaceIndex `+
		`-PolicyStore %s -ErrorAction SilentlyContinue | Out-Null
    }
  }
}
`, powershell.QuoteList(adapters), powershell.QuoteList(dsts), q(ActiveStore), q(ActiveStore))
	return Script{Name: "metadata-routes.ensure", Params: MetadataRoutesParams{Adapters: adapters, Destinations: destinations}, Text: text}
}

// ForwardingParams are the values of the forwarding.enable script.
type ForwardingParams struct{ Interfaces []string }

func forwardingScript(aliases []string) Script {
	text := fmt.Sprintf(`foreach ($alias in %s) {
  Set-NetIPInterface -InterfaceAlias $alias -AddressFamily IPv4 -Forwarding Enabled
}
`, powershell.QuoteList(aliases))
	return Script{Name: "forwarding.enable", Params: ForwardingParams{Interfaces: aliases}, Text: text}
}

// ProgramParams are the values of the program.run script.
type ProgramParams struct {
	Executable string
	Args       []string
}

// programScript runs a program with its arguments and fails with its exit code.
func programScript(exe string, args []string) Script {
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = q(a)
	}
	text := fmt.Sprintf(`& %s %s
if ($LASTEXITCODE -ne 0) { throw ('{0} exited with code {1}' -f %s, $LASTEXITCODE) }
`, q(exe), strings.Join(quoted, " "), q(exe))
	return Script{Name: "program.run", Params: ProgramParams{Executable: exe, Args: args}, Text: text}
}

// FirewallParams are the values of the firewall.allow script.
type FirewallParams struct{ Rule platform.FirewallRule }

// firewallScript replaces a named inbound allow rule (sig-windows-tools
// hostprocess/PrepareNode.ps1: New-NetFirewallRule -Name kubelet ... -LocalPort 10250). A
// range is one -LocalPort value, as 30000-32767 (New-NetFirewallRule: "-LocalPort ... a port
// range", https://learn.microsoft.com/en-us/powershell/module/netsecurity/new-netfirewallrule).
func firewallScript(r platform.FirewallRule) Script {
	text := fmt.Sprintf(`Remove-NetFirewallRule -Name %[1]s -ErrorAction SilentlyContinue
New-NetFirewallRule -Name %[1]s -DisplayName %[1]s -Enabled True -Direction Inbound -Action Allow -Protocol %[2]s -LocalPort %[3]s | Out-Null
`, q(r.Name), q(r.Protocol), q(r.Ports()))
	return Script{Name: "firewall.allow", Params: FirewallParams{Rule: r}, Text: text}
}

// UpdatesParams are the values of the updates.disable script: none.
type UpdatesParams struct{}

// updatesScript disables the Windows Update service and stops it, as Kubernetes' Windows
// node setup does because "Windows updates cause the node to reboot at arbitrary times"
// (cluster/gce/windows/k8s-node-setup.psm1 Set-PrerequisiteOptions: sc.exe config wuauserv
// start=disabled; sc.exe stop wuauserv).
func updatesScript() Script {
	return Script{Name: "updates.disable", Params: UpdatesParams{}, Text: `Set-Service -Name wuauserv -StartupType Disabled
Stop-Service -Name wuauserv -Force
`}
}

// ExclusionParams are the values of the defender.exclude script.
type ExclusionParams struct{ Paths []string }

func exclusionScript(paths []string) Script {
	return Script{Name: "defender.exclude", Params: ExclusionParams{Paths: paths},
		Text: "Add-MpPreference -ExclusionPath " + powershell.QuoteList(paths) + "\n"}
}

// DefenderQueryParams are the values of the defender.installed script (none).
type DefenderQueryParams struct{}

// defenderQueryScript prints True when Microsoft Defender is installed. Images may leave the
// Windows-Defender feature out, and then its cmdlets do not exist: kubernetes' GCE node setup
// checks the feature before it sets Defender preferences (cluster/gce/windows/k8s-node-setup.psm1,
// Configure-WindowsDefender).
func defenderQueryScript() Script {
	return Script{Name: "defender.installed", Params: DefenderQueryParams{},
		Text: "[bool](Get-WindowsFeature -Name 'Windows-Defender').Installed\n"}
}

// PodsParams are the values of the pods.remove script.
type PodsParams struct {
	Runtime v1alpha1.RuntimeName
	// Client is the runtime's own client: ctr.exe or docker.exe.
	Client string
}

// criDockerdTypeLabel is the label cri-dockerd puts on every container it creates, a pod's
// sandbox or one of its containers (Mirantis/cri-dockerd libdocker: containerTypeLabelKey).
const criDockerdTypeLabel = "io.kubernetes.docker.type"

// podsScript removes the Kubernetes pods' containers with the runtime's own client, as a node
// reset does (kubeadm reset's cleanup-node phase removes them through CRI; microsoft/SDN
// Kubernetes/flannel/l2bridge/reset.ps1 runs docker rm -f): containerd's k8s.io namespace is
// the CRI plugin's, whose containers are the pods'; on Docker, cri-dockerd's containers carry
// its label. It prints how many it removed.
func podsScript(runtime v1alpha1.RuntimeName, client string) Script {
	list, remove := `& $client --namespace k8s.io containers list --quiet`, `& $client --namespace k8s.io tasks delete --force $id 2>$null | Out-Null
  & $client --namespace k8s.io containers delete $id`
	if runtime == v1alpha1.RuntimeDocker {
		list, remove = fmt.Sprintf(`& $client ps --all --quiet --filter %s`, q("label="+criDockerdTypeLabel)), `& $client rm --force $id | Out-Null`
	}
	text := fmt.Sprintf(`$client = %s
$ids = @(%s)
if ($LASTEXITCODE -ne 0) { throw ('{0} could not list the containers: exit code {1}' -f $client, $LASTEXITCODE) }
foreach ($id in $ids) {
  %s
  if ($LASTEXITCODE -ne 0) { throw ('{0} could not remove container {1}: exit code {2}' -f $client, $id, $LASTEXITCODE) }
}
$ids.Count
`, q(client), list, remove)
	return Script{Name: "pods.remove", Params: PodsParams{Runtime: runtime, Client: client}, Text: text}
}

// AllRoutesParams are the values of the routes.all script (none: it only reads).
type AllRoutesParams struct{}

// allRoutesScript lists every IPv4 route in both stores (what route print shows, in
// microsoft/SDN Kubernetes/windows/debug/collectlogs.ps1), as JSON.
func allRoutesScript() Script {
	return Script{Name: "routes.all", Params: AllRoutesParams{}, Text: `$routes = @(Get-NetRoute -AddressFamily IPv4 -ErrorAction SilentlyContinue |
  ForEach-Object {
  [pscustomobject]@{ destination = $_.DestinationPrefix; nextHop = $_.NextHop; interfaceIndex = $_.InterfaceIndex; metric = $_.RouteMetric; ` +
		`store = [string]$_.Store }
})
ConvertTo-Json -Compress -Depth 3 -InputObject $routes
`}
}

// EventSource is an event log, and in it one provider or event IDs; empty fields do not filter.
type EventSource struct {
	Log      string
	Provider string
	IDs      []int
	// ServiceNamed keeps only entries whose message names one of EventsParams.Services.
	ServiceNamed bool
}

// NodebootEvents are nodeboot's own entries (its event source, registered at bake).
var NodebootEvents = EventSource{Log: "Application", Provider: "nodeboot"}

// nodeEventSources are the event log entries that tell about a node, as Azure/aks-engine
// scripts/collect-windows-logs.ps1 collects them: the Service Control Manager's entries about
// the node's services, restarts and shutdowns (1074, 1076, 6005, 6006, 6008) and resource
// exhaustion (2004), Windows Error Reporting's crashes, the Hyper-V compute service's log;
// and HNS's admin log (microsoft/SDN Kubernetes/windows/debug/CleanupContainerHostNetworking.ps1
// copies Microsoft-Windows-Host-Network-Service-Admin) and nodeboot's own entries.
var nodeEventSources = []EventSource{
	{Log: "System", Provider: "Service Control Manager", ServiceNamed: true},
	{Log: "System", IDs: []int{1074, 1076, 2004, 6005, 6006, 6008}},
	{Log: "Application", Provider: "Windows Error Reporting"},
	{Log: "Microsoft-Windows-Hyper-V-Compute-Operational"},
	{Log: "Microsoft-Windows-Host-Network-Service-Admin"},
	NodebootEvents,
}

// EventsParams are the values of the events.read script.
type EventsParams struct {
	Sources  []EventSource
	Services []string
	// Max is how many of the newest entries of each source are read.
	Max int
}

// eventsScript reads the newest entries of each source with Get-WinEvent -FilterHashtable
// (https://learn.microsoft.com/en-us/powershell/module/microsoft.powershell.diagnostics/get-winevent:
// LogName, ProviderName and ID keys; a log or provider that does not exist, or has no entry,
// is an error, ignored), newest first, as JSON.
func eventsScript(p EventsParams) Script {
	var b strings.Builder
	fmt.Fprintf(&b, "$services = %s\n$events = @()\n", powershell.QuoteList(p.Services))
	for _, s := range p.Sources {
		filter := "LogName = " + q(s.Log)
		if s.Provider != "" {
			filter += "; ProviderName = " + q(s.Provider)
		}
		if len(s.IDs) > 0 {
			ids := make([]string, len(s.IDs))
			for i, id := range s.IDs {
				ids[i] = fmt.Sprint(id)
			}
			filter += "; ID = " + strings.Join(ids, ",")
		}
		where := ""
		if s.ServiceNamed {
			where = " | Where-Object { $m = $_.Message; @($services | Where-Object { $m -like ('*' + $_ + '*') }).Count -gt 0 }"
		}
		fmt.Fprintf(&b, "$events += @(Get-WinEvent -FilterHashtable @{ %s } -MaxEvents %d -ErrorAction SilentlyContinue%s)\n", filter, p.Max, where)
	}
	b.WriteString(`$out = @($events | Sort-Object -Property TimeCreated -Descending | ForEach-Object {
  [pscustomobject]@{ log = $_.LogName; source = $_.ProviderName; id = $_.Id; level = $_.LevelDisplayName; ` +
		`time = $_.TimeCreated.ToUniversalTime().ToString('o'); message = $_.Message }
})
ConvertTo-Json -Compress -Depth 3 -InputObject $out
`)
	return Script{Name: "events.read", Params: p, Text: b.String()}
}
