package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubewin/kubewin/provider/internal/azureccm"
)

// A cluster's cloud-controller-manager runs its route controller unless
// --configure-cloud-routes=false (the flag's default is true); without one, none runs.
func TestCloudRoutesFact(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string // nil: no Deployment
		want bool
	}{
		{name: "no cloud-controller-manager"},
		{name: "kubewin's, routes off", args: []string{"--cloud-provider=azure", "--configure-cloud-routes=false"}},
		{name: "kubewin's, routes on", args: []string{"--cloud-provider=azure", "--configure-cloud-routes=true"}, want: true},
		{name: "the flag's default", args: []string{"--cloud-provider=azure", "--cluster-cidr=10.244.0.0/16"}, want: true},
		{name: "kubewin's controllers", args: []string{"--cloud-provider=azure", "--controllers=*,-cloud-node"}, want: true},
		{name: "route controller not run", args: []string{"--cloud-provider=azure", "--controllers=*,-route"}},
		{name: "only the service controller", args: []string{"--cloud-provider=azure", "--controllers=service"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset()
			if tc.args != nil {
				d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: azureccm.CloudControllerManager, Namespace: azureccm.Namespace},
					Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
						{Name: "ccm", Command: []string{"cloud-controller-manager"}, Args: tc.args}}}}}}
				if _, err := cs.AppsV1().Deployments(azureccm.Namespace).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			got, err := cloudRoutes(context.Background(), cs)
			if err != nil || got != tc.want {
				t.Errorf("cloudRoutes = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// pod_routes in the route table of a kubewin azure cluster whose route controller runs is
// refused, naming the table and the fix; another table of that cluster is not; with a cluster
// kubewin did not make, whose table it does not know, it is a warning.
func TestCheckCloudRoutes(t *testing.T) {
	const cluster = "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/acs/providers/Microsoft.Network/loadBalancers/acc-apiserver"
	const clusterTable = "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/acs/providers/Microsoft.Network/routeTables/acc-routetable"
	pool := func(clusterID, table string) *nodePoolModel {
		return &nodePoolModel{ClusterID: types.StringValue(clusterID), PodRoutes: &poolRoutesModel{RouteTable: types.StringValue(table)}}
	}
	for _, tc := range []struct {
		name   string
		m      *nodePoolModel
		routes bool
		want   diag.Severity // 0: nothing
		text   string
	}{
		{name: "the cluster's table", m: pool(cluster, strings.ToUpper(clusterTable)), routes: true, want: diag.SeverityError,
			text: "remove the pod_routes block"},
		{name: "route controller off", m: pool(cluster, clusterTable)},
		{name: "another table", m: pool(cluster, strings.Replace(clusterTable, "acc-routetable", "windows", 1)), routes: true},
		{name: "a cluster kubewin did not make", m: pool("default", clusterTable), routes: true, want: diag.SeverityWarning,
			text: "route controller"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			diags := checkCloudRoutes(tc.m, clusterFacts{CloudRoutes: tc.routes})
			switch {
			case tc.want == 0 && len(diags) > 0:
				t.Errorf("diagnostics %v, want none", diags)
			case tc.want != 0 && (len(diags) != 1 || diags[0].Severity() != tc.want || !strings.Contains(diags[0].Detail(), tc.text)):
				t.Errorf("diagnostics %v, want one of severity %v saying %q", diags, tc.want, tc.text)
			}
		})
	}
}
