package acsmodel

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// What each published model asks that kubewin cannot do; the others convert.
var rejected = map[string][]string{
	"acs-engine/kubernetes-hyperv.json":                  {"kubernetesConfig.apiServerConfig"},
	"acs-engine/kubernetes-manageddisks.json":            {"agentPoolProfiles[0].diskSizesGB"},
	"acs-engine/kubernetes-sadisks.json":                 {"agentPoolProfiles[0].diskSizesGB"},
	"aks-engine/kubernetes-hyperv.json":                  {"networkPlugin: is \"azure\""},
	"aks-engine/kubernetes-manageddisks.json":            {"agentPoolProfiles[0].diskSizesGB"},
	"aks-engine/kubernetes-sadisks.json":                 {"agentPoolProfiles[0].diskSizesGB"},
	"aks-engine/kubernetes-pause-image.json":             {"networkPlugin: is \"azure\""},
	"aks-engine/kubernetes-windows-tls.json":             {"networkPlugin: is \"azure\""},
	"aks-engine/kubernetes-windsr.json":                  {"networkPlugin: is \"azure\""},
	"aks-engine/kubernetes-hybrid.azure-containerd.json": {"networkPlugin: is \"azure\""},
	"aks-engine/kubernetes-custom-vhd.json":              {},
	"guides/windows.json":                                {"keyData: is not an OpenSSH public key"},
}

// acs-engine's and aks-engine's published Windows api models convert as published, their
// secrets (an administrator password, often a service principal secret) dropped with a warning
// that names each field and never its value, or are rejected naming only what kubewin cannot do.
func TestPublishedModels(t *testing.T) {
	files, err := filepath.Glob("testdata/*/*.json")
	if err != nil || len(files) < 25 {
		t.Fatalf("%d test models (%v): testdata is incomplete", len(files), err)
	}
	for _, f := range files {
		name, _ := filepath.Rel("testdata", f)
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var secrets struct {
				Properties struct {
					WindowsProfile          struct{ AdminPassword string }
					ServicePrincipalProfile struct{ Secret string }
				}
			}
			if err := json.Unmarshal(data, &secrets); err != nil {
				t.Fatal(err)
			}
			password, spSecret := secrets.Properties.WindowsProfile.AdminPassword, secrets.Properties.ServicePrincipalProfile.Secret
			if password == "" {
				t.Fatal("the published model has no administrator password: testdata is not as published")
			}
			res, err := Convert(data)
			echoes := func(what string) {
				for _, secret := range []string{password, spSecret} {
					if secret != "" && strings.Contains(what, secret) {
						t.Errorf("%q echoes a secret of the model", what)
					}
				}
			}
			if want := rejected[name]; len(want) > 0 {
				if err == nil {
					t.Fatalf("converted, want %v rejected", want)
				}
				for _, w := range want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error lacks %q:\n%v", w, err)
					}
				}
				if strings.Contains(err.Error(), "adminPassword") || strings.Contains(err.Error(), "secret") {
					t.Errorf("a secret is among the reasons: %v", err)
				}
				echoes(err.Error())
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			echoes(fmt.Sprintf("%+v", res))
			if !slices.ContainsFunc(res.Warnings, func(w string) bool {
				return strings.HasPrefix(w, "properties.windowsProfile.adminPassword: dropped") && strings.Contains(w, "azure.admin_password_wo")
			}) {
				t.Errorf("no warning names the dropped password and admin_password_wo: %v", res.Warnings)
			}
			if spSecret != "" && !slices.ContainsFunc(res.Warnings, func(w string) bool {
				return strings.HasPrefix(w, "properties.servicePrincipalProfile.secret: dropped")
			}) {
				t.Errorf("no warning names the dropped service principal secret: %v", res.Warnings)
			}
			var model struct {
				Properties struct {
					AgentPoolProfiles []struct {
						Name, OSType string
						Count        int
					}
				}
			}
			if err := json.Unmarshal(data, &model); err != nil {
				t.Fatal(err)
			}
			var pools []string
			for _, p := range model.Properties.AgentPoolProfiles {
				if p.OSType == "Windows" {
					pools = append(pools, p.Name)
				}
			}
			var got []string
			for _, p := range res.WindowsPools {
				got = append(got, p.Name)
				if len(p.NodeNamePrefix) > 9 || p.AdminUsername != "azureuser" {
					t.Errorf("pool %+v", p)
				}
			}
			if !slices.Equal(got, pools) {
				t.Errorf("Windows pools %v, want %v", got, pools)
			}
			if res.Cluster.LinuxPool == nil && !slices.ContainsFunc(res.Warnings, func(w string) bool { return strings.Contains(w, "no Linux agent pool") }) {
				t.Error("no warning about the missing Linux pool")
			}
		})
	}
}

