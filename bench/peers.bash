# shellcheck shell=bash disable=SC2034,SC2004 # EXPECTED and ROLE belong to bench/run, which sources this
# bench/peers.bash - `bench/run --peers`: driver-manager side by side with the programs users would run
# instead (the peers), sourced by bench/run (it uses its functions: cluster_up, make_accounts, launched...).
#
# The peers are NVIDIA k8s-driver-manager built from its public source, kept outside this repository in
# "$DM_SHARED/peers/k8s-driver-manager" (default: ../shared beside the checkout), xz-compressed; they are
# unpacked into $PEER_CACHE (default /var/cache/driver-manager-peers), never into the work tree:
#   upstream    upstream-v0.12.0: the release the GPU Operator ships
#   seed        seed-pr177: the unmerged pull request that proposed resetting GPU client pods; on a control
#               plane older than 1.22 (no policy/v1 Eviction) its patched variant seed-pr177-v1beta1, whose
#               one Eviction call uses policy/v1beta1, and every row says so
#
# Every scenario x program runs on a fresh control plane and node-sim (one node):
#   light  2 operand DaemonSets (1 s to terminate) + 2 GPU workload pods (2 s)
#   clients  light + 10 client Deployments annotated nvidia.com/gpu.client (1 s, one of them 3 s) + 1 annotated
#       StatefulSet client (1 s), all holding the simulated GPU
#   standard  the standard scenario of bench/run: 8 operands, 10 annotated clients, 20 GPU workloads, 60 others
#       (TERM_SECONDS each)
# The peers run in a private mount namespace that shows them the simulated host, their delete_module calls
# answered from the simulated refcounts (bench/peer-host, bench/sim-modules); driver-manager runs as in
# bench/run (DRIVER_MANAGER_SIM_ROOT). Each program runs as a service account of its own: driver-manager
# bound to deploy/clusterrole.yaml, the peers to the GPU Operator's ClusterRole for its driver pods (the
# stock rules, below). The environment is the one the GPU Operator gives the init container (eviction on,
# auto drain off).
#
# Environment: PEER_PROGRAMS="ours upstream seed", PEER_TIMEOUT=420 (seconds before a run is stopped),
#   DM_SHARED, PEER_CACHE.

PEER_NAMES=(upstream-v0.12.0 seed-pr177 seed-pr177-v1beta1)
read -ra PEER_PROGRAMS <<<"${PEER_PROGRAMS:-ours upstream seed}"
PEER_TIMEOUT=${PEER_TIMEOUT:-420}
PEER_NODE=gpu-node

# The peers present and unpacked, or one line saying why not and exit status 2.
peers_check() {
  local shared p f sum
  shared=$(realpath -m "${DM_SHARED:-$ROOT/../shared}")
  local src="$shared/peers/k8s-driver-manager"
  for f in "${PEER_NAMES[@]}"; do
    if [[ ! -f "$src/$f.xz" ]]; then
      echo "bench/run --peers: no peers at $src ($f.xz missing; set DM_SHARED to the folder holding peers/): nothing measured" >&2
      exit 2
    fi
  done
  for tool in unshare setpriv xz sha256sum; do
    command -v "$tool" >/dev/null || die "$tool is missing (scripts/install-deps installs it)"
  done
  /usr/bin/python3 -c 'import seccomp' 2>/dev/null || die "python3-seccomp is missing (scripts/install-deps installs it)"
  ((EUID == 0)) || die "--peers needs root (a private mount namespace for the peers)"
  PEER_CACHE=${PEER_CACHE:-/var/cache/driver-manager-peers}
  mkdir -p "$PEER_CACHE"
  for f in "${PEER_NAMES[@]}"; do
    sum=$(awk -v f="k8s-driver-manager/$f" '$2 == f {print $1}' "$shared/peers/SHA256SUMS" 2>/dev/null)
    if [[ ! -x "$PEER_CACHE/$f" ]] || [[ -n "$sum" && "$(sha256sum <"$PEER_CACHE/$f" | cut -d' ' -f1)" != "$sum" ]]; then
      log "unpacking $f into $PEER_CACHE"
      xz -dc "$src/$f.xz" >"$PEER_CACHE/$f.tmp" && chmod +x "$PEER_CACHE/$f.tmp" && mv "$PEER_CACHE/$f.tmp" "$PEER_CACHE/$f"
      p=$(sha256sum <"$PEER_CACHE/$f" | cut -d' ' -f1)
      [[ -z "$sum" || "$p" == "$sum" ]] || die "$f: sha256 $p, SHA256SUMS says $sum"
    fi
  done
  for p in "${PEER_PROGRAMS[@]}"; do
    [[ $p == ours || $p == upstream || $p == seed ]] || die "unknown program '$p' in PEER_PROGRAMS (ours upstream seed)"
  done
}

