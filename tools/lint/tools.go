//go:build tools

// Package lint pins the linter run by `make lint`.
package lint

import _ "github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
