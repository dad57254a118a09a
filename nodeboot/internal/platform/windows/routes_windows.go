package windows

import (
	"context"
	"fmt"
	"os/exec"
	"strings"

	"github.com/kubewin/kubewin/nodeboot/internal/platform"
)

type routes struct{}

// routeStore is PowerShell's persistent store, so that routes survive reboots.
const routeStore = "PersistentStore"

// Replace sets the host-gateway routes with the NetTCPIP cmdlets: routes that kubewin owns and no
// longer wants are removed, wanted ones added. kubewin's routes are recognised by their metric.
func (routes) Replace(ctx context.Context, rs []platform.Route) error {
	var script strings.Builder
	script.WriteString("$ErrorActionPreference = 'Stop'\n")
	fmt.Fprintf(&script, "$want = @{}\n")
	for _, r := range rs {
		fmt.Fprintf(&script, "$want['%s'] = '%s'\n", r.Destination, r.NextHop)
	}
	fmt.Fprintf(&script, `Get-NetRoute -AddressFamily IPv4 -RouteMetric %[1]d -ErrorAction SilentlyContinue | Where-Object { $want[$_.DestinationPrefix] -ne $_.NextHop } | Remove-NetRoute -Confirm:$false
$ifIndex = (Get-NetRoute -DestinationPrefix 0.0.0.0/0 | Sort-Object RouteMetric | Select-Object -First 1).InterfaceIndex
foreach ($dst in $want.Keys) {
  if (-not (Get-NetRoute -DestinationPrefix $dst -NextHop $want[$dst] -ErrorAction SilentlyContinue)) {
    New-NetRoute -DestinationPrefix $dst -NextHop $want[$dst] -InterfaceIndex $ifIndex -RouteMetric %[1]d -PolicyStore %[2]s | Out-Null
  }
}
`, kubewinRouteMetric, routeStore)
	out, err := exec.CommandContext(ctx, "powershell.exe", "-NoProfile", "-NonInteractive", "-Command", script.String()).CombinedOutput()
	if err != nil {
		return fmt.Errorf("program routes: %v: %s", err, out)
	}
	return nil
}

// kubewinRouteMetric marks kubewin's routes.
const kubewinRouteMetric = 271