# The node writes of the dm-system service accounts are logged with their request body, so that each
# write can be told by what it changes; everything else at Metadata level as usual.
peers_audit_policy() {
  cat >"$WORK/audit-policy.yaml" <<'EOF'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Request
  userGroups: ["system:serviceaccounts:dm-system"]
  verbs: ["create", "update", "patch", "delete"]
  resources: [{group: "", resources: ["nodes"]}]
- level: Metadata
EOF
}

# The GPU Operator's ClusterRole for its driver pods (state-driver), the rules the peers get in a cluster.
peer_role_yaml() {
  cat <<'EOF'
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: bench-peer}
rules:
- {apiGroups: [""], resources: [nodes], verbs: [get, list, patch, update, watch]}
- {apiGroups: [""], resources: [pods], verbs: [get, list, watch]}
- {apiGroups: [""], resources: [pods/eviction], verbs: [create]}
- {apiGroups: [resource.k8s.io], resources: [resourceclaims], verbs: [get, list]}
- {apiGroups: [apps], resources: [daemonsets], verbs: [get]}
EOF
}

statefulset_yaml() {  # statefulset_yaml <ns> <name> <node> <annotations>
  cat <<EOF
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: $2, namespace: $1}
spec:
  replicas: 1
  serviceName: $2
  selector: {matchLabels: {app: $2}}
  template:
    metadata:
      labels: {app: $2}
      annotations: {node-sim/terminate-after-seconds: "${POD_TERM:-$TERM_SECONDS}"$4}
    spec:
      nodeSelector: {kubernetes.io/hostname: $3}
      terminationGracePeriodSeconds: 30
      containers: [{name: main, image: example.com/$2:1}]
---
EOF
}

peers_setup() {  # peers_setup <scenario> <node>: operands, pods, node-sim; waits until all run
  local node=$2 ns="pods-$2" client='' i o labels=()
  [[ $1 == clients ]] && client=', nvidia.com/gpu.client: "true"'
  case $1 in
    light | clients)
      k apply -f <(operands_yaml 2 1) >/dev/null
      start_sim "$node" 8
      wait_sim "$node"
      for o in "${OPERANDS[@]:0:2}"; do labels+=("nvidia.com/gpu.deploy.${o#*:}=true"); done
      k label node "$node" --overwrite "${labels[@]}" >/dev/null
      k create namespace "$ns" >/dev/null
      wait_for 60 sa_exists "$ns" default || die "no default service account in $ns"
      {
        POD_TERM=2 deployment_yaml "$ns" workloads 2 "$node" '' gpu
        if [[ $1 == clients ]]; then
          for i in $(seq 1 10); do POD_TERM=$((i == 10 ? 3 : 1)) deployment_yaml "$ns" "client-$i" 1 "$node" "$client"; done
          POD_TERM=1 statefulset_yaml "$ns" client-sts "$node" "$client"
        fi
      } | k apply -f - >/dev/null
      EXPECTED[$node]=4
      [[ $1 == clients ]] && EXPECTED[$node]=15
      ;;
    standard)
      k apply -f <(operands_yaml) >/dev/null
      setup_node "$node" 10 20 60
      ;;
  esac
  wait_ready "$node"
}

