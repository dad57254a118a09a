//go:build tools

// Package terraform pins the terraform CLI built by `make testenv`.
package terraform

import _ "github.com/hashicorp/terraform"
