package provider

import "testing"

// The controller manager's node mask is read from a kubeadm ClusterConfiguration of either
// version; without the flag it is the controller manager's default.
func TestKubeadmNetworks(t *testing.T) {
	const nets = "networking:\n  podSubnet: 10.244.0.0/16\n  serviceSubnet: 10.96.0.0/12\n"
	for doc, want := range map[string]int{
		"controllerManager:\n  extraArgs:\n  - name: node-cidr-mask-size\n    value: \"26\"\n": 26, // v1beta4: a list
		"controllerManager:\n  extraArgs:\n    node-cidr-mask-size: \"25\"\n":                  25, // v1beta3: a map
		"controllerManager:\n  extraArgs:\n    node-cidr-mask-size-ipv4: \"27\"\n":             27,
		"controllerManager: {}\n": 24,
		"":                        24,
		"controllerManager:\n  extraArgs:\n  - name: node-cidr-mask-size\n    value: twenty\n": 0,
	} {
		got, err := kubeadmNetworks(nets + doc)
		if err != nil || got.ClusterCIDR != "10.244.0.0/16" || got.ServiceCIDR != "10.96.0.0/12" || got.NodeCIDRMaskSize != want {
			t.Errorf("%q: %+v, %v; want mask %d", doc, got, err, want)
		}
	}
	if _, err := kubeadmNetworks("controllerManager: {}\n"); err == nil {
		t.Error("a ClusterConfiguration without networks was accepted")
	}
}
