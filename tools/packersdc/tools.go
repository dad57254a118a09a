//go:build tools

package tools

import _ "github.com/hashicorp/packer-plugin-sdk/cmd/packer-sdc"