// The guides' windows.json, with its placeholders filled in, as examples/acs-engine has it.
func TestGuidesModel(t *testing.T) {
	data, err := os.ReadFile("../../../examples/acs-engine/windows.json")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Convert(data)
	if err != nil {
		t.Fatal(err)
	}
	c := res.Cluster
	if c.Name != "kubernetes-windows" || c.DNSPrefix != "kubernetes-windows" || c.ControlPlanes.Count != 3 ||
		c.ControlPlanes.VMSize != "Standard_D2_v3" ||
		c.KubernetesVersion != "" || c.OrchestratorVersion != "1.11.1" || c.AdminUsername != "azure" {
		t.Errorf("cluster %+v", c)
	}
	if len(res.WindowsPools) != 1 {
		t.Fatalf("pools %+v", res.WindowsPools)
	}
	if p := res.WindowsPools[0]; p.Name != "windowspool1" || p.NodeNamePrefix != "windowspo" || p.NodeCount != 3 || p.VMSize != "Standard_D2_v3" ||
		p.AdminUsername != "azureuser" {
		t.Errorf("pool %+v", p)
	}
	for _, w := range []string{
		"orchestratorVersion: Kubernetes 1.11.1 is not supported",
		"agentPoolProfiles[0].availabilityProfile: AvailabilitySet",
		"networkPlugin: the model names no network plugin",
		"agentPoolProfiles: the model has no Linux agent pool",
		"windowsProfile.adminPassword: dropped: it holds a secret",
	} {
		if !slices.ContainsFunc(res.Warnings, func(s string) bool { return strings.Contains(s, w) }) {
			t.Errorf("no warning %q in %v", w, res.Warnings)
		}
	}
}

func model(props string) []byte {
	return []byte(`{"apiVersion": "vlabs", "properties": {"masterProfile": {"count": 1, "dnsPrefix": "acs1", "vmSize": "Standard_D2_v3"},
		"linuxProfile": {"adminUsername": "azureuser", "ssh": {"publicKeys": [{"keyData": ""}]}}` + props + `}}`)
}

