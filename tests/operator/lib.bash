# shellcheck shell=bash disable=SC2034,SC2016,SC2046  # variables read by the test and bench; single-quoted conditions and scripts are evaluated later; image names are words
# The stock GPU Operator on a test cluster and a real node, shared by tests/operator/operator_test.sh and
# bench/operator-upgrade (docs/development.md, "The GPU Operator tier"). Sourced; expects SRC (the source
# tree). Every process and directory it starts or makes is recorded for op_down.
#
# Set-up (each test choice is written down in docs/gpu-operator.md):
# * scripts/cluster up; scripts/node up with NODE_OPERATOR=1 (a private /run in the node with the simulated
#   host root at /run/nvidia, the bridge as the pods' gateway, kube-proxy for the `kubernetes` Service);
# * the stand-in images (tests/operator/standin-images.sh) under the operator's image names, and upstream's
#   k8s-driver-manager v0.12.0 (tests/operator/upstream-image.sh, op_upstream_images) under the names the
#   callers give it;
# * the operator's CRDs, its namespace, the NFD labels it reads on the node;
# * the operator installed as users install it: the chart (peers/gpu-operator/chart) by Helm, with the test's
#   choices in tests/operator/helm-values.yaml (op_helm_install); the operator runs in the cluster as the
#   chart's Deployment, from an image holding its binary and assets (unpacked from $DM_SHARED/peers/
#   gpu-operator) under its own name. bench/operator-upgrade sets up the same way.

OP_NS=gpu-operator
OP_NODE=gpu-node-1
OP_DRIVER_DS=nvidia-driver-daemonset
OP_UPGRADE_LABEL=nvidia.com/gpu-driver-upgrade-state
OP_CACHE=${OP_CACHE:-/var/cache/driver-manager-peers/gpu-operator}
# Driver versions the scenarios install, in order (the first is the chart's default).
OP_VERSIONS=(595.91.07 595.99.01 595.99.02 595.99.03 595.99.04 595.99.05 595.99.06)
# The chart's own k8s-driver-manager image (driver.manager in its values): upstream's v0.12.0.
OP_UPSTREAM_IMAGE=nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.12.0
OP_OS_TAG=ubuntu22.04
# The driver pods: the ClusterPolicy's DaemonSet; op_use_crd switches to every driver DaemonSet's pods (the
# NVIDIADriver controller's are named after the NVIDIADriver).
OP_DRIVER_SELECTOR=app=nvidia-driver-daemonset

op_log() { printf '[operator] %s\n' "$*" >&2; }
op_die() { op_log "ERROR: $*"; exit 1; }

# The peers present, or one line saying why not and exit 77 (skipped).
op_check_peers() {
  OP_SHARED=$(realpath -m "${DM_SHARED:-$SRC/../shared}")
  OP_PEERS="$OP_SHARED/peers/gpu-operator"
  local f
  for f in gpu-operator.xz values.yaml crds assets manifests chart/Chart.yaml; do
    if [[ ! -e "$OP_PEERS/$f" ]]; then
      echo "SKIP: no stock GPU Operator at $OP_PEERS ($f missing; set DM_SHARED to the folder holding peers/)"
      exit 77
    fi
  done
  OP_UPSTREAM_XZ="$OP_SHARED/peers/k8s-driver-manager/upstream-v0.12.0.xz"
  if [[ ! -f $OP_UPSTREAM_XZ ]]; then
    echo "SKIP: no upstream k8s-driver-manager at $OP_UPSTREAM_XZ (set DM_SHARED to the folder holding peers/)"
    exit 77
  fi
  [[ $EUID -eq 0 ]] || op_die "needs root (containerd, kubelet, mount namespaces)"
  python3 -c 'import yaml' 2>/dev/null || op_die "python3-yaml is missing (scripts/install-deps installs it)"
}

