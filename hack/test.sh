#!/usr/bin/env bash
# make test's tests: the provider's acceptance tests under terraform and under OpenTofu, from one
# test binary compiled first, and every other package's tests beside them. The acceptance tests
# spend about half their time waiting on the processes they start (the CLIs, control planes,
# simulated machines), so the three side by side take far less than one after the other on
# two cores. Each pass starts its own ARM test server, and its clusters listen on ports and
# loopback addresses of their own.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${TESTBIN:-$root/.testbin}
cd "$root"
mkdir -p bin
log=$root/bin/test-opentofu.log
tflog=$root/bin/test-terraform.log

# The tests' temporary files go to a directory of this run's, which is removed at the end (an
# interrupted or leaking test would otherwise fill the disk run after run); what they left is listed.
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kubewin-test-XXXXXX")
terraform='' tofu=''
cleanup() {
	local left
	# An interrupted run ends the passes it started before their directory goes.
	for pid in $terraform $tofu; do kill "$pid" 2>/dev/null && wait "$pid"; done
	left=$(find "$tmp" -mindepth 1 -maxdepth 1 ! -name 'go-build*' ! -name provider-acceptance.test -printf '%f\n' | sort)
	[ -z "$left" ] || printf 'make test: the tests left these in their TMPDIR (removed now):\n%s\n' "$left"
	rm -rf "$tmp"
}
trap cleanup EXIT
export TMPDIR=$tmp

go test -c -o "$tmp/provider-acceptance.test" ./provider/internal/provider || exit 1

# The provider's acceptance tests are the longest package by far (a pass per CLI): both passes
# start first, from the compiled binary, and every other package runs beside them.
# Run in the background, the pass's process is the test binary itself ($! names it).
pass() { # pass LOG TERRAFORM_PATH PROVIDER_HOST
	cd provider/internal/provider && exec env TF_ACC=1 TF_ACC_TERRAFORM_PATH="$2" TF_ACC_PROVIDER_HOST="$3" \
		"$tmp/provider-acceptance.test" -test.count=1 -test.timeout=45m >"$1" 2>&1
}
echo "make test: the provider's acceptance tests run alongside, under terraform into $tflog and under OpenTofu into $log"
pass "$tflog" "${TF_ACC_TERRAFORM_PATH:-}" "${TF_ACC_PROVIDER_HOST:-registry.terraform.io}" &
terraform=$!
pass "$log" "$bin/tofu" registry.opentofu.org &
tofu=$!

pkgs=$(go list ./...) || exit 1
# shellcheck disable=SC2046 # one argument per package
TF_ACC=1 go test -timeout 45m $(grep -vxF github.com/kubewin/kubewin/provider/internal/provider <<<"$pkgs")
rc=$?
wait "$terraform"
tfrc=$?
wait "$tofu"
trc=$?
terraform='' tofu=
echo "==== the provider's acceptance tests under terraform (exit status $tfrc):"
cat "$tflog"
echo "==== the provider's acceptance tests under OpenTofu (exit status $trc):"
cat "$log"
[ "$rc" -eq 0 ] && [ "$tfrc" -eq 0 ] && [ "$trc" -eq 0 ]
