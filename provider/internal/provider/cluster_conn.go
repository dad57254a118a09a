package provider

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/kubewin/kubewin/internal/capin"
	"github.com/kubewin/kubewin/internal/ipam"
	"github.com/kubewin/kubewin/provider/internal/azure"
	"github.com/kubewin/kubewin/provider/internal/azureccm"
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
		return existingCluster(ctx, access.REST(), clusterNetworks{})
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
			NodeCIDRMaskSize: cp.Config.NodeCIDRMaskSize,
		}}, nil
	}
	if d.kube == nil {
		return nil, fmt.Errorf("no cluster to join: set cluster_id to a kubewin_cluster, or configure the provider's kubernetes block for an " +
			"existing cluster")
	}
	return existingCluster(ctx, rest.CopyConfig(d.kube), d.kubeNetworks)
}

// connectError is the diagnostic of a failed connect: what could not be reached, through which
// attribute, and what to check. subject names the resource's cluster ("the pool's").
func connectError(clusterID types.String, subject string, err error) diag.Diagnostic {
	var nk *notKubeadmError
	if errors.As(err, &nk) {
		return diag.NewErrorDiagnostic("Not a kubeadm Cluster", nk.Error())
	}
	summary := "Cannot Reach " + subject + " Cluster"
	if id := clusterID.ValueString(); id != "" {
		return diag.NewAttributeErrorDiagnostic(path.Root("cluster_id"), summary, fmt.Sprintf("kubewin cannot reach the cluster cluster_id = %q "+
			"names: %s.\n\nCheck that the kubewin_cluster still exists (`terraform state list`) and that its API server is reachable from "+
			"where Terraform runs, at plan time too.", id, err))
	}
	return diag.NewErrorDiagnostic(summary, fmt.Sprintf("kubewin cannot reach the cluster of the provider's kubernetes block: %s.\n\n"+
		"Check kubernetes.host (or kubernetes.config_path and config_context), kubernetes.cluster_ca_certificate and the credential, and "+
		"that the API server is reachable from where Terraform runs, at plan time too. To join a kubewin_cluster, set cluster_id instead.", err))
}

// clusterNetworks are the pod and service networks of an existing cluster, as the provider's
// kubernetes block sets them (cluster_cidr, service_cidr); zero when it does not.
type clusterNetworks struct{ ClusterCIDR, ServiceCIDR string }

// notKubeadmError is an existing cluster without kubeadm's kubeadm-config ConfigMap (AKS, EKS,
// GKE, ...), whose networks the kubernetes block does not set either.
type notKubeadmError struct {
	host string
	err  error
}

func (e *notKubeadmError) Error() string {
	return fmt.Sprintf("The cluster at %s has no kube-system/kubeadm-config ConfigMap (%v). kubewin reads an existing cluster's pod and "+
		"service networks from it, and only clusters made by kubeadm have it: managed clusters such as AKS, EKS and GKE do not.\n\n"+
		"Set the cluster's networks in the provider's kubernetes block instead: cluster_cidr (the pod network, e.g. "+
		"`az aks show --query networkProfile.podCidr`) and service_cidr (the service network, `networkProfile.serviceCidr`).", e.host, e.err)
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
// endpoint, CA pin, version and networks (nets when set, else from kubeadm's kubeadm-config
// ConfigMap).
func existingCluster(ctx context.Context, cfg *rest.Config, nets clusterNetworks) (*clusterConn, error) {
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
	conn := &clusterConn{rest: cfg, facts: clusterFacts{Endpoint: endpoint, CAHash: pin, Version: v.GitVersion}}
	if conn.facts.ExternalCloudProvider, err = windowsCloudNodeManager(ctx, c); err != nil {
		return nil, err
	}
	if conn.facts.CloudRoutes, err = cloudRoutes(ctx, c); err != nil {
		return nil, err
	}
	if nets.ClusterCIDR != "" {
		conn.facts.ClusterCIDR, conn.facts.ServiceCIDR = nets.ClusterCIDR, nets.ServiceCIDR
		return conn, nil
	}
	cm, err := c.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, "kubeadm-config", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, &notKubeadmError{host: cfg.Host, err: err}
	}
	if err != nil {
		return nil, fmt.Errorf("read kube-system/kubeadm-config for the cluster's pod and service networks: %w", err)
	}
	kubeadm, err := kubeadmNetworks(cm.Data["ClusterConfiguration"])
	if err != nil {
		return nil, err
	}
	conn.facts.ClusterCIDR, conn.facts.ServiceCIDR, conn.facts.NodeCIDRMaskSize = kubeadm.ClusterCIDR, kubeadm.ServiceCIDR, kubeadm.NodeCIDRMaskSize
	return conn, nil
}

