//go:build cgo

package windows_test

import (
	"context"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/powershell"
	"github.com/kubewin/kubewin/internal/testkit/pwshparse"
	"github.com/kubewin/kubewin/nodeboot/internal/platform"
	"github.com/kubewin/kubewin/nodeboot/internal/platform/windows"
	"github.com/kubewin/kubewin/nodeboot/internal/platform/windows/winfake"
)

// Every kind of script the Windows platform runs, written from values full of quotes, dollars,
// backticks and newlines, parses as PowerShell without an error node, and every such value
// stays inside one verbatim string.
func TestScriptsParse(t *testing.T) {
	ctx := context.Background()
	hostile := "Ethernet ‘2’ $env:X `n\"; Stop-Computer; '"
	m, err := winfake.New(winfake.Config{
		Root: t.TempDir(), ComputerName: "win-a", Build: 20348, Adapter: hostile,
		Address: netip.MustParseAddr("10.240.0.4"), Subnet: netip.MustParsePrefix("10.240.0.0/16"), Runtime: v1alpha1.RuntimeContainerd,
	})
	if err != nil {
		t.Fatal(err)
	}
	p := windows.New(m.Backends())
	p.Poll, p.MetadataRecheck = time.Millisecond, 0
	for _, mode := range []v1alpha1.NetworkMode{v1alpha1.NetworkModeL2Bridge, v1alpha1.NetworkModeOverlay} {
		c := &v1alpha1.NodeConfig{Network: v1alpha1.Network{Mode: mode, InterfaceName: hostile}}
		c.Default()
		s, _, err := platform.NetworkSpecFor(c, podCIDR)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Network().Ensure(ctx, s); err != nil {
			t.Fatal(err)
		}
		if err := p.Network().Delete(ctx, s.Name); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Edit(func(st *winfake.State) {
		st.Routes = append(st.Routes, winfake.Route{Destination: netip.MustParsePrefix("10.244.9.0/24"), NextHop: netip.MustParseAddr("10.240.0.9"),
			InterfaceIndex: 4, Metric: windows.RouteMetric, Store: windows.PersistentStore})
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Routes().Replace(ctx, []platform.Route{{Destination: netip.MustParsePrefix("10.244.1.0/24"),
		NextHop: netip.MustParseAddr("10.240.0.5")}}); err != nil {
		t.Fatal(err)
	}
	if err := p.AllowInbound(ctx, platform.FirewallRule{Name: hostile, Protocol: "TCP", Port: 10250}); err != nil {
		t.Fatal(err)
	}
	if err := p.AllowInbound(ctx, platform.FirewallRule{Name: "node-ports", Protocol: "TCP", Port: 30000, LastPort: 32767}); err != nil {
		t.Fatal(err)
	}
	if err := p.DisableAutomaticUpdates(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := p.ExcludeFromScanning(ctx, []string{hostile, `C:\k`}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	_ = p.ImportImage(ctx, v1alpha1.RuntimeContainerd, hostile, "10.0.20348.2849") // no such archive: the script is recorded all the same
	if err := p.Services().Ensure(ctx, platform.ServiceSpec{Name: "containerd", SelfRegistering: true,
		Executable: `C:\Program Files\containerd\bin\containerd.exe`, Args: []string{"--config", hostile}}); err != nil {
		t.Fatal(err)
	}

	if _, err := p.Diagnostics().RouteTable(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Diagnostics().Events(ctx, []string{hostile}, 10); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Diagnostics().NodebootLog(ctx, 1000); err != nil {
		t.Fatal(err)
	}

	seen := map[string]bool{}
	for _, op := range m.Log() {
		if op.Backend != "shell" {
			continue
		}
		seen[op.Call] = true
		tree, err := pwshparse.Parse(powershell.Script(op.Body))
		if err != nil {
			t.Fatal(err)
		}
		if errs := tree.Errors(); len(errs) > 0 {
			t.Errorf("%s does not parse: %v\n%s", op.Call, errs, op.Body)
		}
		for _, lit := range tree.Nodes("verbatim_string_characters") {
			if strings.Contains(lit, "Stop-Computer") && lit != powershell.Quote(hostile) && !strings.HasPrefix(lit,
				powershell.Quote("vEthernet (")[:len(powershell.Quote("vEthernet ("))-1]) {
				t.Errorf("%s: literal %s is not a quoted value", op.Call, lit)
			}
		}
		if strings.Contains(op.Body, hostile) {
			t.Errorf("%s holds the value unquoted:\n%s", op.Call, op.Body)
		}
		tree.Close()
	}
	var kinds []string
	for k := range seen {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	want := []string{"defender.exclude", "defender.installed", "events.read", "firewall.allow", "forwarding.enable", "metadata-routes.ensure",
		"program.run", "routes.all", "routes.apply", "routes.list", "updates.disable"}
	if !slices.Equal(kinds, want) {
		t.Errorf("scripts run: %v, want every kind: %v", kinds, want)
	}
}
