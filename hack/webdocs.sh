#!/usr/bin/env bash
# Renders the Packer plugin's docs (packer-sdc renderdocs expands the @include lines with the
# partials generated from the config structs) into .web-docs/, the layout the Packer
# integrations site reads: README.md and components/<type>/<name>/README.md.
set -euo pipefail
cd "$(dirname "$0")/../packer/packer-plugin-kubewin"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
packer-sdc renderdocs -src docs -partials docs-partials/ -dst "$tmp/"
out=.web-docs
rm -rf "$out/components" && mkdir -p "$out/components"
cp "$tmp/README.md" "$out/README.md"
page() { # page SRC TYPE NAME: the page without its front matter
	mkdir -p "$out/components/$2/$3"
	awk 'NR==1 && /^---$/ {fm=1; next} fm && /^---$/ {fm=0; next} !fm' "$tmp/$1" | sed '/./,$!d' >"$out/components/$2/$3/README.md"
}
page datasources/release.mdx data-source release
page provisioners/node.mdx provisioner node
page builders/local.mdx builder local
