//go:build tools

// Package tofu pins the tofu CLI built by `make testenv`.
package tofu

import _ "github.com/opentofu/opentofu/cmd/tofu"
