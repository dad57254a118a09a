#!/usr/bin/env bash
# make test's tests: every package under terraform (go test ./...) and, at the same time, the
# provider's acceptance tests under OpenTofu, from the same compiled test binary. The acceptance
# tests spend about half their time waiting on the processes they start (the CLIs, control
# planes, simulated machines), so two passes side by side take far less than one after the other
# on two cores. Each pass starts its own ARM test server and clusters on ports and loopback
# addresses of its own.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${TESTBIN:-$root/.testbin}
cd "$root"
mkdir -p bin
log=bin/test-opentofu.log

go test -c -o bin/provider-acceptance.test ./provider/internal/provider || exit 1
echo "make test: the provider's acceptance tests under OpenTofu run alongside, into $log"
(cd provider/internal/provider && TF_ACC=1 TF_ACC_TERRAFORM_PATH="$bin/tofu" TF_ACC_PROVIDER_HOST=registry.opentofu.org \
	"$root/bin/provider-acceptance.test" -test.count=1 -test.timeout=45m) >"$log" 2>&1 &
tofu=$!

TF_ACC=1 go test -timeout 45m ./...
rc=$?
wait "$tofu"
trc=$?
echo "==== the provider's acceptance tests under OpenTofu (exit status $trc):"
cat "$log"
[ "$rc" -eq 0 ] && [ "$trc" -eq 0 ]
