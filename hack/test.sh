#!/usr/bin/env bash
# make test's tests: every package under terraform (go test ./...) and, at the same time, the
# provider's acceptance tests under OpenTofu, from a test binary compiled first (go test's own
# build of that package then finds its compiled packages in the build cache). The acceptance tests
# spend about half their time waiting on the processes they start (the CLIs, control planes,
# simulated machines), so the two passes side by side take far less than one after the other on
# two cores. Each pass starts its own ARM test server, and its clusters listen on ports and
# loopback addresses of their own.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${TESTBIN:-$root/.testbin}
cd "$root"
mkdir -p bin
log=bin/test-opentofu.log

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

go test -c -o "$tmp/provider-acceptance.test" ./provider/internal/provider || exit 1
echo "make test: the provider's acceptance tests under OpenTofu run alongside, into $log"
(cd provider/internal/provider && TF_ACC=1 TF_ACC_TERRAFORM_PATH="$bin/tofu" TF_ACC_PROVIDER_HOST=registry.opentofu.org \
	"$tmp/provider-acceptance.test" -test.count=1 -test.timeout=45m) >"$log" 2>&1 &
tofu=$!

TF_ACC=1 go test -timeout 45m ./...
rc=$?
wait "$tofu"
trc=$?
echo "==== the provider's acceptance tests under OpenTofu (exit status $trc):"
cat "$log"
[ "$rc" -eq 0 ] && [ "$trc" -eq 0 ]
