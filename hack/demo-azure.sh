#!/usr/bin/env bash
# make demo-azure: the azure backend's flow on this machine, against the ARM + Entra test server
# (internal/testkit/armtest, no Azure behind it). It bakes the image as make demo does, starts the test
# server on 127.0.0.1 with that image published and a VNet, a subnet and a route table, starts a
# local cluster standing for an existing one, applies examples/azure — a scale set whose
# instances boot as simulated Windows machines running nodeboot with the custom data they got,
# joining the cluster, and a route per node in the route table — shows the nodes, the routes and
# the ARM writes, destroys everything and shows that nothing is left.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
work=$root/.demo
cluster=$work/azure-cluster
tf=$work/azure
arm=$work/arm
export PATH=$root/.testbin:$root/bin:$PATH CHECKPOINT_DISABLE=1
export PACKER_PLUGIN_PATH=$work/packer-plugins TF_CLI_CONFIG_FILE=$root/bin/terraformrc TF_IN_AUTOMATION=1
unset TF_LOG PACKER_LOG

source "$root/hack/demo-lib.sh"

arm_pid=''
destroy() { # destroy what a run left in Terraform's states, quietly
	local dir
	for dir in "$tf" "$cluster"; do
		[ -s "$dir/terraform.tfstate" ] || continue
		[ -n "$(terraform -chdir="$dir" state list 2>/dev/null)" ] || continue
		terraform -chdir="$dir" destroy -auto-approve -input=false >>"$work/cleanup.log" 2>&1 ||
			echo "demo: terraform destroy in $dir failed, see $work/cleanup.log" >&2
	done
}
stop_arm() {
	[ -z "$arm_pid" ] || { kill "$arm_pid" 2>/dev/null || true; wait "$arm_pid" 2>/dev/null || true; }
	arm_pid=''
}
cleanup() {
	local status=$?
	trap - EXIT INT TERM
	if [ "$status" != 0 ]; then
		echo "demo: stopped (exit $status); cleaning up" >&2
		[ -z "$arm_pid" ] || destroy
	fi
	stop_arm
	stop_mirror
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

stage "clean up a previous run"
mkdir -p "$work"
rm -rf "$tf" "$cluster" "$arm" "$work/image" "$PACKER_PLUGIN_PATH"

bake_image
stop_mirror

stage "start the ARM + Entra test server on 127.0.0.1 (simulated Azure)"
go build -o .testbin/armserver ./hack/armserver
mkdir -p "$arm"
subscription=00000000-0000-0000-0000-000000000000
image=/subscriptions/$subscription/resourceGroups/images/providers/Microsoft.Compute/galleries/kubewin/images/ws2022/versions/1.0.0
.testbin/armserver -dir "$arm" -boot "$root/bin/nodeboot" -subscription "$subscription" -resource-group kubewin -vnet kubewin-vnet=10.240.0.0/16 \
	-subnet nodes=10.240.0.0/24 -route-table windows-pods -image "$image=$work/image" \
	-env-file "$arm/env" -tfvars "$arm/azure.auto.tfvars.json" >"$arm/server.log" 2>&1 &
arm_pid=$!
for _ in $(seq 100); do [ -s "$arm/azure.auto.tfvars.json" ] && break; sleep 0.1; done
[ -s "$arm/azure.auto.tfvars.json" ] || { cat "$arm/server.log" >&2; echo "demo: the ARM test server did not start" >&2; exit 1; }
sed -n '1,/^$/p' "$arm/server.log"
set -a
source "$arm/env" # ARM_METADATA_HOSTNAME, ARM_TENANT_ID, ARM_SUBSCRIPTION_ID, ARM_CLIENT_ID, ARM_CLIENT_SECRET, SSL_CERT_FILE
set +a

stage "a cluster for the nodes to join (local, standing for an existing one)"
mkdir -p "$cluster"
cat >"$cluster/main.tf" <<HCL
terraform {
  required_providers {
    kubewin = { source = "kubewin/kubewin" }
  }
}
provider "kubewin" {
  local {
    state_dir = "\${path.root}/.kubewin"
    bin_path  = ["$root/bin", "$root/.testbin"]
  }
}
resource "kubewin_cluster" "existing" {
  name         = "existing"
  cluster_cidr = "10.244.0.0/16"
  local {}
}
output "kubeconfig_path" {
  value = kubewin_cluster.existing.kubeconfig_path
}
HCL
terraform -chdir="$cluster" init -input=false >/dev/null
terraform -chdir="$cluster" apply -auto-approve -input=false
kubeconfig=$(terraform -chdir="$cluster" output -raw kubeconfig_path)
kc() { kubectl --kubeconfig "$kubeconfig" "$@"; }

stage "terraform apply examples/azure (scale set of 3, routes) through ARM"
mkdir -p "$tf"
cp examples/azure/main.tf "$arm/azure.auto.tfvars.json" "$tf/"
terraform -chdir="$tf" init -input=false
terraform -chdir="$tf" apply -auto-approve -input=false -var kubeconfig="$kubeconfig"

stage "the nodes and their routes"
kc get nodes -l kubernetes.io/os=windows -o custom-columns='NAME:.metadata.name,READY:.status.conditions[?(@.type=="Ready")].status,OS BUILD:.metadata.labels.node\.kubernetes\.io/windows-build,POD CIDR:.spec.podCIDR,IP:.status.addresses[?(@.type=="InternalIP")].address,OS IMAGE:.status.nodeInfo.osImage'
echo
echo "scale set: $(terraform -chdir="$tf" output -raw scale_set_id)"
echo "routes in the route table (destination -> next hop):"
terraform -chdir="$tf" state list | grep kubewin_pod_route | while read -r r; do
	terraform -chdir="$tf" state show -no-color "$r" | awk '/destination/ { d = $3 } /next_hop/ { h = $3 } END { gsub(/"/, "", d); gsub(/"/, "", h); print "  " d " -> " h }'
done

stage "scale to 5, then back to 3 (one ARM write each)"
terraform -chdir="$tf" apply -auto-approve -input=false -var kubeconfig="$kubeconfig" -var node_count=5 | tail -3
terraform -chdir="$tf" apply -auto-approve -input=false -var kubeconfig="$kubeconfig" -var node_count=3 | tail -3
kc get nodes -l kubernetes.io/os=windows

stage "terraform destroy"
terraform -chdir="$tf" destroy -auto-approve -input=false -var kubeconfig="$kubeconfig"
terraform -chdir="$cluster" destroy -auto-approve -input=false

stage "nothing is left"
stop_arm
sed -n '/^ARM writes served/,$p' "$arm/server.log"
left=$(terraform -chdir="$tf" state list; terraform -chdir="$cluster" state list)
machines=$(find "$arm/instances" -mindepth 1 -maxdepth 1 2>/dev/null || true)
procs=$(pgrep -af -- "$arm/instances" || true)
echo "terraform state: ${left:-empty}"
echo "simulated instances on disk: ${machines:-none}"
echo "processes of the instances: ${procs:-none}"
[ -z "$left$machines$procs" ] || { echo "demo: something was left behind" >&2; exit 1; }
print_stages
