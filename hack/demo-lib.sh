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

stop_mirror() {
	make -s --no-print-directory release-mirror-stop
}

# bake_image builds kubewin, the test environment and the Windows node binaries, starts the
# release mirror (make release-mirror) and bakes $work/image with packer build
# examples/packer/local.pkr.hcl, as the README's local path does.
bake_image() {
	stage "build kubewin, the test environment, Windows node binaries"
	make --no-print-directory build
	bash hack/testenv.sh kube packer terraform winnode

	stage "start the release mirror and registry on 127.0.0.1"
	make --no-print-directory release-mirror

	stage "packer build examples/packer/local.pkr.hcl"
	packer plugins install --path bin/packer-plugin-kubewin github.com/kubewin/kubewin
	packer build -force -var-file bin/release.pkrvars.hcl -var output_directory="$work/image" \
		-var nodeboot_path="$root/bin/nodeboot" examples/packer/local.pkr.hcl
}

# print_stages prints the timings of the stages run so far.
print_stages() {
	end_stage
	printf '\n\033[1m==> stage timings\033[0m\n'
	printf '  %s\n' "${stages[@]}"
}
