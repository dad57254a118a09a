//go:build tools

// Package packer pins the packer CLI built by `make testenv`.
package packer

import _ "github.com/hashicorp/packer"
