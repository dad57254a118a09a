//go:build tools

// Package docs pins the documentation generators run by `make generate`.
package docs

import _ "github.com/hashicorp/terraform-plugin-docs/cmd/tfplugindocs"
