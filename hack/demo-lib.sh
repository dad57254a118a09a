# Shared by make demo and make demo-azure: timed stages, and the image both demos use, baked with
# Packer from a release mirror on 127.0.0.1 that serves Windows node binaries built from source.
# The including script sets root, work and the environment, and defines cleanup.

stages=() current='' began=0
stage() {
	end_stage
	current=$1 began=$(date +%s%N)
	printf '\n\033[1m==> %s\033[0m\n' "$1"
}
end_stage() {
	[ -n "$current" ] || return 0
	local ms=$((($(date +%s%N) - began) / 1000000))
	stages+=("$(awk -v n="$current" -v ms="$ms" 'BEGIN { printf "%-66s %7.1f s", n, ms / 1000 }')")
	current=''
}

mirror_pid=''
stop_mirror() {
	[ -z "$mirror_pid" ] || kill "$mirror_pid" 2>/dev/null || true
	mirror_pid=''
}

# bake_image builds kubewin, the test environment and the Windows node binaries, starts the
# release mirror and bakes $work/image with packer build examples/packer/local.pkr.hcl.
bake_image() {
	stage "build kubewin, the test environment, Windows node binaries"
	make --no-print-directory build
	bash hack/testenv.sh kube packer terraform winnode
	go build -o .testbin/demorelease ./hack/demorelease

	stage "start the release mirror and registry on 127.0.0.1"
	modver() { (cd "tools/$1" && go list -m -f '{{.Version}}' "$2"); }
	version=$(bin/nodeboot version)
	rm -f "$work/release.pkrvars.hcl"
	.testbin/demorelease -bin .testbin/windows -nodeboot bin/windows_amd64/nodeboot.exe -vars "$work/release.pkrvars.hcl" \
		-kubernetes-version "$(modver kube k8s.io/kubernetes)" \
		-containerd-version "$(modver winnode github.com/containerd/containerd/v2 | sed 's/^v//')" \
		-cni-plugins-version "$(modver winnode github.com/containernetworking/plugins | sed 's/^v//')" \
		-nodeboot-version "$version" &
	mirror_pid=$!
	for _ in $(seq 100); do [ -s "$work/release.pkrvars.hcl" ] && break; sleep 0.1; done
	[ -s "$work/release.pkrvars.hcl" ] || { echo "demo: the release mirror did not start" >&2; exit 1; }

	stage "packer build examples/packer/local.pkr.hcl"
	packer plugins install --path bin/packer-plugin-kubewin github.com/kubewin/kubewin
	packer build -force -var-file "$work/release.pkrvars.hcl" -var output_directory="$work/image" \
		-var nodeboot_path="$root/bin/nodeboot" examples/packer/local.pkr.hcl
}

# print_stages prints the timings of the stages run so far.
print_stages() {
	end_stage
	printf '\n\033[1m==> stage timings\033[0m\n'
	printf '  %s\n' "${stages[@]}"
}
