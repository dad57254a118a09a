package v1alpha1

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

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

// ImageBuild reads the Windows build of a container image's os.version ("10.0.20348.2849" or
// "10.0.20348") and checks that it is a supported one.
func ImageBuild(osVersion string) (WindowsBuild, error) {
	parts := strings.Split(osVersion, ".")
	n, err := strconv.ParseUint(parts[min(2, len(parts)-1)], 10, 32)
	if (len(parts) != 3 && len(parts) != 4) || parts[0] != "10" || parts[1] != "0" || err != nil {
		return 0, fmt.Errorf("os.version %q is not a Windows version (10.0.<build>.<revision>): use a Windows image", osVersion)
	}
	b := WindowsBuild(n)
	if !slices.Contains(WindowsBuilds, b) {
		return b, fmt.Errorf("os.version %s is Windows build %d, which kubewin nodes do not run: use the image's variant for Windows Server "+
			"2019 (17763), 2022 (20348) or 2025 (26100)", osVersion, b)
	}
	return b, nil
}

// CheckImageBuild says whether a container image of os.version osVersion runs on a host of
// Windows build host. A process-isolated container shares the host's kernel, so its image must
// be of the host's build; under Hyper-V isolation it runs in a utility VM of its own, so an
// image of an older build (down-level) runs too, but never one of a newer build. Windows refuses
// the others with HCS_E_IMAGE_MISMATCH ("The container operating system does not match the
// host operating system"):
// https://learn.microsoft.com/en-us/virtualization/windowscontainers/deploy-containers/version-compatibility
func CheckImageBuild(host WindowsBuild, osVersion string, hyperV bool) error {
	b, err := ImageBuild(osVersion)
	switch {
	case err != nil:
		return err
	case b == host:
		return nil
	case hyperV && b < host:
		return nil
	case hyperV:
		return fmt.Errorf("the image is for Windows build %d (os.version %s), newer than the host's build %d (Windows Server %s): Hyper-V "+
			"isolation runs images of the host's build or older; use the image's variant for build %d", b, osVersion, host, host.Release(), host)
	}
	return fmt.Errorf("the image is for Windows build %d (os.version %s), the host runs build %d (Windows Server %s): a process-isolated "+
		"container must match the host's build (HCS_E_IMAGE_MISMATCH); use the image's variant for build %d (Windows Server %s)",
		b, osVersion, host, host.Release(), host, host.Release())
}
