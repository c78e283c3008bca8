#!/usr/bin/env bash
# bench/operator-times.bash: where bench/operator-upgrade takes an upgrade's starting point and its end from
# its watches. The deletion request is the deletionTimestamp of the pod's first terminating line minus its
# grace period (not that timestamp, 30 s late; not the kubelet's final delete); upgrade-done is the first
# one after the node left that state (not the watch's first line, the state before the upgrade).
set -uo pipefail
. "$(dirname "$0")/../../bench/operator-times.bash"
failures=0
check() {  # WHAT GOT WANT
  if [[ $2 == "$3" ]]; then echo "ok: $1"; else echo "FAIL: $1: got '$2', want '$3'"; failures=$((failures + 1)); fi
}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

cat >"$dir/pods" <<'W'
1796404365.171 ADDED nvidia-driver-daemonset-76trv  
1796404365.182 ADDED nvidia-operator-validator-9szvn  
1796404365.590 MODIFIED nvidia-driver-daemonset-76trv 2026-12-04T17:13:15Z 30
1796404365.844 ADDED nvidia-driver-daemonset-t6hcf  
1796404366.022 MODIFIED nvidia-driver-daemonset-76trv 2026-12-04T17:12:46Z 0
1796404366.044 DELETED nvidia-driver-daemonset-76trv 2026-12-04T17:12:46Z 0
W
check "the deletion request is the first deletionTimestamp minus its grace period" \
  "$(pod_delete_request_at "$dir/pods" nvidia-driver-daemonset-76trv)" "$(date -d 2026-12-04T17:12:45Z +%s)"
check "no deletion request for a pod never seen terminating" \
  "$(pod_delete_request_at "$dir/pods" nvidia-operator-validator-9szvn)" ""
check "a pod's first DELETED line is when it was gone" \
  "$(pod_gone_at "$dir/pods" nvidia-driver-daemonset-76trv)" "1796404366.044"
check "a pod still there was not gone" "$(pod_gone_at "$dir/pods" nvidia-driver-daemonset-t6hcf)" ""

cat >"$dir/states" <<'W'
1796404365.200 upgrade-done 
1796404365.300 upgrade-required 
1796404365.400 cordon-required true
1796404365.500 pod-restart-required true
1796404403.100 validation-required true
1796404403.300 uncordon-required 
1796404403.400 upgrade-done 
W
check "upgrade-done is the first one after the node left it" "$(upgrade_done_at "$dir/states")" "1796404403.400"
head -n 4 "$dir/states" >"$dir/unfinished"
check "no upgrade-done while the upgrade has not finished" "$(upgrade_done_at "$dir/unfinished")" ""

cat >>"$dir/pods" <<'W'
1796404380.500 MODIFIED nvidia-operator-validator-9szvn 2026-12-04T17:13:30Z 30
1796404396.044 DELETED nvidia-operator-validator-9szvn 2026-12-04T17:13:00Z 0
W
check "the last of the pods to be gone is the latest of their DELETED lines" \
  "$(pods_all_gone_at "$dir/pods" nvidia-operator-validator-9szvn nvidia-driver-daemonset-76trv)" "1796404396.044"
check "nothing while one of them is still there" \
  "$(pods_all_gone_at "$dir/pods" nvidia-operator-validator-9szvn nvidia-driver-daemonset-t6hcf)" ""

t0=$(date -d 2026-12-04T17:12:45Z +%s)
check "each kubelet log line gets its seconds after the start, the line itself kept" \
  "$(printf '%s\n' '2026-12-04T17:13:16.250000000Z stderr F time="2026-12-04T17:13:16Z" level=info msg="a b"' | log_since "$t0")" \
  '+31.25 time="2026-12-04T17:13:16Z" level=info msg="a b"'
check "a line before the start counts back" \
  "$(printf '%s\n' '2026-12-04T17:12:44.500000000Z stdout F x' | log_since "$t0")" ' -0.50 x'
check "a line of another shape is kept as it is" "$(printf 'no time here\n' | log_since "$t0")" 'no time here'

((failures == 0)) || { echo "$failures check(s) failed"; exit 1; }
