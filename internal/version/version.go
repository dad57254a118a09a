// Package version holds the version of the kubewin binaries, set at release time with
// -ldflags "-X github.com/kubewin/kubewin/internal/version.Version=<version>".
package version

// Version is the release version without a leading v ("0.1.0"), or "0.1.0-dev" in a build
// from source.
var Version = "0.1.0-dev"
