#!/usr/bin/env bash
# make demo: the whole product on this machine, no cloud account. It bakes an image with Packer
# (the kubewin-local builder and the kubewin-node provisioner, from a release mirror on
# 127.0.0.1 serving Windows node binaries built from source), applies examples/local with
# Terraform (a real control plane, a pool of 3 simulated Windows Server nodes joined by nodeboot,
# a pod route per node), shows the nodes, runs the guides' IIS Deployment and Service on them,
# destroys everything and shows that nothing is left. Each stage is timed. A second run starts
# from scratch; a failed or interrupted run cleans up after itself.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
work=$root/.demo
tf=$work/local
export PATH=$root/.testbin:$root/bin:$PATH CHECKPOINT_DISABLE=1
export PACKER_PLUGIN_PATH=$work/packer-plugins TF_CLI_CONFIG_FILE=$root/bin/terraformrc TF_IN_AUTOMATION=1
unset TF_LOG PACKER_LOG

source "$root/hack/demo-lib.sh"

destroy() { # destroy what a run left in Terraform's state, quietly
	[ -s "$tf/terraform.tfstate" ] || return 0
	[ -n "$(terraform -chdir="$tf" state list 2>/dev/null)" ] || return 0
	terraform -chdir="$tf" destroy -auto-approve -input=false -var image="$work/image" >"$work/cleanup.log" 2>&1 ||
		echo "demo: terraform destroy failed, see $work/cleanup.log" >&2
}
cleanup() {
	local status=$?
	trap - EXIT INT TERM
	if [ "$status" != 0 ]; then
		echo "demo: stopped (exit $status); cleaning up" >&2
		destroy
	fi
	stop_mirror
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

stage "clean up a previous run"
mkdir -p "$work"
destroy
rm -rf "$tf" "$work/image" "$work/image.manifest.json" "$PACKER_PLUGIN_PATH"

bake_image

stage "terraform apply examples/local (cluster, 3 Windows nodes, routes)"
mkdir -p "$tf"
cp examples/local/main.tf "$tf/" # two levels below the repository, as examples/local is
terraform -chdir="$tf" init -input=false # the provider from make build's mirror (bin/terraformrc)
terraform -chdir="$tf" apply -auto-approve -input=false -var image="$work/image"
kubeconfig=$(terraform -chdir="$tf" output -raw kubeconfig_path)
kc() { kubectl --kubeconfig "$kubeconfig" "$@"; }

stage "the nodes"
kc get nodes -l kubernetes.io/os=windows -o custom-columns='NAME:.metadata.name,READY:.status.conditions[?(@.type=="Ready")].status,OS BUILD:.metadata.labels.node\.kubernetes\.io/windows-build,POD CIDR:.spec.podCIDR,IP:.status.addresses[?(@.type=="InternalIP")].address,KUBELET:.status.nodeInfo.kubeletVersion,OS IMAGE:.status.nodeInfo.osImage'
echo
echo "pod routes (destination -> next hop):"
terraform -chdir="$tf" output -json routes | tr -d '{}"' | tr ',' '\n' | sed 's/:/ -> /; s/^/  /'

stage "IIS Deployment and Service from the guides"
kc apply -f examples/workloads/iis.yaml
kc rollout status deployment/iis --timeout=3m
kc get pods -l app=iis -o wide
echo
echo "the scheduler's bindings:"
kc get events --field-selector reason=Scheduled -o custom-columns='FROM:.reportingComponent,MESSAGE:.message' | grep -E 'FROM|iis'
echo
kc get service iis
kc get endpointslices -l kubernetes.io/service-name=iis -o custom-columns='SERVICE:.metadata.labels.kubernetes\.io/service-name,ADDRESSES:.endpoints[*].addresses[0]'

stage "terraform destroy"
terraform -chdir="$tf" destroy -auto-approve -input=false -var image="$work/image"

stage "nothing is left"
left=$(terraform -chdir="$tf" state list)
procs=$(pgrep -af -- "$tf/.kubewin" || true)
files=$(find "$tf/.kubewin/clusters" "$tf/.kubewin/pools" -mindepth 1 2>/dev/null || true)
routes=$(cat "$tf/.kubewin"/routetables/*.json 2>/dev/null | grep '"destination"' || true)
echo "terraform state: ${left:-empty}"
echo "processes of the demo cluster and nodes: ${procs:-none}"
echo "clusters and machines on disk: ${files:-none}"
echo "routes: ${routes:-none}"
[ -z "$left$procs$files$routes" ] || { echo "demo: something was left behind" >&2; exit 1; }
stop_mirror
print_stages
