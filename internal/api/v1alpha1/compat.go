package v1alpha1

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubewin/kubewin/internal/kubeversion"
)

// CheckCompatible returns the problems that keep a node configured by c from running image m:
// another runtime than the image's, or a Kubernetes version outside the control plane's skew.
func CheckCompatible(c *NodeConfig, m *ImageManifest) field.ErrorList {
	var errs field.ErrorList
	if c.Runtime.Name != m.Runtime.Name {
		errs = append(errs, field.Invalid(field.NewPath("runtime", "name"), c.Runtime.Name,
			"the image was baked with the "+string(m.Runtime.Name)+" runtime: set runtime.name to "+string(m.Runtime.Name)+" or use an image "+
				"baked with "+string(c.Runtime.Name)))
	}
	if c.Cluster.KubernetesVersion == "" {
		return errs
	}
	node, err1 := kubeversion.Parse(m.KubernetesVersion)
	cluster, err2 := kubeversion.Parse(c.Cluster.KubernetesVersion)
	if err1 != nil || err2 != nil {
		return errs // reported by each document's own validation
	}
	if err := kubeversion.CheckSkew(node, cluster); err != nil {
		errs = append(errs, field.Invalid(field.NewPath("cluster", "kubernetesVersion"), c.Cluster.KubernetesVersion, err.Error()))
	}
	return errs
}
