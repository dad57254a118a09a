package simkubelet

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/kubewin/kubewin/internal/sim/simcloud"
)

// Machine is what the simulated kubelet needs of the machine it stands on.
type Machine struct {
	// ReadFile reads a file of the machine by its Windows path.
	ReadFile func(win string) ([]byte, error)
	// Labels are the labels a kubelet sets on its own Node on this machine (os, arch, Windows build).
	Labels map[string]string
	// Info is what the node reports about itself.
	Info corev1.NodeSystemInfo
	Out  io.Writer
	// MetadataEndpoint is the machine's instance metadata service (Kubelet.MetadataEndpoint).
	MetadataEndpoint string
	// Sandbox is the machine's container runtime (Kubelet.Sandbox).
	Sandbox SandboxRuntime
	// Dial opens the kubelet's connections (rest.Config.Dial); nil: the host's own.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
}

// FromCommandLine builds the simulated kubelet from the command line nodeboot wrote for
// kubelet.exe, reading the files it names as the real kubelet would: the kubeconfig (and the
// client certificate it points at), the KubeletConfiguration (maxPods, registerWithTaints),
// --hostname-override, --node-ip, --node-labels and --cloud-provider; and it refuses to start
// on image credential providers the kubelet would not load (CheckCredentialProviders).
func FromCommandLine(args []string, m Machine) (*Kubelet, error) {
	fs := flag.NewFlagSet("kubelet", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var kubeconfig, config, hostname, nodeIP, nodeLabels, cloudProvider string
	fs.StringVar(&kubeconfig, "kubeconfig", "", "")
	fs.StringVar(&config, "config", "", "")
	fs.StringVar(&hostname, "hostname-override", "", "")
	fs.StringVar(&nodeIP, "node-ip", "", "")
	fs.StringVar(&nodeLabels, "node-labels", "", "")
	fs.StringVar(&cloudProvider, "cloud-provider", "", "")
	var credentialConfig, credentialBinDir string
	fs.StringVar(&credentialConfig, "image-credential-provider-config", "", "")
	fs.StringVar(&credentialBinDir, "image-credential-provider-bin-dir", "", "")
	// Every other flag the kubelet takes is accepted and has no effect here.
	for _, a := range args {
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch {
		case fs.Lookup(name) != nil:
		case hasValue:
			fs.String(name, "", "")
		default:
			fs.Bool(name, false, "") // --windows-service and other switches
		}
	}
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("kubelet command line: %w", err)
	}
	if kubeconfig == "" || config == "" || hostname == "" || nodeIP == "" {
		return nil, fmt.Errorf("kubelet command line %q lacks --kubeconfig, --config, --hostname-override or --node-ip", args)
	}
	if credentialConfig != "" || credentialBinDir != "" {
		if err := CheckCredentialProviders("windows", credentialConfig, credentialBinDir, m.ReadFile); err != nil {
			return nil, err
		}
	}
	ip, err := netip.ParseAddr(nodeIP)
	if err != nil {
		return nil, fmt.Errorf("kubelet --node-ip: %w", err)
	}
	cfg, err := clientFor(kubeconfig, m.ReadFile)
	if err != nil {
		return nil, err
	}
	cfg.Dial = m.Dial
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	raw, err := m.ReadFile(config)
	if err != nil {
		return nil, fmt.Errorf("kubelet --config: %w", err)
	}
	var kc kubeletv1beta1.KubeletConfiguration
	if err := yaml.UnmarshalStrict(raw, &kc); err != nil {
		return nil, fmt.Errorf("kubelet configuration %s: %w", config, err)
	}
	labels := map[string]string{corev1.LabelHostname: hostname}
	for k, v := range m.Labels {
		labels[k] = v
	}
	if nodeLabels != "" {
		for _, kv := range strings.Split(nodeLabels, ",") {
			k, v, _ := strings.Cut(kv, "=")
			labels[k] = v
		}
	}
	taints := kc.RegisterWithTaints
	var annotations map[string]string
	if cloudProvider == "external" {
		// With an external cloud provider the kubelet records its --node-ip, which the cloud
		// provider must find among the machine's addresses (KEP-3705).
		annotations = map[string]string{simcloud.ProvidedNodeIPAnnotation: nodeIP}
	}
	maxPods := kc.MaxPods
	if maxPods == 0 {
		maxPods = 110
	}
	return &Kubelet{
		Client: client, NodeIP: ip, MaxPods: maxPods, Info: m.Info, Out: m.Out, ExternalCloudProvider: cloudProvider == "external",
		Config: cfg, MetadataEndpoint: m.MetadataEndpoint, Sandbox: m.Sandbox,
		Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: hostname, Labels: labels, Annotations: annotations},
			Spec: corev1.NodeSpec{Taints: taints}},
	}, nil
}

// clientFor is the client configuration with the credential of a kubeconfig on the machine.
func clientFor(path string, read func(string) ([]byte, error)) (*rest.Config, error) {
	raw, err := read(path)
	if err != nil {
		return nil, fmt.Errorf("kubelet --kubeconfig: %w", err)
	}
	kc, err := clientcmd.Load(raw)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	// The files it names are Windows paths of the machine: read them into the config.
	for name, ai := range kc.AuthInfos {
		for _, f := range []struct {
			path *string
			data *[]byte
		}{{&ai.ClientCertificate, &ai.ClientCertificateData}, {&ai.ClientKey, &ai.ClientKeyData}} {
			if *f.path == "" {
				continue
			}
			if *f.data, err = read(*f.path); err != nil {
				return nil, fmt.Errorf("kubeconfig %s, user %s: %w", path, name, err)
			}
			*f.path = ""
		}
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*kc, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	cfg.QPS, cfg.Burst = 20, 40
	// Protobuf, the kubelet's default --kube-api-content-type.
	cfg.AcceptContentTypes, cfg.ContentType = runtime.ContentTypeProtobuf+","+runtime.ContentTypeJSON, runtime.ContentTypeProtobuf
	return cfg, nil
}
