#!/usr/bin/env bash
# Builds the real programs kubewin's tests and local backend run (and the documentation, release
# and lint tools), from Go modules, into
# $TESTBIN (default .testbin/). Each tool is rebuilt only when its pinned module changes:
# a stamp file records the sha256 of the go.mod/go.sum it was built from.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${TESTBIN:-$root/.testbin}
mkdir -p "$bin"

stamp() { cat "$root/tools/$1/go.mod" "$root/tools/$1/go.sum" | sha256sum | cut -c1-16; }
fresh() { # fresh TOOLDIR BIN... : true when every binary exists and the stamp matches
	local dir=$1; shift
	[ "$(cat "$bin/.stamp-$dir" 2>/dev/null)" = "$(stamp "$dir")" ] || return 1
	for b in "$@"; do [ -x "$bin/$b" ] || return 1; done
}
mark() { stamp "$1" >"$bin/.stamp-$1"; }
modver() { (cd "$root/tools/$1" && go list -m -f '{{.Version}}' "$2"); }

build_kube() {
	local v; v=$(modver kube k8s.io/kubernetes)
	if ! fresh kube kube-apiserver kube-controller-manager kube-scheduler kubeadm kubectl etcd; then
		local minor=${v#v1.}; minor=${minor%%.*}
		local pkg=k8s.io/component-base/version
		# A constant build date keeps rebuilds no-ops; kubeadm needs real version fields.
		local ld="-s -w -X $pkg.gitVersion=$v -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean -X $pkg.buildDate=2000-01-01T00:00:00Z"
		echo "testenv: building kubernetes $v (kube-apiserver, kube-controller-manager, kube-scheduler, kubeadm, kubectl) and etcd"
		(cd "$root/tools/kube" && go build -trimpath -ldflags "$ld" -o "$bin/" \
			k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
			k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubeadm k8s.io/kubernetes/cmd/kubectl &&
			go build -trimpath -ldflags "-s -w" -o "$bin/etcd" go.etcd.io/etcd/server/v3)
		mark kube
	fi
	# The kubelet's own credential provider config loader (tools/kube/credentialprovidercheck) has
	# a stamp of its own, the module's and its source's: a change of it rebuilds only it.
	local want; want="$(stamp kube)$(cat "$root"/tools/kube/credentialprovidercheck/*.go | sha256sum | cut -c1-16)"
	[ "$(cat "$bin/.stamp-credential-provider-check" 2>/dev/null)" = "$want" ] && [ -x "$bin/credential-provider-check" ] && return
	echo "testenv: building credential-provider-check (the kubelet's credential provider config loader, kubernetes $v)"
	(cd "$root/tools/kube" && go build -trimpath -ldflags "-s -w" -o "$bin/credential-provider-check" ./credentialprovidercheck)
	echo "$want" >"$bin/.stamp-credential-provider-check"
}

build_packer() {
	fresh packer packer && return
	local v; v=$(modver packer github.com/hashicorp/packer)
	echo "testenv: building packer $v"
	(cd "$root/tools/packer" && go build -trimpath -ldflags "-s -w -X github.com/hashicorp/packer/version.Version=${v#v} -X github.com/hashicorp/packer/version.VersionPrerelease=" -o "$bin/packer" github.com/hashicorp/packer)
	mark packer
}

build_tofu() {
	fresh tofu tofu && return
	local v; v=$(modver tofu github.com/opentofu/opentofu)
	echo "testenv: building tofu $v"
	(cd "$root/tools/tofu" && go build -trimpath -ldflags "-s -w -X github.com/opentofu/opentofu/version.dev=no" -o "$bin/tofu" github.com/opentofu/opentofu/cmd/tofu)
	mark tofu
}

build_terraform() {
	# A terraform already on PATH (outside $bin) is used as it is; a fresh machine builds one.
	local onpath
	onpath=$(PATH=$(tr ':' '\n' <<<"$PATH" | grep -vxF "$bin" | paste -sd:) command -v terraform || true)
	if [ -z "${KUBEWIN_BUILD_TERRAFORM:-}" ] && [ -n "$onpath" ]; then
		ln -sfn "$onpath" "$bin/terraform"
		return
	fi
	[ -L "$bin/terraform" ] && rm -f "$bin/terraform"
	fresh terraform terraform && return
	local v; v=$(modver terraform github.com/hashicorp/terraform)
	echo "testenv: building terraform $v"
	(cd "$root/tools/terraform" && go build -trimpath -ldflags "-s -w -X github.com/hashicorp/terraform/version.dev=no" -o "$bin/terraform" github.com/hashicorp/terraform)
	mark terraform
}

build_docs() {
	fresh docs tfplugindocs && return
	echo "testenv: building tfplugindocs $(modver docs github.com/hashicorp/terraform-plugin-docs)"
	(cd "$root/tools/docs" && go build -trimpath -ldflags "-s -w" -o "$bin/tfplugindocs" github.com/hashicorp/terraform-plugin-docs/cmd/tfplugindocs)
	mark docs
}

build_release() {
	fresh release goreleaser && return
	echo "testenv: building goreleaser $(modver release github.com/goreleaser/goreleaser/v2)"
	(cd "$root/tools/release" && go build -trimpath -ldflags "-s -w" -o "$bin/goreleaser" github.com/goreleaser/goreleaser/v2)
	mark release
}
build_packersdc() {
	fresh packersdc packer-sdc && return
	echo "testenv: building packer-sdc $(modver packersdc github.com/hashicorp/packer-plugin-sdk)"
	(cd "$root/tools/packersdc" && go build -trimpath -ldflags "-s -w" -o "$bin/packer-sdc" github.com/hashicorp/packer-plugin-sdk/cmd/packer-sdc)
	mark packersdc
}

build_lint() {
	fresh lint golangci-lint && return
	local v; v=$(modver lint github.com/golangci/golangci-lint/v2)
	echo "testenv: building golangci-lint $v"
	# golangci-lint reports the version given here only when its build date is set as well.
	(cd "$root/tools/lint" && go build -trimpath -ldflags "-s -w -X main.version=${v#v} -X main.date=unknown" -o "$bin/golangci-lint" \
		github.com/golangci/golangci-lint/v2/cmd/golangci-lint)
	mark lint
}

# make demo's release mirror (hack/demorelease) serves Windows node binaries built from source
# for windows/amd64: Kubernetes' from tools/kube, containerd's and the CNI plugins' from
# tools/winnode, and the demo's pause program.
build_winnode() {
	local out=$bin/windows want
	want="$(stamp kube)$(stamp winnode)$(sha256sum "$root/hack/demopause/main.go" | cut -c1-16)"
	if [ "$(cat "$bin/.stamp-winnode" 2>/dev/null)" = "$want" ] && [ -x "$out/kubelet.exe" ] && [ -x "$out/pause.exe" ]; then
		return
	fi
	local v; v=$(modver kube k8s.io/kubernetes)
	local minor=${v#v1.}; minor=${minor%%.*}
	local pkg=k8s.io/component-base/version
	local ld="-s -w -X $pkg.gitVersion=$v -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean -X $pkg.buildDate=2000-01-01T00:00:00Z"
	mkdir -p "$out"
	echo "testenv: building Windows node binaries: kubernetes $v, containerd $(modver winnode github.com/containerd/containerd/v2), CNI plugins $(modver winnode github.com/containernetworking/plugins)"
	(cd "$root/tools/kube" && GOOS=windows GOARCH=amd64 go build -trimpath -ldflags "$ld" -o "$out/" \
		k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy k8s.io/kubernetes/cmd/kubeadm k8s.io/component-base/logs/kube-log-runner)
	(cd "$root/tools/winnode" && GOOS=windows GOARCH=amd64 go build -trimpath -ldflags "-s -w" -o "$out/" \
		github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/ctr \
		github.com/Microsoft/hcsshim/cmd/containerd-shim-runhcs-v1 \
		github.com/containernetworking/plugins/plugins/main/windows/win-bridge \
		github.com/containernetworking/plugins/plugins/main/windows/win-overlay \
		github.com/containernetworking/plugins/plugins/ipam/host-local)
	(cd "$root" && GOOS=windows GOARCH=amd64 go build -trimpath -ldflags "-s -w" -o "$out/pause.exe" ./hack/demopause)
	echo "$want" >"$bin/.stamp-winnode"
}

# apt_install PROGRAM PACKAGE: installs a missing program's Debian package (as root), or says how.
apt_install() {
	if [ "$(id -u)" != 0 ]; then
		echo "testenv: $1 is missing: install Debian's $2 (sudo apt-get install $2)" >&2
		return 1
	fi
	echo "testenv: installing Debian's $2"
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$2" >/dev/null
}

# The Packer SSH test runs Debian's OpenSSH server itself, on 127.0.0.1.
build_sshd() {
	[ -x /usr/sbin/sshd ] && return
	local guard= rc=0
	if [ "$(id -u)" = 0 ] && [ ! -e /usr/sbin/policy-rc.d ]; then # keep the package from starting a system sshd
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && guard=1
	fi
	apt_install /usr/sbin/sshd openssh-server || rc=$?
	[ -z "$guard" ] || rm -f /usr/sbin/policy-rc.d
	return $rc
}

# The release test signs a provider release with Debian's GnuPG (gpg and its agent).
build_gpg() {
	command -v gpg >/dev/null && command -v gpg-agent >/dev/null && return
	apt_install gpg gnupg
}

# The Azure cluster's cloud-init documents are validated with cloud-init's own schema check.
build_cloudinit() {
	command -v cloud-init >/dev/null && return
	apt_install cloud-init cloud-init
}

start=$(date +%s)
for t in ${*:-kube packer tofu terraform sshd gpg cloudinit docs release packersdc}; do "build_$t"; done
echo "testenv: ready in $(( $(date +%s) - start ))s at $bin"
for b in kube-apiserver kubeadm etcd packer tofu terraform; do # versions, as each prints it
	[ -x "$bin/$b" ] || continue
	case $b in
	etcd) printf '  %-16s %s\n' "$b" "$("$bin/$b" --version | head -1)" ;;
	kube-apiserver) printf '  %-16s %s\n' "$b" "$("$bin/$b" --version)" ;;
	kubeadm) printf '  %-16s %s\n' "$b" "$("$bin/$b" version -o short)" ;;
	*) printf '  %-16s %s\n' "$b" "$("$bin/$b" version 2>/dev/null | grep -m1 -E ' v?[0-9]+\.[0-9]+')" ;;
	esac
done
