#!/usr/bin/env bash
# make test's tests: the provider's acceptance tests under terraform and, at the same time, under
# OpenTofu, from one test binary compiled first, and every other package (go test). The provider's
# passes are the longest tests and start first, so that the other packages fill the time they
# spend waiting on the processes they start (the CLIs, control planes, simulated machines). Each
# pass starts its own ARM test server, and its clusters listen on ports and loopback addresses of
# their own.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${TESTBIN:-$root/.testbin}
cd "$root"
mkdir -p bin
tofulog=bin/test-opentofu.log
tflog=bin/test-terraform.log

# The tests' temporary files go to a directory of this run's, which is removed at the end (an
# interrupted or leaking test would otherwise fill the disk run after run); what they left is listed.
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kubewin-test-XXXXXX")
cleanup() {
	local left
	left=$(find "$tmp" -mindepth 1 -maxdepth 1 ! -name 'go-build*' ! -name provider-acceptance.test -printf '%f\n' | sort)
	[ -z "$left" ] || printf 'make test: the tests left these in their TMPDIR (removed now):\n%s\n' "$left"
	rm -rf "$tmp"
}
trap cleanup EXIT
export TMPDIR=$tmp

pkg=./provider/internal/provider
go test -c -o "$tmp/provider-acceptance.test" "$pkg" || exit 1
# acceptance CLI LOG [ENV...] runs the provider's acceptance tests under the CLI named, into LOG.
acceptance() {
	local cli=$1 log=$2
	shift 2
	(cd "$pkg" && env TF_ACC=1 TF_ACC_TERRAFORM_PATH="$bin/$cli" "$@" "$tmp/provider-acceptance.test" -test.count=1 -test.timeout=45m) >"$log" 2>&1
}
echo "make test: the provider's acceptance tests run under terraform and OpenTofu alongside, into $tflog and $tofulog"
acceptance terraform "$tflog" &
terraform=$!
acceptance tofu "$tofulog" TF_ACC_PROVIDER_HOST=registry.opentofu.org &
tofu=$!

TF_ACC=1 go test -timeout 45m $(go list ./... | grep -vx "$(go list "$pkg")")
rc=$?
status=0
for pass in "terraform $terraform $tflog" "OpenTofu $tofu $tofulog"; do
	read -r name pid file <<<"$pass"
	wait "$pid"
	prc=$?
	echo "==== the provider's acceptance tests under $name (exit status $prc):"
	cat "$file"
	[ "$prc" -eq 0 ] || status=1
done
[ "$rc" -eq 0 ] && [ "$status" -eq 0 ]
