//go:build tools

// Package release pins the release tool run by `make release-check`.
package release

import _ "github.com/goreleaser/goreleaser/v2"