# The operator binary and its /opt/gpu-operator tree, unpacked once into $OP_CACHE (checked against
# SHA256SUMS).
op_unpack() {
  mkdir -p "$OP_CACHE"
  exec 8>"$OP_CACHE/.lock"
  flock 8
  local sum; sum=$(awk '$2 == "gpu-operator/gpu-operator" {print $1}' "$OP_SHARED/peers/SHA256SUMS" 2>/dev/null)
  if [[ ! -x "$OP_CACHE/gpu-operator" ]] ||
     [[ -n "$sum" && "$(sha256sum <"$OP_CACHE/gpu-operator" | cut -d' ' -f1)" != "$sum" ]]; then
    op_log "unpacking the operator into $OP_CACHE"
    xz -dc "$OP_PEERS/gpu-operator.xz" >"$OP_CACHE/gpu-operator.tmp"
    chmod +x "$OP_CACHE/gpu-operator.tmp" && mv "$OP_CACHE/gpu-operator.tmp" "$OP_CACHE/gpu-operator"
  fi
  rm -rf "$OP_CACHE/opt.new"
  mkdir -p "$OP_CACHE/opt.new"
  cp -r "$OP_PEERS"/assets/. "$OP_CACHE/opt.new/"
  cp -r "$OP_PEERS/manifests" "$OP_CACHE/opt.new/manifests"
  rm -rf "$OP_CACHE/opt" && mv "$OP_CACHE/opt.new" "$OP_CACHE/opt"
  exec 8>&-
}

k() { kubectl --kubeconfig "$OP_KC" "$@"; }

# Images of the operator's names: the driver at every version the scenarios use, the operator's own (its
# binary and assets, and the validator's and node status exporter's stand-in: all run from that image), and
# the other operands' as the chart's values name them (the device plugin's image also runs GPU feature
# discovery); the two that the operator runs without a command (DCGM, the DCGM exporter) with the stand-in's
# (standin-images.sh, NAME@PROGRAM).
op_image_names() {
  local v
  for v in "${OP_VERSIONS[@]}"; do printf 'nvcr.io/nvidia/driver:%s-%s\n' "$v" "$OP_OS_TAG"; done
  printf '%s\n' operator=nvcr.io/nvidia/gpu-operator:v26.7.0
  python3 - "$OP_PEERS/values.yaml" <<'PY'
import sys, yaml
values = yaml.safe_load(open(sys.argv[1]))
commands = {"dcgm": "nv-hostengine", "dcgmExporter": "dcgm-exporter"}
names = []
for key in ["toolkit", "devicePlugin", "dcgm", "dcgmExporter", "gfd", "migManager"]:
    v = values[key]
    name = "%s/%s:%s" % (v["repository"], v["image"], v["version"])
    if key in commands:
        name += "@" + commands[key]
    if name not in names:
        names.append(name)
print("\n".join(names))
PY
}

# Upstream's k8s-driver-manager image under each NAME (tests/operator/upstream-image.sh): its archives, one
# a line, for OP_EXTRA_IMAGES.
op_upstream_images() {
  "$SRC/tests/operator/upstream-image.sh" "$OP_UPSTREAM_XZ" /var/cache/driver-manager-operator-standins/upstream "$@"
}

