#!/usr/bin/env bash
# driver-manager's image as the k8s-driver-manager init container of the stock GPU Operator: the operator's
# ClusterPolicy (and NVIDIADriver) controller renders the driver DaemonSet, its upgrade controller walks the
# node through its upgrade states, and our init container does its part, on a real node (containerd, kubelet,
# kube-proxy) of a real control plane. One control plane, node and operator for all scenarios, in order:
#   install   the chart installed by Helm as it comes (the operator in the cluster, its ClusterPolicy, the
#             chart's own k8s-driver-manager image: upstream's v0.12.0): upstream's no-driver path, the
#             driver and the validator up, upgrade-done
#   operands  every operand of the chart (toolkit, device plugin, DCGM, DCGM exporter, GPU feature discovery,
#             MIG manager, node status exporter, validator) Ready from its stand-in; the node's nvidia.com/gpu
#             capacity is the kubelet's, from the device plugin stand-in's registration; no host path of
#             theirs reaches the machine
#   upstream  a driver upgrade under upstream's image: it completes; what it leaves on the node is listed
#             (empty nvidia.com/gpu.deploy.* labels)
#   switch    annotated GPU clients and a GPU workload; docs/gpu-operator.md's Helm upgrade with the project's values
#             file (our image) and a new driver version: every operand pod taken off the node and back,
#             clients reset, driver unloaded, everything back, nothing of ours left and none of upstream's
#             leftovers kept
#   rollback  the clients stopped (upstream does not know them), then docs/gpu-operator.md's roll-back to
#             upstream's image: upstream's upgrade completes and nothing of ours is left on the node
#   blocked   the documented ClusterPolicy patch (our image again); a client held by a PodDisruptionBudget:
#             each attempt fails naming it and restores the node; the budget relaxed: the next attempt
#             completes
#   crd       the NVIDIADriver CRD path as docs/gpu-operator.md's canary, on two nodes (the real node and a
#             node-sim node, each in its own pool with its own NVIDIADriver): the hand-over from the
#             ClusterPolicy (install), then our image and a new driver in the canary pool's object only
#             (upgrade): the canary node is upgraded by our init container, the other pool's keeps upstream's
# Each scenario prints its wall time and the node's nvidia.com/gpu-driver-upgrade-state sequence as a watch
# saw it. Skipped (exit 77) without the stock operator in $DM_SHARED/peers/gpu-operator.
# Set-up and test choices: tests/operator/lib.bash and docs/development.md, "The GPU Operator tier".
# shellcheck disable=SC2016,SC2034  # op_wait's conditions are single-quoted: evaluated on each try
set -uo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/operator/lib.bash
. "$SRC/tests/operator/lib.bash"
# shellcheck source=tests/image/lib.sh
. "$SRC/tests/image/lib.sh"

op_check_peers
trap 'op_watch_stop; op_down' EXIT
t_all=$(date +%s)
# Upstream's image under the chart's own name: the install runs it, as on a cluster that has not switched.
OP_EXTRA_IMAGES=$(op_upstream_images "$OP_UPSTREAM_IMAGE" | tr '\n' ' ') || op_die "cannot build upstream's image"
op_unpack
# No GPUs of node-sim's: the device plugin stand-in registers them with the kubelet.
OP_NODE_GPUS=0
machine_paths_before=$(op_machine_paths)
op_up
# The label GPU feature discovery writes on a MIG-capable GPU (its stand-in writes none): the operator then
# deploys the MIG manager.
k label node "$OP_NODE" --overwrite nvidia.com/mig.capable=true >/dev/null
printf '[ operator ] control plane and node up in %d s\n' $(($(date +%s) - t_all))