// Each way of handling a field, on a field of each kind.
func TestFields(t *testing.T) {
	const winPool = `, "agentPoolProfiles": [{"name": "win", "count": 2, "vmSize": "Standard_D4s_v5", ` +
		`"osType": "Windows", "availabilityProfile": "VirtualMachineScaleSets"}]`
	for _, tt := range []struct {
		name, props string
		error       []string // rejected or refused fields
		warning     []string
		check       func(*Result) bool
	}{
		{name: "mapped", props: `, "orchestratorProfile": {"orchestratorType": "Kubernetes", "orchestratorVersion": "1.37.1", "kubernetesConfig": {
			"networkPlugin": "kubenet", "networkPolicy": "none", "containerRuntime": "containerd", "clusterSubnet": "10.200.0.0/16",
				"serviceCidr": "10.0.0.0/16",
			"dnsServiceIP": "10.0.0.10", "maxPods": 60, "privateCluster": {"enabled": true}, "kubeletConfig": {"--image-gc-high-threshold": "80"}}},
			"agentPoolProfiles": [{"name": "linux", "count": 3, "vmSize": "Standard_D2s_v5"},
			  {"name": "windowspool", "count": 4, "vmSize": "Standard_D4s_v5", "osType": "Windows", "scaleSetPriority": "Spot", "spotMaxPrice": 0.5,
			   "customNodeLabels": {"team": "a"}, "availabilityZones": ["1", "2"], "osDiskSizeGB": 128,
			   "imageReference": {"name": "ws2022", "resourceGroup": "images", "subscriptionId": "sub", "gallery": "g", "version": "1.0.0"}}],
			"windowsProfile": {"adminUsername": "winadmin", "WindowsSku": "2022-datacenter-core",
				"windowsPauseImageURL": "mcr.microsoft.com/oss/kubernetes/pause:3.9"}`,
			check: func(r *Result) bool {
				c, p := r.Cluster, r.WindowsPools[0]
				return c.KubernetesVersion == "1.37.1" && c.ClusterCIDR == "10.200.0.0/16" && c.ServiceCIDR == "10.0.0.0/16" && c.APIServerAccess == "internal" &&
					c.LinuxPool != nil && c.LinuxPool.Count == 3 && r.WindowsImage.Runtime == "containerd" && r.WindowsImage.SKU == "2022-datacenter-core" &&
					r.WindowsImage.PauseImage != "" && p.Priority == "Spot" && *p.MaxBidPrice == 0.5 && p.Labels["team"] == "a" && p.MaxPods == 60 &&
					p.KubeletExtraArgs["image-gc-high-threshold"] == "80" && p.AdminUsername == "winadmin" && p.OSDiskSizeGB == 128 &&
					p.ImageID == "/subscriptions/sub/resourceGroups/images/providers/Microsoft.Compute/galleries/g/images/ws2022/versions/1.0.0" &&
					p.NodeNamePrefix == "windowspo" && slices.Equal(p.Zones, []string{"1", "2"})
			}},
		{name: "secrets", props: `, "servicePrincipalProfile": {"clientId": "x", "secret": "s3cr3t"}, "certificateProfile": {"caPrivateKey": "KEY"},
			"orchestratorProfile": {"kubernetesConfig": {"etcdEncryptionKey": "abc"}}`,
			warning: []string{"servicePrincipalProfile.secret: dropped: it holds a secret", "certificateProfile.caPrivateKey: dropped: it holds a secret",
				"kubernetesConfig.etcdEncryptionKey: dropped: it holds a secret"},
			check: func(r *Result) bool {
				s := fmt.Sprintf("%+v", r)
				return !strings.Contains(s, "s3cr3t") && !strings.Contains(s, `KEY"`) && !strings.Contains(s, "abc")
			}},
		{name: "behaviour-changing",
			props: winPool + `, "orchestratorProfile": {"kubernetesConfig": {"networkPlugin": "azure", "networkPolicy": "calico", "enableRbac": false,
			"kubeProxyMode": "ipvs", "enablePodSecurityPolicy": true, "dnsServiceIP": "10.0.0.10"}}, "aadProfile": {"serverAppID": "x"},
			"featureFlags": {"enableIPv6DualStack": true}, "windowsProfile": {"windowsRuntimes": {"default": "sandboxed"}}`,
			error: []string{"networkPlugin: is \"azure\"", "networkPolicy: is \"calico\"", "enableRbac: is false", "kubeProxyMode: is \"ipvs\"",
				"enablePodSecurityPolicy",
				"dnsServiceIP: is 10.0.0.10: kubeadm's cluster DNS address is the service network's tenth address, 10.96.0.10", "aadProfile",
				"enableIPv6DualStack", `windowsRuntimes.default: is "sandboxed": aks-engine's windowsRuntimes.default is process or hyperv`}},
		{name: "hyperv runtimes",
			props: winPool + `, "orchestratorProfile": {"kubernetesConfig": {"networkPlugin": "kubenet", "containerRuntime": "containerd"}},
			"windowsProfile": {"windowsRuntimes": {"default": "process", "hypervRuntimes": [{"buildNumber": "17763"}, {"buildNumber": "19041"}]}}`,
			warning: []string{"windowsProfile.windowsRuntimes.hypervRuntimes: the handlers runhcs-wcow-hypervisor-<build> for builds 17763, 19041 " +
				"become kubewin's one Hyper-V handler"},
			check: func(r *Result) bool { return r.WindowsImage.HyperVIsolation && r.WindowsImage.Runtime == "containerd" }},
		{name: "hyperv default",
			props: winPool + `, "orchestratorProfile": {"kubernetesConfig": {"networkPlugin": "kubenet"}},
			"windowsProfile": {"windowsRuntimes": {"default": "hyperv"}}`,
			warning: []string{"windowsProfile.windowsRuntimes.default: is \"hyperv\": kubewin's Windows nodes run a pod without a RuntimeClass " +
				"process-isolated"},
			check: func(r *Result) bool { return r.WindowsImage.HyperVIsolation }},
		{name: "process runtimes", props: winPool + `, "orchestratorProfile": {"kubernetesConfig": {"networkPlugin": "kubenet"}},
			"windowsProfile": {"windowsRuntimes": {"default": "process", "hypervRuntimes": []}}`,
			check: func(r *Result) bool { return !r.WindowsImage.HyperVIsolation }},
		{name: "hyperv on docker",
			props: winPool + `, "orchestratorProfile": {"kubernetesConfig": {"networkPlugin": "kubenet", "containerRuntime": "docker"}},
			"windowsProfile": {"windowsRuntimes": {"hypervRuntimes": [{"buildNumber": "17763"}]}}`,
			error: []string{"windowsProfile.windowsRuntimes: asks for Hyper-V isolation, which kubewin (like aks-engine) configures for containerd only"}},
		{name: "ignored",
			props: winPool + `, "orchestratorProfile": {"kubernetesConfig": {"networkPlugin": "kubenet", "addons": [{"name": "tiller", "enabled": true}],
			"useManagedIdentity": true, "windowsContainerdURL": "https://x"}}, "windowsProfile": {"enableAutomaticUpdates": true, "sshEnabled": true},
				"extensionProfiles": [{"name": "winrm"}]`,
			warning: []string{"kubernetesConfig.addons: ignored", "kubernetesConfig.useManagedIdentity: ignored",
				"kubernetesConfig.windowsContainerdURL: ignored",
				"windowsProfile.enableAutomaticUpdates: ignored", "windowsProfile.sshEnabled: ignored", "extensionProfiles: ignored"}},
		{name: "unknown",
			props:   winPool + `, "orchestratorProfile": {"kubernetesConfig": {"networkPlugin": "kubenet", "frobnicate": 1}}, "surprise": {"a": 1}`,
			warning: []string{"kubernetesConfig.frobnicate: not a field", "properties.surprise: not a field"}},
		{name: "not kubernetes", props: `, "orchestratorProfile": {"orchestratorType": "DCOS"}`, error: []string{"orchestratorType: is \"DCOS\""}},
		{name: "two linux pools", props: `, "agentPoolProfiles": [{"name": "a", "count": 1, "vmSize": "x"}, {"name": "b", "count": 1, "vmSize": "x"}]`,
			error: []string{"a second Linux agent pool (\"b\")"}},
		{name: "bad masters", props: `, "orchestratorProfile": {"orchestratorRelease": "1.37"}`,
			warning: []string{"orchestratorRelease: \"1.37\" names a minor release without its patch"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Convert(model(tt.props))
			if len(tt.error) > 0 {
				if err == nil {
					t.Fatalf("converted: %+v", res)
				}
				for _, w := range tt.error {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error lacks %q:\n%v", w, err)
					}
				}
				for _, secret := range []string{"s3cr3t", "KEY\"", "abc"} {
					if strings.Contains(err.Error(), secret) {
						t.Errorf("the error echoes a secret: %v", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.warning {
				if !slices.ContainsFunc(res.Warnings, func(s string) bool { return strings.Contains(s, w) }) {
					t.Errorf("no warning %q in %v", w, res.Warnings)
				}
			}
			if tt.check != nil && !tt.check(res) {
				t.Errorf("result %+v %+v %+v", res.Cluster, res.WindowsPools, res.WindowsImage)
			}
		})
	}
	if _, err := Convert([]byte(`{"apiVersion": "2017-07-01", "properties": {}}`)); err == nil || !strings.Contains(err.Error(),
		"reads vlabs api models") {
		t.Errorf("another apiVersion: %v", err)
	}
	if _, err := Convert([]byte(`{`)); err == nil {
		t.Error("broken JSON converted")
	}
}
