package provider

import (
	"context"
	"fmt"
	"net/url"
	"os"

	"github.com/hashicorp/terraform-plugin-framework/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/kubewin/kubewin/internal/capin"
	"github.com/kubewin/kubewin/provider/internal/azure"
)

// clusterConn is what nodes need of their cluster, local or existing.
type clusterConn struct {
	rest  *rest.Config
	facts clusterFacts
}

// connect reaches a cluster: the azure or local cluster named by cluster_id, or the
// provider's kubernetes connection.
func (d *providerData) connect(ctx context.Context, clusterID types.String) (*clusterConn, error) {
	if id := clusterID.ValueString(); azure.IsClusterID(id) {
		access, err := d.azureAccess(ctx, id)
		if err != nil {
			return nil, err
		}
		return existingCluster(ctx, access.REST())
	}
	if !clusterID.IsNull() && clusterID.ValueString() != "" {
		cp, err := d.local.Cluster(clusterID.ValueString())
		if err != nil {
			return nil, err
		}
		ca, err := cp.CACert()
		if err != nil {
			return nil, err
		}
		pin, err := capin.HashPEM(ca)
		if err != nil {
			return nil, err
		}
		cfg, err := cp.AdminRESTConfig()
		if err != nil {
			return nil, err
		}
		return &clusterConn{rest: cfg, facts: clusterFacts{
			Endpoint: cp.HostPort(), CAHash: pin, Version: cp.Version, ClusterCIDR: cp.Config.ClusterCIDR, ServiceCIDR: cp.Config.ServiceCIDR,
		}}, nil
	}
	if d.kube == nil {
		return nil, fmt.Errorf("no cluster to join: set cluster_id to a kubewin_cluster, or configure the provider's kubernetes block for an existing cluster")
	}
	return existingCluster(ctx, rest.CopyConfig(d.kube))
}

// localClusterGone reports whether the local cluster named by cluster_id no longer exists.
func (d *providerData) localClusterGone(id types.String) bool {
	if id.IsNull() || id.ValueString() == "" || azure.IsClusterID(id.ValueString()) {
		return false
	}
	_, err := d.local.Cluster(id.ValueString())
	return err != nil
}

// existingCluster learns what a NodeConfig needs from a cluster kubewin did not create: its
// endpoint, CA pin, version and networks (from kubeadm's kubeadm-config ConfigMap).
func existingCluster(ctx context.Context, cfg *rest.Config) (*clusterConn, error) {
	u, err := url.Parse(cfg.Host)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("API server URL %q is not an https://host:port URL", cfg.Host)
	}
	endpoint := u.Host
	if u.Port() == "" {
		endpoint += ":443"
	}
	ca := cfg.CAData
	if len(ca) == 0 && cfg.CAFile != "" {
		if ca, err = os.ReadFile(cfg.CAFile); err != nil {
			return nil, err
		}
	}
	pin, err := capin.HashPEM(ca)
	if err != nil {
		return nil, fmt.Errorf("the cluster CA: %w", err)
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	v, err := c.Discovery().ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("reach the cluster at %s: %w", cfg.Host, err)
	}
	cm, err := c.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, "kubeadm-config", metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("read kube-system/kubeadm-config for the cluster's pod and service networks: %w", err)
	}
	var cc struct {
		Networking struct {
			PodSubnet     string `json:"podSubnet"`
			ServiceSubnet string `json:"serviceSubnet"`
		} `json:"networking"`
	}
	if err := yaml.Unmarshal([]byte(cm.Data["ClusterConfiguration"]), &cc); err != nil || cc.Networking.PodSubnet == "" || cc.Networking.ServiceSubnet == "" {
		return nil, fmt.Errorf("kube-system/kubeadm-config names no podSubnet and serviceSubnet (%v): Windows nodes need both", err)
	}
	return &clusterConn{rest: cfg, facts: clusterFacts{
		Endpoint: endpoint, CAHash: pin, Version: v.GitVersion, ClusterCIDR: cc.Networking.PodSubnet, ServiceCIDR: cc.Networking.ServiceSubnet,
	}}, nil
}
