package servers

import (
	"strings"
	"testing"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/guest"
)

func TestCheck(t *testing.T) {
	const manifest = `C:\ProgramData\kubewin\image-manifest.json`
	baked := guest.Facts{ComputerName: "WIN-1", Build: 20348, ContainersFeature: true, Files: []string{manifest}}
	plan := &v1alpha1.ImageManifest{WindowsBuild: v1alpha1.WindowsServer2022, Runtime: v1alpha1.RuntimeInfo{Name: v1alpha1.RuntimeContainerd}}
	clean := guest.Facts{ComputerName: "WIN-1", Build: 20348, ContainersFeature: true}
	with := func(f guest.Facts, change func(*guest.Facts)) guest.Facts {
		f.Files = append([]string(nil), f.Files...)
		change(&f)
		return f
	}
	for _, tc := range []struct {
		name  string
		facts guest.Facts
		plan  *v1alpha1.ImageManifest
		want  []string // the problems' summaries, in order
	}{
		{"baked server", baked, nil, nil},
		{"clean server to install", clean, plan, nil},
		{"Windows Server 2016", with(baked, func(f *guest.Facts) { f.Build = 14393 }), nil, []string{"Windows Server 2016 Is Not Supported"}},
		{"Windows 11", with(baked, func(f *guest.Facts) { f.Build = 22631 }), nil, []string{"Unsupported Windows Build"}},
		{"release for another build", with(clean, func(f *guest.Facts) { f.Build = 17763 }), plan, []string{"Release for Another Windows Build"}},
		{"kubelet running", with(baked, func(f *guest.Facts) { f.Services = []guest.Service{{Name: "kubelet", Running: true}} }), nil,
			[]string{"Kubernetes Already Installed"}},
		{"kubelet of another install", with(clean, func(f *guest.Facts) { f.Files = []string{`C:\k\kubelet.exe`} }), plan,
			[]string{"Kubernetes Already Installed"}},
		{"joined by kubewin", with(baked, func(f *guest.Facts) {
			f.Files = append(f.Files, `C:\ProgramData\kubewin\nodeboot\state.json`)
			f.Services = []guest.Service{{Name: "kubelet", Running: true}}
		}), nil, []string{"Already Joined"}},
		{"not baked", clean, nil, []string{"Server Not Baked"}},
		{"baked and asked to install", baked, plan, []string{"Server Already Baked"}},
		{"runtime there", with(clean, func(f *guest.Facts) { f.Services = []guest.Service{{Name: "containerd"}} }), plan,
			[]string{"Runtime Already Installed"}},
		{"everything at once", with(baked, func(f *guest.Facts) {
			f.ContainersFeature, f.RebootPending, f.PortsInUse = false, true, []int{10250, 10256}
		}), nil, []string{"Containers Feature Missing", "Restart Pending", "Port In Use", "Port In Use"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := Check(tc.facts, tc.plan)
			var got []string
			for _, p := range ps {
				got = append(got, p.Summary)
				if !strings.Contains(p.Detail, "WIN-1") {
					t.Errorf("%s: the detail does not name the server: %s", p.Summary, p.Detail)
				}
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("problems %q, want %q", got, tc.want)
			}
		})
	}
	// The fixes are named.
	for facts, fix := range map[*guest.Facts]string{
		{ComputerName: "WIN-1", Build: 20348, Files: []string{manifest}}:                          "Install-WindowsFeature -Name Containers",
		{ComputerName: "WIN-1", Build: 14393, ContainersFeature: true, Files: []string{manifest}}: "Windows Server 2019 (build 17763)",
	} {
		if ps := Check(*facts, nil); len(ps) == 0 || !strings.Contains(ps[0].Detail, fix) {
			t.Errorf("%+v: %+v does not say %q", facts, ps, fix)
		}
	}
}