node_state() {  # node_state <node>: what a run may leave behind, as JSON
  k get node "$1" -o json | jq '{labels: .metadata.labels,
    annotations: (.metadata.annotations // {} | with_entries(select(.key | startswith("nvidia.com/")))),
    taints: [(.spec.taints // [])[] | "\(.key)=\(.value // ""):\(.effect)"], unschedulable: (.spec.unschedulable // false)}'
}
left_on_node() {  # left_on_node <before.json> <after.json> <sim root>: one line, "nothing" if clean
  local left
  left=$(jq -rn --slurpfile b "$1" --slurpfile a "$2" '$b[0] as $b | $a[0] as $a
    | [ ([$a.labels | to_entries[] | select($b.labels[.key] == null and .value == "")] | length
         | select(. > 0) | "\(.) empty label\(if . > 1 then "s" else "" end)"),
        ($a.labels | to_entries[] | select($b.labels[.key] == null and .value != "") | "label \(.key)=\(.value)"),
        ($a.labels | to_entries[] | select($b.labels[.key] != null and $b.labels[.key] != .value) | "\(.key)=\(.value)"),
        ($b.labels | keys[] | select($a.labels[.] == null) | "label \(.) removed"),
        (($a.taints - $b.taints)[] | "taint \(.)"),
        (if $a.unschedulable and ($b.unschedulable | not) then "cordoned" else empty end),
        ($a.annotations | keys[] | select($b.annotations[.] == null) | "annotation \(.)") ] | join(", ")')
  if [[ -e "$3/sys/module/nvidia" ]]; then
    left+="${left:+, }driver loaded (refcnt $(cat "$3/sys/module/nvidia/refcnt" 2>/dev/null || echo '?'))"
  fi
  echo "${left:-nothing}"
}

peer_pipeline() {  # peer_pipeline <binary> <node> <dir>
  local bin=$1 node=$2 out=$3 sim="$WORK/sim-$2"
  env -i PATH="$DM_BIN:/usr/sbin:/usr/bin:/sbin:/bin" NODE_NAME="$node" KUBECONFIG="$WORK/$node.kubeconfig" \
    OPERATOR_NAMESPACE=gpu-operator ENABLE_GPU_POD_EVICTION=true ENABLE_AUTO_DRAIN=false DRAIN_USE_FORCE=false \
    DRAIN_POD_SELECTOR_LABEL= DRAIN_TIMEOUT_SECONDS=0s DRAIN_DELETE_EMPTYDIR_DATA=false \
    DRIVER_CONFIG_DIGEST=bench-digest DRIVER_MANAGER_SIM_ROOT="$sim" \
    timeout -k 10 "$PEER_TIMEOUT" "$ROOT/bench/peer-host" "$sim" "$out/delete_module.log" -- \
    /usr/bin/time -v -o "$out/time.txt" "${SHIM[@]}" "$out/pid" "$bin" uninstall_driver 2>&1 |
    stamp "$sim" "$out" >"$out/driver-manager.log"
}

# The audit entries of one program's run, one per request, classified by purpose: reads, evictions,
# Events, access reviews, and node writes by what they change (operand labels, taint, cordon, lease,
# progress annotation; several at once are joined with "+").
purposes() {  # purposes <audit.jsonl>
  jq -rs '
    def node_write: .verb as $v | (.requestObject // {}) as $o
      | (if ($o | type) == "array" then [$o[] | .path // ""] else
          [ ($o.metadata.labels // {} | keys[] | "/metadata/labels/" + .),
            ($o.metadata.annotations // {} | keys[] | "/metadata/annotations/" + .),
            ($o.spec // {} | keys[] | "/spec/" + .) ] end) as $p
      | [ (if any($p[]; test("/metadata/labels/nvidia.com(~1|/)gpu.deploy")) then "operand labels" else empty end),
          (if any($p[]; test("/spec/taints")) then "taint" else empty end),
          (if any($p[]; test("/spec/unschedulable")) then "cordon" else empty end),
          (if any($p[]; test("gpu-driver-manager.lease")) then "lease" else empty end),
          (if any($p[]; test("gpu-driver-manager.state")) then "progress" else empty end) ]
      | if length == 0 then "other (\($v))" else join("+") end;
    def purpose:
      if (.verb | IN("get", "list", "watch")) then "read \(.verb) \(.objectRef.resource // .requestURI)"
      elif .objectRef.subresource == "eviction" then "eviction"
      elif .objectRef.resource == "events" then "Event"
      elif .objectRef.resource == "selfsubjectaccessreviews" then "access review"
      elif .objectRef.resource == "nodes" then "node write: " + node_write
      else "\(.verb) \(.objectRef.resource)" end;
    group_by(.auditID) | map(.[-1])
    | map(purpose + (if (.responseStatus.code // 200) >= 400 then " -> \(.responseStatus.code)" else "" end))
    | group_by(.) | map("\(length) \(.[0])") | .[]' "$1"
}

peer_binary() {  # peer_binary <program>: path, then a label
  case $1 in
    ours) echo "$DM_BIN/driver-manager driver-manager" ;;
    upstream) echo "$PEER_CACHE/upstream-v0.12.0 upstream-v0.12.0" ;;
    seed)
      if (($(k version -o json 2>/dev/null | jq -r '.serverVersion.minor | tonumber? // 0') >= 22)); then
        echo "$PEER_CACHE/seed-pr177 seed-pr177"
      else
        echo "$PEER_CACHE/seed-pr177-v1beta1 seed-pr177-v1beta1 (patched variant)"
      fi
      ;;
  esac
}

peer_run() {  # peer_run <scenario> <program>: one run on a fresh control plane; one line into $WORK/peers
  local s=$1 prog=$2 node=$PEER_NODE bin label
  local dir="$WORK/$s/$prog" sim="$WORK/sim-$PEER_NODE"
  mkdir -p "$dir"
  rm -rf "$sim"
  cluster_up "$WORK/audit-policy.yaml"
  ROLE=driver-manager
  if [[ $prog != ours ]]; then
    k apply -f <(peer_role_yaml) >/dev/null
    ROLE=bench-peer
  fi
  make_accounts "$node"
  peers_setup "$s" "$node"
  read -r bin label < <(peer_binary "$prog")
  node_state "$node" >"$dir/before.json"
  local from load
  from=$(wc -l <"$AUDIT")
  load=$(cut -d' ' -f1 /proc/loadavg)
  log "$s: $label on $node (load $load)"
  if [[ $prog == ours ]]; then
    launched "$dir" dm_pipeline "$node" "$dir"
  else
    launched "$dir" peer_pipeline "$bin" "$node" "$dir"
  fi
  sleep 1  # the watch's audit entry completes when the program exits
  node_state "$node" >"$dir/after.json"
  tail -n +"$((from + 1))" "$AUDIT" >"$dir/audit-all.jsonl"
  jq -c --arg u "system:serviceaccount:dm-system:dm-$node" 'select(.user.username == $u)' \
    "$dir/audit-all.jsonl" >"$dir/audit.jsonl"
  local start end rc unload reqs writes rss anon refcnt left slowest beyond=-
  read -r start end rc <"$dir/times"
  unload=$(awk -v s="$start" '/Unloading NVIDIA driver kernel modules/ {printf "%.3f", $1 - s; exit}' "$dir/driver-manager.log")
  slowest=$(slowest_pod "$dir/audit-all.jsonl")
  [[ -n "$unload" ]] && beyond=$(awk -v u="$unload" -v s="$slowest" 'BEGIN {printf "%.3f", u - s}')
  reqs=$(jq -r .auditID "$dir/audit.jsonl" | sort -u | wc -l)
  writes=$(jq -r 'select((.verb | IN("create", "update", "patch", "delete", "deletecollection"))
      and .objectRef.resource != "selfsubjectaccessreviews") | .auditID' "$dir/audit.jsonl" | sort -u | wc -l)
  rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$dir/time.txt" 2>/dev/null)
  anon=$(cut -d' ' -f2 "$dir/mem" 2>/dev/null)
  refcnt=$(cat "$dir/refcnt" 2>/dev/null || echo -)
  left=$(left_on_node "$dir/before.json" "$dir/after.json" "$sim")
  [[ $rc == 124 ]] && rc="stopped after ${PEER_TIMEOUT}s"
  printf '%s\t%s\t%s\t%s\t%s\t%.3f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$s" "$label" "${unload:--}" \
    "$slowest" "$beyond" \
    "$(awk -v s="$start" -v e="$end" 'BEGIN {print e - s}')" "$reqs" "$writes" "${rss:--}" "${anon:--}" \
    "$refcnt" "$rc" "$load" "$left" >>"$WORK/peers"
  { echo "  $s $label:"; purposes "$dir/audit.jsonl" | sed 's/^/    /'; } >>"$WORK/purposes"
  if [[ -s "$dir/delete_module.log" ]]; then
    { echo "  $s $label:"; awk -v s="$start" '{printf "    +%.3f s delete_module(%s) refcnt %s: %s\n", $1 - s, $2, $3, $4}' \
      "$dir/delete_module.log"; } >>"$WORK/unloads"
  fi
  grep -E 'level=(error|fatal)' "$dir/driver-manager.log" | tail -n 2 | cut -c1-240 |
    sed "s/^/  $s $label: /" >>"$WORK/errors" || true
  cluster_down
}

peers_main() {
  peers_audit_policy
  local s p
  : >"$WORK/peers"
  for s in "${SCENARIOS[@]}"; do
    for p in "${PEER_PROGRAMS[@]}"; do peer_run "$s" "$p"; done
  done
  echo "bench/run --peers ${SCENARIOS[*]} on $(date -u '+%Y-%m-%d %H:%M UTC'): $("$DM_BIN/driver-manager" --version 2>&1 | head -n1);" \
    "$(nproc) cores, load (1 min) at each run's start in the last column: wall-clock figures are noisy"
  {
    printf 'scenario\tprogram\tto unload s\t÷ ours\tslowest pod s\tbeyond it s\twall s\trequests\t÷ ours\twrites\tpeak RSS KiB\t÷ ours\tanon peak KiB\t÷ ours\trefcnt at unload\texit\tload\tleft on the node\n'
    awk -F'\t' -v OFS='\t' '
      function ratio(a, b) { return (a == "-" || b == "-" || b + 0 == 0) ? "-" : sprintf("%.1f", a / b) }
      { row[NR] = $0; if ($2 == "driver-manager") { u[$1] = $3; q[$1] = $7; r[$1] = $9; m[$1] = $10 } }
      END { for (i = 1; i <= NR; i++) { $0 = row[i]
              print $1, $2, $3, ratio($3, u[$1]), $4, $5, $6, $7, ratio($7, q[$1]), $8, $9, ratio($9, r[$1]), $10,
                    ratio($10, m[$1]), $11, $12, $13, $14 } }' "$WORK/peers"
  } | column -t -s $'\t'
  echo
  echo "requests by purpose (node writes by what they change; -> code: refused):"
  cat "$WORK/purposes"
  if [[ -s "$WORK/unloads" ]]; then
    echo
    echo "the peers' delete_module calls, answered from the simulated refcounts (time from the program's start):"
    cat "$WORK/unloads"
  fi
  if [[ -s "$WORK/errors" ]]; then
    echo
    echo "last error lines:"
    cat "$WORK/errors"
  fi
}