# A scenario's end: its wall time and the label sequence.
scenario_end() {
  local took=$(($(date +%s) - $2))
  op_watch_stop
  printf '[ operator ] %s: %d s; %s: %s\n' "$1" "$took" "$OP_UPGRADE_LABEL" "$(op_states "$1")"
  printf '[ operator ] %s: seconds into the scenario: %s\n' "$1" "$(op_states_timed "$2")"
}
# The driver pod's init container: "<exit code> <restart count>" of its current (terminated) state.
init_state() {
  k -n "$OP_NS" get pod "$1" -o json |
    jq -r '.status.initContainerStatuses[]? | select(.name == "k8s-driver-manager") |
           "\(.state.terminated.exitCode // "-") \(.restartCount)"'
}
uids() { k -n gpu-apps get pods -l "app=$1" -o jsonpath='{range .items[*]}{.metadata.uid}{" "}{end}'; }
all_apps_running() {
  k -n gpu-apps get pods -o json | jq -e '[.items[] | select(.metadata.deletionTimestamp == null
    and .status.phase == "Running")] | length == 5' >/dev/null
}
refcnt() { cat "$OP_SIM/sys/module/nvidia/refcnt" 2>/dev/null || echo none; }
# The driver pod POD's init container image.
init_image() {
  k -n "$OP_NS" get pod "$1" -o jsonpath='{.spec.initContainers[?(@.name=="k8s-driver-manager")].image}'
}
# A patch of deploy/gpu-operator as the docs give it, with this test's registry (localhost) in place of the
# example's and TAG as the version; the image is tagged TAG in the node's containerd first.
doc_patch() {  # FILE TAG -> the patch file's path
  "$SRC/scripts/node" ctr "$OP_NODE_STATE" images tag --force localhost/driver-manager:dev \
    "localhost/driver-manager:$2" >/dev/null || op_die "cannot tag the image as $2"
  sed -e 's|registry.example.com/gpu|localhost|' -e "s|\"0.13.0\"|\"$2\"|" "$SRC/deploy/gpu-operator/$1" \
    >"$OP_WORK/$2-$1"
  printf '%s\n' "$OP_WORK/$2-$1"
}
fail_debug() { fail "$@"; op_debug; [[ -z ${OP_WATCH_PID:-} ]] || echo "--- $OP_UPGRADE_LABEL so far: $(op_states_timed)"; }
# The run of LOG was upstream's program: ours ends every run with its summary line, upstream has none.
check_upstream_log() {  # NAME LOG
  if grep -q 'msg=Summary:' <<<"$2"; then fail "$1" "a Summary line: driver-manager's, not upstream's"; else pass "$1"; fi
}
# The node's label KEY, or "(absent)".
label_or_absent() { op_node_json | jq -r --arg k "$1" '.metadata.labels[$k] // "(absent)"'; }
# Events of driver-manager about the node (reasons NodePreparedForDriver, DriverUninstallFailed).
our_events() {
  k get events -A --field-selector "involvedObject.kind=Node,involvedObject.name=$OP_NODE" -o json |
    jq '[.items[] | select(.reason == "NodePreparedForDriver" or .reason == "DriverUninstallFailed")] | length'
}
# The --set arguments of docs/gpu-operator.md's roll-back command (its first sh block), one a line.
rollback_sets() {
  python3 - "$SRC/docs/gpu-operator.md" <<'PY'
import shlex, sys
text = open(sys.argv[1]).read().split("## Roll back to upstream's image", 1)[1]
args = shlex.split(text.split("```sh", 1)[1].split("```", 1)[0].replace("\\\n", " "))
print("\n".join(args[i + 1] for i, a in enumerate(args) if a == "--set"))
PY
}

# --- install ---------------------------------------------------------------------------------------------
t0=$(date +%s)
op_watch_start install
v=${OP_VERSIONS[0]}
op_helm_install "$v"
pass "install: helm installed the chart and the operator runs in the cluster as its Deployment"
if op_wait_upgrade_done 480 "$v"; then
  pod=$(op_driver_pod)
  check_eq "install: the init container is the chart's own image, upstream's" "$OP_UPSTREAM_IMAGE" "$(init_image "$pod")"
  check_eq "install: the init container exited 0 on its first run" "0 0" "$(init_state "$pod")"
  log=$(op_init_log "$pod")
  check_has "install: ... through upstream's no-driver path" \
    "No NVIDIA driver loaded, skipping eviction of GPU clients and workloads" "$log"
  check_upstream_log "install: ... run by upstream's program" "$log"
  check_eq "install: the node reached upgrade-done" upgrade-done "$(op_label "$OP_UPGRADE_LABEL")"
  check_eq "install: no taint, cordon, paused label or annotation of driver-manager's" "" "$(op_leftovers)"
  check_eq "install: the simulated driver is loaded (refcount)" 0 "$(refcnt)"
else
  fail_debug "install: the driver did not come up and reach upgrade-done"
fi
scenario_end install "$t0"

# --- every operand ---------------------------------------------------------------------------------------
t0=$(date +%s)
operands_ready() {  # NAME: every operand Ready (a check) within 300 s
  if op_wait 300 "every operand pod to be Ready" '[[ -z $(op_operands_not_ready) ]]'; then
    pass "$1: every operand runs Ready"
  else
    fail_debug "$1: every operand runs Ready" "not Ready: $(op_operands_not_ready | tr '\n' ' ')"
  fi
}
operands_ready operands
gpus() { op_node_json | jq -r '"\(.status.capacity["nvidia.com/gpu"] // "-") \(.status.allocatable["nvidia.com/gpu"] // "-")"'; }
op_wait 60 "the node's nvidia.com/gpu capacity" '[[ $(gpus) == "2 2" ]]'
check_eq "operands: the node's nvidia.com/gpu capacity and allocatable are the device plugin's 2 devices" "2 2" "$(gpus)"
dp_pod=$(k -n "$OP_NS" get pods -l app=nvidia-device-plugin-daemonset -o jsonpath='{.items[0].metadata.name}')
check_has "operands: the device plugin stand-in registered nvidia.com/gpu with the kubelet" \
  "registered nvidia.com/gpu with the kubelet: 2 device(s)" "$(op_pod_log "$OP_NS" "$dp_pod" nvidia-device-plugin)"
check_has "operands: ... and the kubelet took the registration" 'resourceName="nvidia.com/gpu"' \
  "$(grep -i 'registration' "$OP_NODE_STATE/logs/kubelet.log")"
check_eq "operands: node-sim published no nvidia.com/gpu capacity of its own" "" \
  "$(grep 'nvidia.com/gpu capacity' "$OP_NODE_STATE/logs/node-sim.log")"
check_eq "operands: no host path of the operand pods reaches the machine" "" "$(op_unisolated_host_paths)"
check_eq "operands: none of the machine's operand paths appeared outside the node" "$machine_paths_before" \
  "$(op_machine_paths)"
printf '[ operator ] operands: Ready %d s after the install\n' $(($(date +%s) - t0))