// kubeadmNetworks reads a kubeadm ClusterConfiguration's pod and service networks and its
// controller manager's node mask.
func kubeadmNetworks(clusterConfiguration string) (clusterFacts, error) {
	var cc struct {
		Networking struct {
			PodSubnet     string `json:"podSubnet"`
			ServiceSubnet string `json:"serviceSubnet"`
		} `json:"networking"`
		ControllerManager struct {
			ExtraArgs json.RawMessage `json:"extraArgs"`
		} `json:"controllerManager"`
	}
	if err := yaml.Unmarshal([]byte(clusterConfiguration), &cc); err != nil || cc.Networking.PodSubnet == "" || cc.Networking.ServiceSubnet == "" {
		return clusterFacts{}, fmt.Errorf("kube-system/kubeadm-config names no podSubnet and serviceSubnet (%v): Windows nodes need both; set "+
			"cluster_cidr and service_cidr in the provider's kubernetes block", err)
	}
	return clusterFacts{ClusterCIDR: cc.Networking.PodSubnet, ServiceCIDR: cc.Networking.ServiceSubnet,
		NodeCIDRMaskSize: nodeCIDRMaskSize(cc.ControllerManager.ExtraArgs)}, nil
}

// nodeCIDRMaskSize is the controller manager's --node-cidr-mask-size among a kubeadm
// ClusterConfiguration's controllerManager.extraArgs (v1beta4: a list of name and value;
// v1beta3: a map), or its default for IPv4, 24, when kubeadm passes none
// (https://kubernetes.io/docs/reference/command-line-tools-reference/kube-controller-manager/);
// 0 when the value does not parse.
func nodeCIDRMaskSize(extraArgs json.RawMessage) int {
	args := map[string]string{}
	var list []struct{ Name, Value string }
	if json.Unmarshal(extraArgs, &list) == nil {
		for _, a := range list {
			args[a.Name] = a.Value
		}
	} else {
		_ = json.Unmarshal(extraArgs, &args)
	}
	v := cmp.Or(args["node-cidr-mask-size-ipv4"], args["node-cidr-mask-size"])
	if v == "" {
		return ipam.DefaultNodeMaskSize
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0
	}
	return n
}

// windowsCloudNodeManager reports whether the cluster runs cloud-provider-azure's
// cloud-node-manager on Windows nodes (kubewin's azure clusters with the cloud provider, or
// its Helm chart): its DaemonSet kube-system/cloud-node-manager-windows. Such a cluster's
// kubelets must run with --cloud-provider=external, or its nodes never get their provider ID
// and the cloud provider leaves them out of load balancers ("the --cloud-provider flag must
// be set to external on every kubelet",
// https://kubernetes.io/docs/tasks/administer-cluster/running-cloud-controller/). A credential
// not allowed to read it is taken as no such DaemonSet: the kubelet_extra_args of the pool
// then say it.
func windowsCloudNodeManager(ctx context.Context, c kubernetes.Interface) (bool, error) {
	_, err := c.AppsV1().DaemonSets(azureccm.Namespace).Get(ctx, azureccm.CloudNodeManagerWin, metav1.GetOptions{})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err) || apierrors.IsForbidden(err):
		return false, nil
	}
	return false, fmt.Errorf("read %s/%s, the cloud provider's node manager for Windows nodes: %w", azureccm.Namespace,
		azureccm.CloudNodeManagerWin, err)
}

// cloudRoutes reports whether the cluster's cloud-controller-manager (the Deployment
// kube-system/cloud-controller-manager: kubewin's, or cloud-provider-azure's Helm chart's) runs
// its route controller: among --controllers (default *), and --configure-cloud-routes, whose default is true (k8s.io/cloud-provider,
// config/v1alpha1 defaults; cloud-provider-azure starts the controller on it alone:
// cmd/cloud-controller-manager/app/core.go startRouteController). Like windowsCloudNodeManager,
// a credential not allowed to read it is taken as no such Deployment.
func cloudRoutes(ctx context.Context, c kubernetes.Interface) (bool, error) {
	d, err := c.AppsV1().Deployments(azureccm.Namespace).Get(ctx, azureccm.CloudControllerManager, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsForbidden(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read %s/%s: %w", azureccm.Namespace, azureccm.CloudControllerManager, err)
	}
	for _, ct := range d.Spec.Template.Spec.Containers {
		args := append(slices.Clone(ct.Command), ct.Args...)
		if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--cloud-provider") }) {
			continue
		}
		on, listed := true, true
		for _, a := range args {
			if v, ok := strings.CutPrefix(a, "--configure-cloud-routes="); ok {
				on, _ = strconv.ParseBool(v)
			}
			// --controllers names the controllers that run: * is every one on by default,
			// -route turns it off.
			if v, ok := strings.CutPrefix(a, "--controllers="); ok {
				names := strings.Split(v, ",")
				listed = !slices.Contains(names, "-route") && (slices.Contains(names, "*") || slices.Contains(names, "route"))
			}
		}
		return on && listed, nil
	}
	return false, nil
}
