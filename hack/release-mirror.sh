#!/usr/bin/env bash
# make release-mirror / make release-mirror-stop: a release mirror and an OCI registry on
# 127.0.0.1 (hack/demorelease) serving, in the upstream layouts, the Windows node binaries that
# make testenv builds (.testbin/windows), make build's bin/windows_amd64/nodeboot.exe and a pause
# image, so that
#   packer build -var-file=bin/release.pkrvars.hcl examples/packer/local.pkr.hcl
# bakes without a network. start runs it in the background (in place of one already running),
# waits until it serves and leaves bin/release.pkrvars.hcl pointing the template at it; stop
# stops it. Its log is bin/release-mirror.log.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
mirror=$root/bin/demorelease pidfile=bin/release-mirror.pid vars=bin/release.pkrvars.hcl log=bin/release-mirror.log

stop() {
	local pid
	if pid=$(cat "$pidfile" 2>/dev/null) && grep -qF "$mirror" "/proc/$pid/cmdline" 2>/dev/null; then
		kill "$pid" 2>/dev/null || true
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	fi
	rm -f "$pidfile" "$vars"
}

start() {
	stop
	modver() { (cd "tools/$1" && go list -m -f '{{.Version}}' "$2"); }
	local kube containerd cni nodeboot pid
	kube=$(modver kube k8s.io/kubernetes)
	containerd=$(modver winnode github.com/containerd/containerd/v2)
	cni=$(modver winnode github.com/containernetworking/plugins)
	nodeboot=$(bin/nodeboot version)
	nohup "$mirror" -bin .testbin/windows -nodeboot bin/windows_amd64/nodeboot.exe -vars "$vars" -kubernetes-version "$kube" \
		-containerd-version "${containerd#v}" -cni-plugins-version "${cni#v}" -nodeboot-version "$nodeboot" >"$log" 2>&1 &
	pid=$!
	echo "$pid" >"$pidfile"
	for _ in $(seq 300); do
		[ -s "$vars" ] && { cat "$log"; return 0; }
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	cat "$log" >&2
	echo "release-mirror: the mirror did not start" >&2
	stop
	exit 1
}

case ${1:-} in
start | stop) "$1" ;;
*) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