# --- an upgrade under upstream's image -------------------------------------------------------------------
# A new driver version, nothing else: the chart keeps its own k8s-driver-manager image.
t0=$(date +%s)
op_watch_start upstream
v=${OP_VERSIONS[1]}
op_helm upgrade gpu-operator "$OP_PEERS/chart" -n "$OP_NS" --reuse-values --force-conflicts \
  --set "driver.version=$v" >"$OP_WORK/helm-upstream.log" 2>&1 ||
  fail "upstream: helm upgrade --reuse-values with a new driver version" "$(cat "$OP_WORK/helm-upstream.log")"
UPSTREAM_LEFT=
if op_wait_upgrade_done 480 "$v"; then
  pod=$(op_driver_pod)
  check_eq "upstream: the init container is upstream's" "$OP_UPSTREAM_IMAGE" "$(init_image "$pod")"
  check_eq "upstream: ... exited 0 on its first run" "0 0" "$(init_state "$pod")"
  log=$(op_init_log "$pod")
  check_has "upstream: it unloaded the driver and completed" "Driver uninstallation completed successfully" "$log"
  check_upstream_log "upstream: ... run by upstream's program" "$log"
  check_has "upstream: the controller deleted the driver pod and restarted it" \
    "pod-deletion-required -> pod-restart-required" "$(op_states upstream)"
  check_eq "upstream: no taint, cordon or paused label left" "" "$(op_leftovers)"
  # What upstream leaves: the operand labels it found absent, written as "" by its pause and its restore.
  UPSTREAM_LEFT=$(op_empty_deploy_labels | tr '\n' ' ')
  if [[ -n $UPSTREAM_LEFT ]]; then pass "upstream: it left empty operand labels: $UPSTREAM_LEFT"; else
    fail "upstream: it left empty operand labels" "none on the node: the switch-over checks nothing of them"; fi
  printf '[ operator ] upstream: the node'"'"'s nvidia.com labels after its upgrade: %s\n' \
    "$(op_node_json | jq -c '.metadata.labels | with_entries(select(.key | startswith("nvidia.com/")))')"
else
  fail_debug "upstream: the node did not reach upgrade-done with driver $v"
fi
scenario_end upstream "$t0"

# --- the switch-over, with clients -----------------------------------------------------------------------
sed "s/@NODE@/$OP_NODE/" "$SRC/tests/fixtures/operator/clients.yaml" | k apply -f - >/dev/null
op_wait 120 "the GPU clients and the workload to run" 'all_apps_running && [[ $(refcnt) == 5 ]]' ||
  fail_debug "switch: the clients did not start"
