// Package v1alpha1 holds version v1alpha1 of the two documents the kubewin binaries exchange:
//
//   - NodeConfig: what the provider hands a Windows node (cluster endpoint, CA pins, bootstrap
//     token, CIDRs, node labels and taints, network mode, runtime, kube-proxy and kubelet settings).
//   - ImageManifest: what a baked image contains (Windows build, Kubernetes version, runtime,
//     pause image, every file with its sha256).
//
// Both are plain JSON/YAML documents with apiVersion "kubewin.io/v1alpha1". Decoding is strict
// (package api), defaults are filled by Default, and Validate reports every problem with its
// field path.
package v1alpha1

// GroupVersion is the apiVersion of every document in this package.
const GroupVersion = "kubewin.io/v1alpha1"

// Kinds of document in this package.
const (
	KindNodeConfig    = "NodeConfig"
	KindImageManifest = "ImageManifest"
)
