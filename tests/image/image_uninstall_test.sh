#!/usr/bin/env bash
# The image's init-container job end to end: `driver-manager uninstall_driver` run inside the image (buildah
# run on a container made from the OCI archive) with the environment the GPU Operator gives it, against a real
# control plane (scripts/cluster) and a simulated node whose nvidia module is loaded but unused. It proves what
# only a real run inside the image shows: the shipped libraries speak TLS to the API server, and driver-manager
# finds and runs the image's vfio-manage through PATH.
set -uo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/image/lib.sh
. "$SRC/tests/image/lib.sh"

build_image
container_from_archive
work=$(mktemp -d /tmp/dm-image-uninstall.XXXXXX)
cleanup_hooks+=("rm -rf '$work'")

kc=$(K8S_WATCH_PID=$$ "$SRC/scripts/cluster" up) || die "scripts/cluster up failed (run 'scripts/cluster build' first)"
cleanup_hooks=("'$SRC/scripts/cluster' down '$kc' >/dev/null 2>&1 || true" "${cleanup_hooks[@]}")
state=$(dirname "$kc")
k() { kubectl --kubeconfig "$kc" "$@"; }

node=image-node
k apply -f - >/dev/null <<EOF || die "cannot create the node"
apiVersion: v1
kind: Node
metadata:
  name: $node
  labels:
    nvidia.com/gpu.deploy.driver: "true"
    nvidia.com/gpu.deploy.device-plugin: "true"
EOF

# The simulated node: nvidia loaded with no user, an NVIDIA GPU left bound to vfio-pci by a vfio-manager.
sim=$work/sim
mkdir -p "$sim/sys/module/nvidia"
echo 0 >"$sim/sys/module/nvidia/refcnt"
sh "$SRC/tests/fixtures/host/fake-pci-tree.sh" "$sim"
echo vfio-pci >"$sim/sys/bus/pci/devices/0000:3b:00.0/driver_override"

# The driver DaemonSet's init container: command [driver-manager], args [uninstall_driver], the operator's env.
# The kubeconfig and its certificates, and the simulated node, are mounted at their own paths.
in_image -v "$state:$state" -v "$sim:$sim" \
  --env NODE_NAME=$node --env OPERATOR_NAMESPACE=gpu-operator --env NVIDIA_VISIBLE_DEVICES=void \
  --env ENABLE_GPU_POD_EVICTION=true --env ENABLE_AUTO_DRAIN=false --env DRAIN_USE_FORCE=false \
  --env DRAIN_POD_SELECTOR_LABEL= --env DRAIN_TIMEOUT_SECONDS=0s --env DRAIN_DELETE_EMPTYDIR_DATA=false \
  --env KUBECONFIG="$kc" --env DRIVER_MANAGER_SIM_ROOT="$sim" -- driver-manager uninstall_driver
log=$OUT
check_eq "uninstall_driver in the image exits 0" 0 "$RC"
check_has "... and completes" "Driver uninstallation completed successfully" "$log"
check_has "... reading the node through the API (TLS from inside the image)" \
  'Current value of "nvidia.com/gpu.deploy.device-plugin"=true' "$log"
if [[ -e $sim/sys/module/nvidia ]]; then
  fail "the simulated nvidia module was unloaded" "log: $log"
else
  pass "the simulated nvidia module was unloaded"
fi
check_eq "the image's vfio-manage ran (unbind cleared the GPU's driver override)" "" \
  "$(tr -d '\n' <"$sim/sys/bus/pci/devices/0000:3b:00.0/driver_override")"
check_has "... and its output was re-logged" "vfio-manage: " "$log"

node_json=$(k get node $node -o json) || die "cannot read the node back"
check_eq "operand label restored" true \
  "$(jq -r '.metadata.labels["nvidia.com/gpu.deploy.device-plugin"]' <<<"$node_json")"
check_eq "node schedulable again" false "$(jq -r '.spec.unschedulable // false' <<<"$node_json")"
# Pause and restore of the operand label, cordon and uncordon: the run wrote to the node, not only read it.
patches=$(jq -r --arg n "$node" 'select(.verb == "patch" and .objectRef.resource == "nodes"
  and .objectRef.name == $n and .responseStatus.code == 200) | .auditID' "$state/audit.log" | sort -u | wc -l)
if ((patches >= 2)); then
  pass "the node was patched from inside the image ($patches patches)"
else
  fail "the node was patched from inside the image" "patches seen: $patches"
fi

# The deploy/ examples that are plain Kubernetes objects are accepted by the API server (server-side dry run).
k create namespace gpu-tools >/dev/null && k create namespace gpu-operator >/dev/null
for f in deploy/gpu-client-annotated.yaml deploy/gpu-client-daemonset.yaml deploy/gpu-operator/events-rbac.yaml \
  deploy/clusterrole.yaml deploy/clusterrole-plan.yaml deploy/plan-job.yaml deploy/recover-job.yaml \
  deploy/driver-daemonset-snippet.yaml; do
  if out=$(k apply --dry-run=server -f "$SRC/$f" 2>&1)
  then pass "$f is valid"; else fail "$f is valid" "$out"; fi
done
finish