declare -A before
for app in gpu-health-agent gpu-metrics gpu-cache gpu-tolerant training; do before[$app]=$(uids "$app"); done
operands_ready "switch: before the upgrade"
operands_before=$(op_operand_uids)
# The pilot checklist's optional Events rule: a run then leaves an Event on the node.
k apply -f "$SRC/deploy/gpu-operator/events-rbac.yaml" >/dev/null || fail "switch: the Events RBAC applies"
t0=$(date +%s)
op_watch_start switch
v=${OP_VERSIONS[2]}
# docs/gpu-operator.md's Helm upgrade, with deploy/gpu-operator/values.yaml as it is: the image it names is this
# build's, under that name in the node's containerd; and a new driver version. Helm 4 applies a release it
# installed server-side, and the test's nudges have changed the ClusterPolicy with kubectl since: as
# docs/gpu-operator.md says for that case, --force-conflicts (the chart's values win).
values_image=$(python3 -c 'import sys, yaml
m = yaml.safe_load(open(sys.argv[1]))["driver"]["manager"]
print("%s/%s:%s" % (m["repository"], m["image"], m["version"]))' "$SRC/deploy/gpu-operator/values.yaml")
"$SRC/scripts/node" ctr "$OP_NODE_STATE" images tag --force localhost/driver-manager:dev "$values_image" >/dev/null ||
  op_die "cannot tag the image as $values_image"
op_helm upgrade gpu-operator "$OP_PEERS/chart" -n "$OP_NS" --reuse-values -f "$SRC/deploy/gpu-operator/values.yaml" \
  --force-conflicts --set "driver.version=$v" >"$OP_WORK/helm-upgrade.log" 2>&1 ||
  fail "switch: helm upgrade --reuse-values with the project's values file" "$(cat "$OP_WORK/helm-upgrade.log")"
if op_wait_upgrade_done 480 "$v"; then
  pod=$(op_driver_pod)
  check_eq "switch: the values file set the init container's image" "$values_image" "$(init_image "$pod")"
  check_eq "switch: ... and --reuse-values kept the init container's environment" /run/nvidia \
    "$(k -n "$OP_NS" get pod "$pod" -o json | jq -r '.spec.initContainers[] | select(.name == "k8s-driver-manager")
      | .env[]? | select(.name == "DRIVER_MANAGER_SIM_ROOT") | .value')"
  check_eq "switch: the init container exited 0 on its first run" "0 0" "$(init_state "$pod")"
  log=$(op_init_log "$pod")
  check_has "switch: it saw the operator's upgrade policy" "Auto upgrade policy of the GPU driver on the node is enabled" "$log"
  check_has "switch: it reset the annotated clients" "reset 4 GPU clients" "$log"
  check_has "switch: it unloaded the driver" "Unloaded kernel module nvidia" "$log"
  check_has "switch: ... and completed" "Driver uninstallation completed successfully" "$log"
  states=$(op_states switch)
  check_has "switch: the controller deleted the driver pod and restarted it" "pod-deletion-required -> pod-restart-required" "$states"
  op_wait 120 "the clients and the workload to be back" 'all_apps_running && [[ $(refcnt) == 5 ]]' ||
    fail_debug "switch: the clients and the workload did not come back"
  for app in gpu-health-agent gpu-metrics gpu-cache gpu-tolerant training; do
    now=$(uids "$app")
    if [[ -n $now && $now != "${before[$app]}" ]]; then pass "switch: $app was reset and is back"; else
      fail "switch: $app was reset and is back" "before: ${before[$app]}" "now: $now"; fi
  done
  check_eq "switch: nothing of driver-manager's left, not cordoned" "" "$(op_leftovers)"
  for key in $UPSTREAM_LEFT; do
    check_eq "switch: upstream's empty label $key is gone" "(absent)" "$(label_or_absent "$key")"
  done
  # Our label pause took the operand pods off the node: it waited for them, and each came back as a new pod;
  # the node status exporter, whose label neither upstream nor driver-manager pauses (it holds no GPU),
  # stayed.
  check_has "switch: it waited for the operand pods to shut down" "All GPU operand pods on the node have shut down" "$log"
  printf '[ operator ] switch: our operand waits: %s; "Still waiting" lines: %s\n' \
    "$(grep -oE 'Waiting for [^ ]+ to shutdown' <<<"$log" | sed 's/^Waiting for //; s/ to shutdown$//' | tr '\n' ' ')" \
    "$(grep -c 'Still waiting for GPU operand pods' <<<"$log")"
  operands_ready "switch: after the upgrade"
  check_eq "switch: every paused operand's pod was replaced (taken off the node and back), the node status exporter's kept" \
    nvidia-node-status-exporter "$(join <(echo "$operands_before") <(op_operand_uids) | awk '$2 == $3 { print $1 }')"
  check_eq "switch: the node's nvidia.com/gpu is the device plugin's again" "2 2" "$(gpus)"
  printf '[ operator ] switch: our run said: %s\n' "$(grep -o 'Removing the empty node label "[^"]*"' <<<"$log" |
    sed 's/Removing the empty node label //' | tr '\n' ' ')"
  check_eq "switch: it left an Event on the node (the optional RBAC)" yes "$( (($(our_events) > 0)) && echo yes)"
else
  fail_debug "switch: the node did not reach upgrade-done with driver $v"
fi
scenario_end switch "$t0"

# --- roll back to upstream's image -----------------------------------------------------------------------
# Upstream does not know the nvidia.com/gpu.client annotation: its unload would fail while the annotated
# clients hold the GPU, so they are stopped first (docs/gpu-operator.md, Roll back to upstream's image).
k delete namespace gpu-apps --wait=false >/dev/null
op_wait 180 "the clients to be gone" '[[ $(refcnt) == 0 ]] && ! k get namespace gpu-apps >/dev/null 2>&1' ||
  fail_debug "rollback: the clients did not go"
t0=$(date +%s)
op_watch_start rollback
v=${OP_VERSIONS[3]}
# The docs' command, with the chart from the peers (and, as above, --force-conflicts and a new driver version).
sets=()
while IFS= read -r a; do sets+=(--set "$a"); done < <(rollback_sets)
op_helm upgrade gpu-operator "$OP_PEERS/chart" -n "$OP_NS" --reuse-values "${sets[@]}" --force-conflicts \
  --set "driver.version=$v" >"$OP_WORK/helm-rollback.log" 2>&1 ||
  fail "rollback: the documented helm upgrade back to upstream's image" "$(cat "$OP_WORK/helm-rollback.log")"
check_eq "rollback: the ClusterPolicy names upstream's image again" "$OP_UPSTREAM_IMAGE" \
  "$(k get clusterpolicy cluster-policy -o json | jq -r '.spec.driver.manager | "\(.repository)/\(.image):\(.version)"')"
events_before=$(our_events)
if op_wait_upgrade_done 480 "$v"; then
  pod=$(op_driver_pod)
  check_eq "rollback: the init container is upstream's again" "$OP_UPSTREAM_IMAGE" "$(init_image "$pod")"
  check_eq "rollback: ... exited 0 on its first run" "0 0" "$(init_state "$pod")"
  log=$(op_init_log "$pod")
  check_has "rollback: upstream's upgrade completed" "Driver uninstallation completed successfully" "$log"
  check_upstream_log "rollback: ... run by upstream's program" "$log"
  check_has "rollback: the controller deleted the driver pod and restarted it" \
    "pod-deletion-required -> pod-restart-required" "$(op_states rollback)"
  check_eq "rollback: nothing of ours on the node (taint, cordon, paused label, annotation)" "" "$(op_leftovers)"
  check_eq "rollback: our Events stay, by design, until the API server expires them" "$events_before" "$(our_events)"
  UPSTREAM_LEFT=$(op_empty_deploy_labels | tr '\n' ' ')
else
  fail_debug "rollback: the node did not reach upgrade-done with driver $v under upstream's image"
fi
scenario_end rollback "$t0"
# The clients back for the scenarios below.
sed "s/@NODE@/$OP_NODE/" "$SRC/tests/fixtures/operator/clients.yaml" | k apply -f - >/dev/null
op_wait 120 "the GPU clients and the workload to run" 'all_apps_running && [[ $(refcnt) == 5 ]]' ||
  fail_debug "rollback: the clients did not start again"

# --- blocked, then unblocked -----------------------------------------------------------------------------
# The init container's state: "<restarts> <waiting|running|terminated> <exit code of the last finished run>".
init_phase() {
  k -n "$OP_NS" get pod "$1" -o json 2>/dev/null |
    jq -r '.status.initContainerStatuses[]? | select(.name == "k8s-driver-manager") |
      "\(.restartCount) \(.state | keys[0]) \(.state.terminated.exitCode // .lastState.terminated.exitCode // "-")"'
}
# The driver pod POD's init container is between two attempts (its last run exited 1 and the kubelet has not
# started the next: terminated, or waiting out its back-off), with a restart count of at least MIN; sets
# PHASE and RESTARTS.
failed_and_waiting() {
  PHASE=$(init_phase "$1")
  local s e
  read -r RESTARTS s e <<<"$PHASE"
  [[ ($s == waiting || $s == terminated) && $e == 1 && $RESTARTS -ge $2 ]]
}
# The node's lease was renewed after the driver pod POD's last failed run finished: the next attempt runs.
# Both times are whole seconds, and the kubelet may start the next attempt within the second the failed one
# ended, so the same second counts (a lease the failed run left would also be named by the next attempt's
# log, which check_no_takeover reads). LEASE_VS_FINISHED says what was compared, for a failure's message.
next_attempt_holds_the_node() {
  local renewed finished
  renewed=$(op_node_json | jq -r '.metadata.annotations["nvidia.com/gpu-driver-manager.lease"] // "{}"
    | fromjson? | .renewTime // empty')
  finished=$(k -n "$OP_NS" get pod "$1" -o json | jq -r '.status.initContainerStatuses[]?
    | select(.name == "k8s-driver-manager") | .state.terminated.finishedAt // .lastState.terminated.finishedAt // empty')
  LEASE_VS_FINISHED="lease renewed ${renewed:-(none)}, failed run finished ${finished:-(unknown)}"
  [[ -n $renewed && -n $finished ]] && (($(date -d "$renewed" +%s) >= $(date -d "$finished" +%s)))
}
# A run that finds an earlier attempt's lease or taint on the node says so: the earlier attempt did not
# restore the node.
check_no_takeover() {  # NAME LOG
  local found
  found=$(grep -E "of an earlier attempt of|left by an earlier run of driver-manager" <<<"$2" | head -n 2) || true
  if [[ -n $found ]]; then fail "$1" "found: $found"; else pass "$1"; fi
}
k apply -f - >/dev/null <<PDB
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: gpu-metrics-budget, namespace: gpu-apps}
spec: {minAvailable: 1, selector: {matchLabels: {app: gpu-metrics}}}
PDB
op_wait 60 "the budget to allow no disruption" \
  '[[ $(k -n gpu-apps get pdb gpu-metrics-budget -o jsonpath="{.status.currentHealthy}/{.status.disruptionsAllowed}") == 1/0 ]]'
t0=$(date +%s)
op_watch_start blocked
v=${OP_VERSIONS[4]}
# The manager image swapped the way docs/gpu-operator.md gives it for a ClusterPolicy without Helm (the same
# image under another tag; on a Helm install the patch holds until the next helm upgrade renders the policy).
k patch clusterpolicy cluster-policy --type merge --patch-file "$(doc_patch clusterpolicy-patch.yaml swap)" \
  >/dev/null || fail "blocked: the documented ClusterPolicy patch applies"
# With the new version, a 20 s client deadline (GPU_CLIENT_EVICTION_TIMEOUT, default 5 min), so that an
# attempt held by the budget fails in seconds; it stays for the rest of the run.
k patch clusterpolicy cluster-policy --type merge -p "{\"spec\":{\"driver\":{\"version\":\"$v\",
  \"manager\":{\"env\":[{\"name\":\"DRIVER_MANAGER_SIM_ROOT\",\"value\":\"/run/nvidia\"},
  {\"name\":\"GPU_CLIENT_EVICTION_TIMEOUT\",\"value\":\"20s\"}]}}}}" >/dev/null
# The operator reconciling while a run holds the operand labels paused: a ClusterPolicy change (op_nudge)
# while an attempt waits for its budget-held client. The operator's node labeler adds the labels a node lacks
# and keeps those it has, so the paused values survive it and no operand pod comes back. Evidence from one
# node read: while the paused-labels record is on the node the attempt has not restored it (the record goes
# with the restore), and the pods are read before it (none was up before the change). Sets
# RECONCILE_CHECKED once checked.
paused_keys() { jq -r '.metadata.labels | to_entries[] | select(.value | test("paused-for")) | .key' | sort; }
validators_up() {
  k -n "$OP_NS" get pods -l app=nvidia-operator-validator -o json | jq --arg n "$OP_NODE" \
    '[.items[] | select(.spec.nodeName == $n and .metadata.deletionTimestamp == null)] | length'
}
# The operator's node labeling, after its first LINES log lines: the ClusterPolicy controller labels the GPU
# nodes on every reconcile and ends with "Number of nodes with GPU label"; the node-labeling controller logs
# "Reconciling node labels".
operator_labelings() {  # LINES
  op_operator_log
  tail -n +$(($1 + 1)) "$OP_WORK/operator.log" | grep -cE '"msg":"(Number of nodes with GPU label|Reconciling node labels)"'
}
operator_log_lines() { op_operator_log; wc -l <"$OP_WORK/operator.log"; }
reconcile_while_paused() {  # SECONDS
  local paused lines up node
  op_wait "$1" "an attempt holding the operand labels paused, the validator pod taken off" \
    'paused=$(op_node_json | paused_keys); [[ -n $paused && $(validators_up) == 0 ]]' || return 0
  lines=$(operator_log_lines)
  op_nudge
  if ! op_wait 60 "the operator's node labeling after the ClusterPolicy change" \
      '(($(operator_labelings "$lines") > 0))'; then
    fail "blocked: the operator reconciled the node labels after a ClusterPolicy change"
    return 0
  fi
  up=$(validators_up)
  node=$(op_node_json)
  if [[ $(jq -r '.metadata.annotations["nvidia.com/gpu-driver-manager.paused-labels"] // ""' <<<"$node") == "" ]]; then
    echo "     (the attempt had restored the node when the reconcile was seen: checked at the next one)"
    return 0
  fi
  check_eq "blocked: the operator's reconcile during the run kept the operand labels paused" \
    "$(tr '\n' ' ' <<<"$paused")" "$(paused_keys <<<"$node" | tr '\n' ' ')"
  check_eq "blocked: ... and brought no operand pod back (validator)" 0 "$up"
  RECONCILE_CHECKED=1
}
blocked_pod= first_pod=
min_restarts=0
RECONCILE_CHECKED=
# The upgrade controller moves the node on watch events and, when none comes, on its own requeue every two
# minutes: the way to the first attempt (upgrade-required .. pod-restart-required) can wait for up to two of
# those, so the first attempt is given 480 s; the second follows the first by the kubelet's back-off only.
for attempt in 1 2; do
  [[ -n $RECONCILE_CHECKED ]] || reconcile_while_paused $((attempt == 1 ? 480 : 240))
  if op_wait $((attempt == 1 ? 480 : 240)) "failed attempt $attempt of the init container" \
      'blocked_pod=$(op_driver_pod); [[ -n $blocked_pod ]] && failed_and_waiting "$blocked_pod" $min_restarts'; then
    min_restarts=$((RESTARTS + 1))
    # The failed run's own log (the kubelet names it after the restart count it ran with).
    log=$(op_init_log "$blocked_pod" "$RESTARTS")
    check_has "blocked: failed attempt $attempt names the budget" "gpu-metrics-budget" "$log"
    check_has "blocked: failed attempt $attempt ends with its summary" "level=error msg=Summary: failed" \
      "$(tail -n 1 <<<"$log")"
    ((attempt == 1)) ||
      check_no_takeover "blocked: failed attempt $attempt found nothing of attempt $((attempt - 1)) left" "$log"
    # Between two attempts (the kubelet's back-off): the node as before the attempt, but for the
    # controller's cordon. The kubelet reports a container's start late, so a node read while the pod still
    # shows the failed run can already carry the next attempt's work: a lease renewed after the failed run
    # finished is the next attempt's, and then the next attempt's own log is the evidence (below).
    left=$(op_leftovers cordon-ok)
    if [[ -z $left ]] || ! next_attempt_holds_the_node "$blocked_pod"; then
      check_eq "blocked: after failed attempt $attempt the node is restored (no taint, paused label, record)" "" "$left"
      [[ -z $left ]] || echo "     (${LEASE_VS_FINISHED:-})"
    else
      echo "     (attempt $((attempt + 1)) had already taken the node when it was read: its log is checked)"
    fi
    if [[ $attempt == 1 ]]; then first_pod=$blocked_pod; else
      check_eq "blocked: the same driver pod restarts its init container (nothing deleted, nothing stranded)" \
        "$first_pod" "$blocked_pod"
    fi
  else
    fail_debug "blocked: no failed attempt $attempt"
  fi
done
[[ -n $RECONCILE_CHECKED ]] || fail "blocked: the operator reconciled while an attempt held the labels paused" \
  "both attempts had restored the node by the time the operator's reconcile was seen"
check_eq "blocked: the controller waits in pod-restart-required" pod-restart-required "$(op_label "$OP_UPGRADE_LABEL")"
k -n gpu-apps patch pdb gpu-metrics-budget --type merge -p '{"spec":{"minAvailable":0}}' >/dev/null
if op_wait_upgrade_done 480 "$v"; then
  check_eq "blocked: the same pod's next attempt completed" "$first_pod" "$(op_driver_pod)"
  check_eq "blocked: the documented ClusterPolicy patch set the init container's image" \
    localhost/driver-manager:swap "$(init_image "$first_pod")"
  read -r _ s e <<<"$(init_phase "$first_pod")"
  check_eq "blocked: ... exit 0 after the failed attempts" "terminated 0" "$s $e"
  check_no_takeover "blocked: the completing attempt found nothing of the failed ones left" \
    "$(op_init_log "$first_pod")"
  op_wait 120 "the clients and the workload to be back" 'all_apps_running && [[ $(refcnt) == 5 ]]' ||
    fail_debug "blocked: the clients and the workload did not come back"
  check_eq "blocked: nothing of driver-manager's left, not cordoned" "" "$(op_leftovers)"
  for key in $UPSTREAM_LEFT; do
    check_eq "blocked: upstream's empty label $key (left by the roll-back) is gone" "(absent)" "$(label_or_absent "$key")"
  done
else
  fail_debug "blocked: the node did not reach upgrade-done once the budget allowed the eviction"
fi
k -n gpu-apps delete pdb gpu-metrics-budget >/dev/null
scenario_end blocked "$t0"

# --- the NVIDIADriver CRD path, two pools: the canary -------------------------------------------------------
# docs/gpu-operator.md's canary: one NVIDIADriver per node pool, each selecting its pool's nodes; our image in
# the canary pool's object only. Two nodes: the real node in the pool "canary", and a second GPU node played by
# node-sim in the pool "main" (its pods run nothing: it shows what the operator does with a node of a pool
# that keeps upstream's image). The ClusterPolicy hands the driver to the two objects: each node's driver pod,
# orphaned when the ClusterPolicy's DaemonSet goes, is replaced through the upgrade states (install); then a
# new driver version and our image in the canary's object (upgrade): the canary node is upgraded by our init
# container, the main node keeps its driver pod and upstream's image and is never cordoned.
POOL_LABEL=example.com/gpu-pool
NODE2=gpu-node-2
t_canary=$(date +%s)
k label node "$OP_NODE" --overwrite "$POOL_LABEL=canary" >/dev/null
op_sim_node_up "$NODE2" "$POOL_LABEL=main" || fail_debug "canary: a second GPU node (node-sim) is Ready"
op_wait 120 "the operator's driver pod on $NODE2" \
  '[[ $(op_driver_json "$NODE2" | jq "[.items[] | select(.status.phase == \"Running\")] | length") == 1 ]]' ||
  fail_debug "canary: the operator runs its driver DaemonSet's pod on $NODE2"
canary_setup=$(($(date +%s) - t_canary))
# What the nodes run, for the checks: NODE's driver pod "<uid> <init container image> <owner>".
driver_of() {
  op_driver_json "$1" | jq -r '[.items[] | select(.metadata.deletionTimestamp == null)][0]
    | "\(.metadata.uid) \(.spec.initContainers[] | select(.name == "k8s-driver-manager") | .image) \(.metadata.ownerReferences[0].name // "-")"'
}
node2_label() { k get node "$NODE2" -o json | jq -r --arg l "$OP_UPGRADE_LABEL" '.metadata.labels[$l] // ""'; }
node2_watch() { : >"$OP_WORK/states.$1"; op_node_watch "$NODE2" "$OP_WORK/states.$1"; NODE2_WATCH_PID=$!; }
node2_watch_stop() { kill -- "-$NODE2_WATCH_PID" 2>/dev/null; wait "$NODE2_WATCH_PID" 2>/dev/null; }
# NVIDIADriver NAME with the ClusterPolicy's driver as it is now (our image since the blocked scenario), driver
# VERSION, for the nodes of pool POOL; with "upstream", the chart's own k8s-driver-manager image.
nvidiadriver() {  # NAME VERSION POOL [upstream]
  python3 -c '
import sys, yaml
policy, name, version, pool_label, pool, program, upstream = sys.argv[1:8]
d = yaml.safe_load(open(policy))["spec"]["driver"]
manager = dict(d["manager"])
if program == "upstream":
    reference, tag = upstream.rsplit(":", 1)
    repository, image = reference.rsplit("/", 1)
    manager.update(repository=repository, image=image, version=tag)
spec = {"driverType": "gpu", "nodeSelector": {pool_label: pool}, "repository": d["repository"],
        "image": d["image"], "version": version, "imagePullPolicy": "IfNotPresent", "manager": manager,
        "startupProbe": d["startupProbe"]}
yaml.safe_dump({"apiVersion": "nvidia.com/v1alpha1", "kind": "NVIDIADriver", "metadata": {"name": name},
                "spec": spec}, sys.stdout)' "$OP_WORK/clusterpolicy-now.yaml" "$1" "$2" "$POOL_LABEL" "$3" \
    "${4:-ours}" "$OP_UPSTREAM_IMAGE" | k apply -f - >/dev/null
}
# The ClusterPolicy's driver as it is now (our image since the blocked scenario) is the NVIDIADrivers'.
k get clusterpolicy cluster-policy -o yaml >"$OP_WORK/clusterpolicy-now.yaml"
t0=$(date +%s)
op_watch_start crd-install
node2_watch crd-install-main
v=${OP_VERSIONS[5]}
OP_DRIVER_SELECTOR=app.kubernetes.io/component=nvidia-driver
k patch clusterpolicy cluster-policy --type merge -p '{"spec":{"driver":{"useNvidiaDriverCRD":true}}}' >/dev/null
nvidiadriver canary "$v" canary
nvidiadriver main "$v" main upstream
# Each node's ClusterPolicy driver pod, orphaned when its DaemonSet goes, is replaced through the upgrade
# states: the operator's node-labeling controller marks its node upgrade-required. That controller runs on
# events only, and when its run came before the NVIDIADriver's owner label reached its cache, nothing runs it
# again (the new pod stays Pending beside the old one, kept off the node by its anti-affinity; the upgrade
# controller alone takes the node back to upgrade-done). A ClusterPolicy change runs it: the test nudges when
# a node was not marked upgrade-required in 60 s, at most three times.
for nudge in 1 2 3; do
  op_wait 60 "the operator to mark both nodes upgrade-required for the driver's replacement" \
    '[[ $(op_states crd-install) == *upgrade-required* && $(op_states crd-install-main) == *upgrade-required* ]]' &&
    break
  op_log "a node was not marked upgrade-required: nudging the operator's node labeling ($nudge)"
  op_nudge
done
if op_wait_upgrade_done 480 "$v"; then
  pod=$(op_driver_pod)
  check_eq "crd install: the canary NVIDIADriver's DaemonSet runs the driver" true \
    "$(k -n "$OP_NS" get pod "$pod" -o json | jq '.metadata.ownerReferences[0].name != "nvidia-driver-daemonset"')"
  check_eq "crd install: the init container exited 0 on its first run" "0 0" "$(init_state "$pod")"
  check_has "crd install: ... replacing the ClusterPolicy's driver" "Driver uninstallation completed successfully" \
    "$(op_init_log "$pod")"
  check_eq "crd install: nothing of driver-manager's left" "" "$(op_leftovers)"
  op_wait 120 "the clients and the workload to be back" 'all_apps_running && [[ $(refcnt) == 5 ]]' ||
    fail_debug "crd install: the clients and the workload did not come back"
else
  fail_debug "crd install: the NVIDIADriver's driver did not come up and reach upgrade-done"
fi
# The main pool's node: its driver pod replaced by the main NVIDIADriver's, with upstream's image (the
# controller may wait for its 2-minute requeue there too: nudged once when needed).
t_main=$(date +%s)
main_done() {
  [[ $(node2_label) == upgrade-done && $(driver_of "$NODE2" | cut -d' ' -f3) != nvidia-driver-daemonset &&
     $(op_states crd-install-main) == *upgrade-required* ]]
}
op_wait 30 "the main pool's node to be upgrade-done" main_done || { op_nudge; op_wait 150 "the main pool's node" main_done; } ||
  fail_debug "crd install: the main pool's node reached upgrade-done with the main NVIDIADriver's pod" \
    "$NODE2: $(op_states crd-install-main); driver pod: $(driver_of "$NODE2")"
canary_setup=$((canary_setup + $(date +%s) - t_main))
main_driver=$(driver_of "$NODE2")
check_eq "crd install: the main pool's node runs upstream's image (the main NVIDIADriver's)" "$OP_UPSTREAM_IMAGE" \
  "$(cut -d' ' -f2 <<<"$main_driver")"
node2_watch_stop
scenario_end crd-install "$t0"
printf '[ operator ] crd-install: %s (main pool): %s\n' "$NODE2" "$(op_states crd-install-main)"

t0=$(date +%s)
op_watch_start crd-upgrade
node2_watch crd-upgrade-main
v=${OP_VERSIONS[6]}
nvidiadriver canary "$v" canary
# Our image in the canary pool's object, as docs/gpu-operator.md gives it.
k patch nvidiadriver canary --type merge --patch-file "$(doc_patch nvidiadriver.yaml canary)" >/dev/null ||
  fail "crd upgrade: the documented NVIDIADriver patch applies to the canary pool's object"
if op_wait_upgrade_done 480 "$v"; then
  pod=$(op_driver_pod)
  check_eq "crd upgrade: the documented NVIDIADriver patch set the canary's init container image" \
    localhost/driver-manager:canary "$(init_image "$pod")"
  check_eq "crd upgrade: the init container exited 0 on its first run" "0 0" "$(init_state "$pod")"
  log=$(op_init_log "$pod")
  check_has "crd upgrade: it reset the annotated clients" "reset 4 GPU clients" \
    "$(grep -E "GPU client|Summary" <<<"$log")"
  check_has "crd upgrade: ... and completed" "Driver uninstallation completed successfully" "$log"
  check_has "crd upgrade: the controller deleted the driver pod and restarted it" \
    "pod-deletion-required -> pod-restart-required" "$(op_states crd-upgrade)"
  op_wait 120 "the clients and the workload to be back" 'all_apps_running && [[ $(refcnt) == 5 ]]' ||
    fail_debug "crd upgrade: the clients and the workload did not come back"
  check_eq "crd upgrade: nothing of driver-manager's left, not cordoned" "" "$(op_leftovers)"
else
  fail_debug "crd upgrade: the node did not reach upgrade-done with driver $v"
fi
node2_watch_stop
check_eq "canary: the main pool's node kept its driver pod and upstream's image" "$main_driver" "$(driver_of "$NODE2")"
check_eq "canary: ... and stayed upgrade-done while the canary was upgraded" "upgrade-done" \
  "$(op_states crd-upgrade-main)"
check_eq "canary: ... never cordoned" "" "$(awk '$NF == "true"' "$OP_WORK/states.crd-upgrade-main")"
check_eq "canary: the main pool's NVIDIADriver still names upstream's image and the first version" \
  "$OP_UPSTREAM_IMAGE ${OP_VERSIONS[5]}" \
  "$(k get nvidiadriver main -o json | jq -r '.spec.manager | "\(.repository)/\(.image):\(.version)"') $(k get nvidiadriver main -o jsonpath='{.spec.version}')"
scenario_end crd-upgrade "$t0"
printf '[ operator ] canary: the second node cost %d s (its start, and waiting for it beyond the real node)\n' \
  "$canary_setup"

finish