OP_CLEANUP=()
op_down() {
  local i
  for ((i = ${#OP_CLEANUP[@]} - 1; i >= 0; i--)); do eval "${OP_CLEANUP[i]}" || true; done
  OP_CLEANUP=()
}

# Cluster, node (with NODE_IMAGES from the stand-ins), CRDs, namespace, NFD labels. Sets OP_KC, OP_SIM,
# OP_NODE_STATE, OP_WORK. OP_NODE_GPUS: the nvidia.com/gpu capacity node-sim publishes (default 8; 0: none,
# the device plugin's registration with the kubelet publishes it).
op_up() {
  OP_WORK=$(mktemp -d /tmp/dm-operator.XXXXXX)
  OP_CLEANUP+=("rm -rf '$OP_WORK'")
  local images
  images=$(STANDIN_OPERATOR=$OP_CACHE "$SRC/tests/operator/standin-images.sh" /var/cache/driver-manager-operator-standins \
    $(op_image_names) | tr '\n' ' ') || op_die "cannot build the stand-in images"
  images+=" ${OP_EXTRA_IMAGES:-}"
  # The API server also listens on the node's bridge address, where kube-proxy sends the `kubernetes`
  # Service (its own endpoint reconciler is off in the test cluster, and an Endpoints address may not be
  # loopback).
  OP_KC=$(K8S_WATCH_PID=$$ K8S_APISERVER_ARGS=--bind-address=0.0.0.0 "$SRC/scripts/cluster" up) ||
    op_die "scripts/cluster up failed"
  OP_CLEANUP+=("'$SRC/scripts/cluster' down '$OP_KC' >/dev/null 2>&1")
  OP_SIM="$OP_WORK/sim"
  mkdir -p "$OP_SIM"
  # A fresh node: no driver loaded yet (the install scenario).
  OP_NODE_STATE=$(NODE_OPERATOR=1 NODE_KUBE_PROXY_KUBECONFIG="$OP_KC" NODE_IMAGES="$images" NODE_SIM_ARGS=--no-driver \
    NODE_GPUS="${OP_NODE_GPUS:-8}" \
    NODE_WATCH_PID=$$ NODE_SIM_BIN="${NODE_SIM_BIN:-$SRC/build/bin/node-sim}" \
    "$SRC/scripts/node" up "$OP_KC" "$OP_NODE" "$OP_SIM") || op_die "scripts/node up failed"
  OP_CLEANUP+=("'$SRC/scripts/node' down '$OP_NODE_STATE' >/dev/null 2>&1")
  local cidr port
  cidr=$("$SRC/scripts/node" env "$OP_NODE_STATE" | sed -n 's/^NODE_POD_CIDR=//p')
  port=$(sed 's/.*://' "$(dirname "$OP_KC")/apiserver.url")
  k apply -f - >/dev/null <<EOF || op_die "cannot write the kubernetes Endpoints"
apiVersion: v1
kind: Endpoints
metadata: {name: kubernetes, namespace: default}
subsets: [{addresses: [{ip: "${cidr%.0/24}.1"}], ports: [{name: https, port: $port, protocol: TCP}]}]
EOF
  k apply -f "$OP_PEERS/crds/" >/dev/null || op_die "cannot create the operator's CRDs"
  k create namespace "$OP_NS" >/dev/null
  local kernel; kernel=$(uname -r)
  k label node "$OP_NODE" --overwrite feature.node.kubernetes.io/pci-10de.present=true \
    feature.node.kubernetes.io/system-os_release.ID=ubuntu \
    feature.node.kubernetes.io/system-os_release.VERSION_ID=22.04 \
    "feature.node.kubernetes.io/kernel-version.full=$kernel" >/dev/null
  op_wait 60 "the default ServiceAccount of $OP_NS" \
    '[[ -n $(k -n "$OP_NS" get sa default -o jsonpath="{.metadata.name}" 2>/dev/null) ]]'
}

# op_sim_node_up NODE LABEL=VALUE...: a second GPU node beside the real one, played by node-sim (its simulated
# kubelet: every pod bound to it is Running and Ready at once, its init containers terminated with exit 0;
# docs/node-sim.md), with the NFD labels the operator reads (as op_up's) and the given labels. Pods run
# nothing there: it shows what the operator does with a node (its DaemonSets' pods, upgrade states), not a
# driver-manager run. Returns once the node is Ready.
op_sim_node_up() {
  local node=$1 kernel
  shift
  mkdir -p "$OP_WORK/sim-$node"
  setsid "${NODE_SIM_BIN:-$SRC/build/bin/node-sim}" --kubeconfig "$OP_KC" --node "$node" \
    --sim-root "$OP_WORK/sim-$node" --gpus 2 </dev/null >"$OP_WORK/node-sim-$node.log" 2>&1 &
  local pid=$!
  OP_CLEANUP+=("kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null")
  op_wait 60 "node $node to be Ready" \
    '[[ $(k get node "$node" -o jsonpath="{.status.conditions[?(@.type==\"Ready\")].status}" 2>/dev/null) == True ]]' ||
    return 1
  kernel=$(uname -r)
  k label node "$node" --overwrite feature.node.kubernetes.io/pci-10de.present=true \
    feature.node.kubernetes.io/system-os_release.ID=ubuntu \
    feature.node.kubernetes.io/system-os_release.VERSION_ID=22.04 \
    "feature.node.kubernetes.io/kernel-version.full=$kernel" "$@" >/dev/null
}

# helm with its own configuration and caches in $OP_WORK, on the test cluster. The binary comes from
# `scripts/cluster build helm` (ctest's build.helm fixture; a no-op once built).
op_helm() {
  local bin=${K8S_CACHE:-/var/cache/driver-manager-test-cluster}/bin/helm
  [[ -x $bin ]] || op_die "no pinned helm at $bin (scripts/cluster build helm)"
  HELM_CONFIG_HOME="$OP_WORK/helm/config" HELM_CACHE_HOME="$OP_WORK/helm/cache" \
    HELM_DATA_HOME="$OP_WORK/helm/data" "$bin" --kubeconfig "$OP_KC" "$@"
}

# op_helm_install VERSION: the chart installed as a user installs it (`helm install`), with the test's values
# and the driver at VERSION; the operator's Deployment Ready. The ClusterPolicy it rendered is kept in
# $OP_WORK/clusterpolicy.yaml.
op_helm_install() {
  op_helm install gpu-operator "$OP_PEERS/chart" -n "$OP_NS" -f "$SRC/tests/operator/helm-values.yaml" \
    --set "driver.version=$1" >"$OP_WORK/helm-install.log" 2>&1 ||
    { cat "$OP_WORK/helm-install.log" >&2; op_die "helm install failed"; }
  OP_IN_CLUSTER=1
  op_wait 180 "the operator's Deployment to be available" \
    '[[ $(k -n "$OP_NS" get deploy gpu-operator -o jsonpath="{.status.availableReplicas}" 2>/dev/null) == 1 ]]' ||
    { op_debug; op_die "the operator did not start"; }
  k get clusterpolicy cluster-policy -o yaml >"$OP_WORK/clusterpolicy.yaml" ||
    op_die "the chart made no ClusterPolicy"
}

# The operator's log so far, into $OP_WORK/operator.log (in the cluster: its pod's, from the kubelet's files
# on the node: the API server cannot reach the test node's kubelet by its name for `kubectl logs`).
op_operator_log() {
  [[ -n ${OP_IN_CLUSTER:-} ]] || return 0
  local pod
  pod=$(k -n "$OP_NS" get pods -l app=gpu-operator -o jsonpath='{.items[0].metadata.name}' 2>/dev/null)
  op_pod_log "$OP_NS" "$pod" gpu-operator >"$OP_WORK/operator.log" 2>&1 || true
}
# The log of container CONTAINER of pod NS/POD, every run the kubelet still keeps, from its files on the node.
op_pod_log() {  # NS POD CONTAINER
  local uid logs
  uid=$(k -n "$1" get pod "$2" -o jsonpath='{.metadata.uid}' 2>/dev/null) || return 0
  logs=$("$SRC/scripts/node" env "$OP_NODE_STATE" | sed -n 's/^NODE_POD_LOGS=//p')
  cat "$logs/${1}_${2}_${uid}/$3"/*.log 2>/dev/null || true
}

# op_wait SECONDS WHAT CONDITION: evaluates CONDITION every second until it holds; 1 (with a line) if not.
op_wait() {
  local deadline=$(($(date +%s) + $1)) what=$2 cond=$3
  until eval "$cond"; do
    if (($(date +%s) >= deadline)); then
      op_log "gave up after $1 s waiting for $what"
      return 1
    fi
    sleep 1
  done
}

# The node's upgrade-state label as a watch sees it: a background watch appends "<epoch.ms> <value>" lines to
# $OP_WORK/states.<name>. op_watch_start NAME; op_watch_stop; op_states NAME prints the distinct sequence.
op_watch_start() {
  OP_WATCH_FILE="$OP_WORK/states.$1"
  : >"$OP_WATCH_FILE"
  op_node_watch "$OP_NODE" "$OP_WATCH_FILE"
  OP_WATCH_PID=$!
}
# op_node_watch NODE FILE: the watch of op_watch_start for node NODE, appending to FILE, in the background ($!
# its process group: `kill -- -PID` ends it).
op_node_watch() {
  # A process group of its own (setsid), so that the whole pipeline ends by its id.
  setsid bash -c 'kubectl --kubeconfig "$1" get node "$2" --watch --output-watch-events=false \
      -o "jsonpath={.metadata.labels.nvidia\.com/gpu-driver-upgrade-state}{\" \"}{.spec.unschedulable}{\"\n\"}" \
      2>/dev/null | while IFS= read -r line; do printf "%s %s\n" "$(date +%s.%N | cut -c1-14)" "$line"; done' \
    watch "$OP_KC" "$1" >>"$2" </dev/null &
}
op_watch_stop() {
  [[ -n ${OP_WATCH_PID:-} ]] || return 0
  kill -- "-$OP_WATCH_PID" 2>/dev/null || true
  wait "$OP_WATCH_PID" 2>/dev/null || true
  OP_WATCH_PID=
}
# The distinct consecutive states ("(none)" for no label), joined with " -> ".
op_states() { op_state_sequence "$OP_WORK/states.$1"; }
# The same for the current watch, each state with the seconds since $1 (default: the watch's first line) at
# which it was first seen: "upgrade-required@3 -> cordon-required@4 -> ...".
op_states_timed() { op_state_sequence "$OP_WATCH_FILE" "${1:-first}"; }
op_state_sequence() {  # FILE [T0|first]: without T0, no times
  awk -v t0="${2:-}" '{ s = ($2 == "" || $2 == "true") ? "(none)" : $2; if (t0 == "first") t0 = $1
         if (s != last) { printf "%s%s", (n++ ? " -> " : ""), s; if (t0 != "") printf "@%d", $1 - t0; last = s } }
       END { print "" }' "$1"
}
# The time of the first line whose state is $2 (after the time $3, if given).
op_state_time() {
  awk -v s="$2" -v after="${3:-0}" '$2 == s && $1 >= after { print $1; exit }' "$OP_WORK/states.$1"
}

op_driver_pod() {  # the driver pod's name (not terminating), or nothing
  op_driver_json | jq -r '[.items[] | select(.metadata.deletionTimestamp == null)][0].metadata.name // empty'
}
# The driver pods on the node ($1, default OP_NODE).
op_driver_json() {
  k -n "$OP_NS" get pods -l "$OP_DRIVER_SELECTOR" --field-selector "spec.nodeName=${1:-$OP_NODE}" -o json 2>/dev/null
}
op_node_json() { k get node "$OP_NODE" -o json; }
op_label() { op_node_json | jq -r --arg l "$1" '.metadata.labels[$l] // ""'; }

# The driver pod is Ready (its init container done, the driver container's startup probe passed) and runs
# the image of VERSION.
op_driver_ready() {
  op_driver_json | jq -e --arg img "nvcr.io/nvidia/driver:$1-$OP_OS_TAG" '
    [.items[] | select(.metadata.deletionTimestamp == null)
      | select(.spec.containers[0].image == $img)
      | select(any(.status.conditions[]?; .type == "Ready" and .status == "True"))] | length == 1' >/dev/null
}

# The init container's log of the driver pod POD, run RESTART (default: its last run; "all": every run
# whose file the kubelet still keeps, the last two), from the kubelet's file on the node.
op_init_log() {
  local pod=$1 restart=${2:-} uid logs
  uid=$(k -n "$OP_NS" get pod "$pod" -o jsonpath='{.metadata.uid}' 2>/dev/null) || return 0
  [[ -n $restart ]] || restart=$(k -n "$OP_NS" get pod "$pod" \
    -o jsonpath='{.status.initContainerStatuses[?(@.name=="k8s-driver-manager")].restartCount}')
  logs=$("$SRC/scripts/node" env "$OP_NODE_STATE" | sed -n 's/^NODE_POD_LOGS=//p')
  if [[ $restart == all ]]; then
    cat "$logs/${OP_NS}_${pod}_${uid}"/k8s-driver-manager/*.log 2>/dev/null || true
  else
    cat "$logs/${OP_NS}_${pod}_${uid}/k8s-driver-manager/$restart.log" 2>/dev/null || true
  fi
}

# What a failure shows.
op_debug() {
  echo "--- pods"
  k get pods -A -o wide 2>&1
  echo "--- node"
  op_node_json | jq '{labels: .metadata.labels, annotations: .metadata.annotations, spec: .spec}' 2>&1
  echo "--- DaemonSets"
  k get ds -A -o wide 2>&1
  echo "--- pods not Running, and why"
  k get pods -A -o json 2>/dev/null | jq -r '.items[] | select(.status.phase != "Running")
    | "\(.metadata.namespace)/\(.metadata.name) \(.status.phase): \([.status.conditions[]? | select(.status != "True")
    | "\(.type) \(.reason // "") \(.message // "")"] | join("; "))"'
  echo "--- events (last 30)"
  k get events -A --sort-by=.lastTimestamp 2>&1 | tail -n 30
  op_operator_log
  echo "--- the upgrade controller's log (last 25 lines)"
  grep -E '"(upgrade|logger)":"?[^,]*upgrade|Upgrade|upgrade state' "$OP_WORK/operator.log" 2>/dev/null | tail -n 25
  echo "--- operator log (last 40 lines)"
  tail -n 40 "$OP_WORK/operator.log" 2>&1
  local pod; pod=$(op_driver_pod)
  if [[ -n $pod ]]; then
    echo "--- driver pod $pod status"
    k -n "$OP_NS" get pod "$pod" -o json | jq .status 2>&1 | head -n 80
    echo "--- its init container log"
    op_init_log "$pod" | tail -n 30
  fi
  echo "--- node logs"
  tail -n 20 "$OP_NODE_STATE"/logs/{kubelet,node-sim,kube-proxy}.log 2>&1
}

# The upgrade controller acts on a change of its node label, of a driver DaemonSet's or the ClusterPolicy's
# generation, and otherwise every 2 minutes: it does not watch pods, so a driver pod that became Ready waits
# for that requeue. op_nudge changes the ClusterPolicy's generation without changing anything it renders
# (the version of GDS, which is disabled) so that the controller looks now.
OP_NUDGES=0
op_nudge() {
  OP_NUDGES=$((OP_NUDGES + 1))
  k patch clusterpolicy cluster-policy --type merge \
    -p "{\"spec\":{\"gds\":{\"version\":\"2.29.4-nudge$OP_NUDGES\"}}}" >/dev/null
}

# op_wait_upgrade_done SECONDS VERSION: the driver pod of VERSION Ready, the validator Ready, then (nudged
# once) the node's label at upgrade-done.
# The upgrade controller moves a node on watch events and, when none comes, on its two-minute requeue: an
# upgrade can wait for two of those before the driver pod is even replaced, hence the callers' 480 s.
op_wait_upgrade_done() {
  local secs=$1 version=$2
  op_wait "$secs" "the driver pod of $version to be Ready" "op_driver_ready $version" || return 1
  op_wait "$secs" "the validator to be Ready" op_validator_ready || return 1
  [[ $(op_label "$OP_UPGRADE_LABEL") == upgrade-done ]] || op_nudge
  op_wait 150 "the node's $OP_UPGRADE_LABEL to be upgrade-done" \
    '[[ $(op_label "$OP_UPGRADE_LABEL") == upgrade-done ]]'
}
op_validator_ready() {
  k -n "$OP_NS" get pods -l app=nvidia-operator-validator --field-selector "spec.nodeName=$OP_NODE" -o json \
    2>/dev/null | jq -e '
    [.items[] | select(.metadata.deletionTimestamp == null)
      | select(any(.status.conditions[]?; .type == "Ready" and .status == "True"))] | length == 1' >/dev/null
}

# Leftovers of driver-manager on the node, one a line (nothing: clean): a taint, a cordon (unless $1 is
# "cordon-ok"), a paused operand label, an annotation of its own.
op_leftovers() {
  op_node_json | jq -r --arg cordon "${1:-}" '
    ((.spec.taints // [])[] | "taint \(.key)=\(.value // ""):\(.effect)"),
    (if .spec.unschedulable and $cordon != "cordon-ok" then "cordoned" else empty end),
    (.metadata.labels | to_entries[] | select(.value | test("paused-for")) | "paused label \(.key)=\(.value)"),
    (.metadata.annotations // {} | keys[] | select(startswith("nvidia.com/gpu-driver-manager.")) | "annotation \(.)")'
}

# The node's nvidia.com/gpu.deploy.* labels with an empty value, one key a line (what upstream's
# k8s-driver-manager leaves: it writes an operand label it found absent as "").
op_empty_deploy_labels() {
  op_node_json | jq -r '.metadata.labels | to_entries[]
    | select((.key | startswith("nvidia.com/gpu.deploy.")) and .value == "") | .key'
}

# How long the node was cordoned in watch NAME (seconds, from the first line with the cordon to the first
# line without it after that).
op_cordon_seconds() {
  awk '$NF == "true" && !on { on = $1 } $NF != "true" && on && !off { off = $1 }
       END { if (on && off) printf "%.1f\n", off - on; else print "-" }' "$OP_WORK/states.$1"
}

# The operand DaemonSets with every operand on (tests/operator/helm-values.yaml), by name.
OP_OPERANDS="gpu-feature-discovery nvidia-container-toolkit-daemonset nvidia-dcgm nvidia-dcgm-exporter
  nvidia-device-plugin-daemonset nvidia-mig-manager nvidia-node-status-exporter nvidia-operator-validator"
# The operands of OP_OPERANDS without a Ready pod (not terminating) on the node, one a line.
op_operands_not_ready() {
  k -n "$OP_NS" get pods --field-selector "spec.nodeName=$OP_NODE" -o json | jq -r --arg want "$(echo $OP_OPERANDS)" '
    [.items[] | select(.metadata.deletionTimestamp == null
      and any(.status.conditions[]?; .type == "Ready" and .status == "True")) | .metadata.ownerReferences[0].name]
    as $ready | $want | split(" ")[] | select(. as $n | $ready | index($n) | not)'
}
# "<DaemonSet> <pod uid>" of each operand pod (not terminating), sorted.
op_operand_uids() {
  k -n "$OP_NS" get pods --field-selector "spec.nodeName=$OP_NODE" -o json | jq -r --arg want "$(echo $OP_OPERANDS)" '
    ($want | split(" ")) as $w | .items[] | select(.metadata.deletionTimestamp == null)
    | select(.metadata.ownerReferences[0].name as $n | $w | index($n))
    | "\(.metadata.ownerReferences[0].name) \(.metadata.uid)"' | sort
}
# Host paths of the operand pods (OP_OPERANDS) that reach the machine: neither inside the node's own mounts
# (scripts/node, NODE_OPERATOR=1: /run, the /etc and /usr/local overlays, the kubelet's /var/lib/kubelet,
# /var/log) nor one of the machine's roots that exist anyway and that the stand-ins never write (/, /sys,
# /dev/char). One "<path> (<pod>)" a line.
op_unisolated_host_paths() {
  k -n "$OP_NS" get pods --field-selector "spec.nodeName=$OP_NODE" -o json | jq -r --arg want "$(echo $OP_OPERANDS)" '($want | split(" ")) as $w | .items[]
    | select(.metadata.ownerReferences[0].name as $n | $w | index($n))
    | .metadata.name as $pod | .spec.volumes[]? | select(.hostPath)
    | .hostPath.path | select(test("^/(run|var/run|etc|usr/local|var/lib/kubelet|var/log)(/|$)|^/$|^/sys$|^/dev/char$") | not)
    | "\(.) (\($pod))"' | sort -u
}
# The machine's own paths the operands would write on a real node (the toolkit's, the device plugin's, GPU
# feature discovery's, the validations), those that exist in the machine's mount namespace, one a line.
OP_MACHINE_PATHS="/run/nvidia /usr/local/nvidia /etc/containerd /run/containerd /run/cdi /etc/cdi
  /etc/kubernetes/node-feature-discovery /run/containers/oci/hooks.d /var/lib/kubelet/device-plugins
  /var/lib/kubelet/pod-resources"
op_machine_paths() {
  local p
  for p in $OP_MACHINE_PATHS; do [[ ! -e $p ]] || echo "$p"; done
}
