// Package kubeversion knows which Kubernetes versions kubewin supports on Windows nodes and
// the version-skew rules between a node and its control plane.
package kubeversion

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/version"
)

// The range of kubelet minors kubewin renders for: the minors upstream still maintains, plus
// the older ones a newest-minor control plane still accepts as kubelets (n-3).
const (
	OldestMinor = 34
	NewestMinor = 37
)

// Parse parses a release version such as "v1.36.2" (the leading v is optional).
func Parse(s string) (*version.Version, error) {
	v, err := version.ParseSemantic(s)
	if err != nil {
		return nil, fmt.Errorf("%q is not a Kubernetes release version such as \"v1.%d.0\"", s, NewestMinor)
	}
	return v, nil
}

// Supported lists the supported minors as "1.N" strings, oldest first.
func Supported() []string {
	var out []string
	for m := OldestMinor; m <= NewestMinor; m++ {
		out = append(out, fmt.Sprintf("1.%d", m))
	}
	return out
}

// CheckSupported returns an error unless v is a supported node version.
func CheckSupported(v *version.Version) error {
	if v.Major() != 1 || v.Minor() < OldestMinor || v.Minor() > NewestMinor {
		//nolint:staticcheck // ST1005: the message starts with a proper noun.
		return fmt.Errorf("Kubernetes %s is not supported on kubewin nodes: use 1.%d to 1.%d", v, OldestMinor, NewestMinor)
	}
	return nil
}

// MaxKubeletSkew is how many minors a kubelet may trail the API server (Kubernetes' skew policy
// since 1.28).
const MaxKubeletSkew = 3

// CheckSkew returns an error when a node of version node may not join a control plane of
// version apiServer: the kubelet must not be newer, nor more than MaxKubeletSkew minors older.
func CheckSkew(node, apiServer *version.Version) error {
	switch {
	case node.Major() != apiServer.Major() || node.Minor() > apiServer.Minor():
		return fmt.Errorf("the node's Kubernetes %s is newer than the control plane's %s: a kubelet may not be newer than its API server; use an image "+
			"with Kubernetes 1.%d or older, or upgrade the control plane first", node, apiServer, apiServer.Minor())
	case apiServer.Minor()-node.Minor() > MaxKubeletSkew:
		return fmt.Errorf("the node's Kubernetes %s is more than %d minors older than the control plane's %s; use an image with Kubernetes 1.%d or newer",
			node, MaxKubeletSkew, apiServer, apiServer.Minor()-MaxKubeletSkew)
	}
	return nil
}
